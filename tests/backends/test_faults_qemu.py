"""Faults of local QEMU VMs, done for real: a QEMU stopped with SIGSTOP (QMP never
answers), a QEMU killed with SIGKILL under an attached console, a guest flooding its
serial console (the serial log stays bounded)."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest
from qemu_guest import wait_serial

from backends.errors import NotResponding
from backends.models import InstanceRef, InstanceStatus
from backends.qemu import QEMUBackend

from .test_qemu_backend import Collect, next_event


async def running_vm(qemu, guest, name: str):
    kernel, initrd = guest
    await qemu.create(name, kernel=str(kernel), initrd=str(initrd), memory_mib=256,
                      cmdline="console=ttyS0", accel="tcg")
    ref = InstanceRef("qemu", name)
    await qemu.start(ref)
    await wait_serial(qemu, name, "corral-guest ready")
    return ref


async def test_sigstopped_qemu_times_out_shows_unknown_and_recovers(qemu, guest):
    ref = await running_vm(qemu, guest, "stopped")
    pid = qemu.vms.pid("stopped")
    qemu.monitor.qmp_timeout = 1.5
    stream = qemu.watch()
    assert (await anext(stream)).action == "connected"
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        with pytest.raises(NotResponding, match="does not answer"):
            await qemu.freeze(ref)
        detect = time.monotonic() - started
        assert detect < 5
        ev = await next_event(stream, ref, {"instance-updated"})
        assert "does not answer" in ev.message
        inst = await qemu.get_instance(ref)
        assert inst.status is InstanceStatus.UNKNOWN and "SIGSTOP" in inst.extra["reason"]
        # the metrics sampler gives up quickly and says nothing wrong
        started = time.monotonic()
        await qemu.get_states([ref])
        assert time.monotonic() - started < 4
        # a new corral meanwhile lists it at once, as stopped by a signal
        other = QEMUBackend(qemu.remote, timeout=10)
        t = time.monotonic()
        await other.connect()
        listed = {i.name: i for i in await other.list_instances()}
        assert time.monotonic() - t < 4
        assert listed["stopped"].status is InstanceStatus.UNKNOWN
        assert "SIGSTOP" in listed["stopped"].extra["reason"]
        await other.close()
        os.kill(pid, signal.SIGCONT)
        await asyncio.sleep(0.5)  # the late answer to 'stop' arrives: the guest pauses
        await qemu.unfreeze(ref)
        assert (await qemu.get_instance(ref)).status is InstanceStatus.RUNNING
        print(f"SIGSTOPped QEMU detected in {detect:.2f} s (QMP timeout 1.5 s)")
        # and a force stop of a stopped QEMU works (SIGKILL after QMP gives no answer)
        os.kill(pid, signal.SIGSTOP)
        await qemu.stop(ref, force=True)
        assert qemu.vms.pid("stopped") is None
    finally:
        await stream.aclose()
        if os.path.exists(f"/proc/{pid}"):
            os.kill(pid, signal.SIGCONT)


async def test_qemu_killed_under_a_running_console(qemu, guest):
    ref = await running_vm(qemu, guest, "victim")
    session = await qemu.open_console(ref)
    sink = Collect()
    await session.start(sink)
    await session.send_bytes(b"echo alive-$((6*7))\n")
    await sink.wait_for(b"alive-42")
    stream = qemu.watch()
    assert (await anext(stream)).action == "connected"
    try:
        killed = time.monotonic()
        os.kill(qemu.vms.pid("victim"), signal.SIGKILL)
        ev = await next_event(stream, ref, {"instance-stopped"})
        detect = time.monotonic() - killed
        assert "killed outside corral" in ev.message
        deadline = time.monotonic() + 10
        while sink.reason is None:
            assert time.monotonic() < deadline, "the console did not say it ended"
            await asyncio.sleep(0.05)
        print(f"kill -9 of QEMU: stopped event after {detect:.2f} s, console: {sink.reason}")
        assert (await qemu.get_instance(ref)).status is InstanceStatus.STOPPED
        # and the VM starts again, with a working console
        await qemu.start(ref)
        await wait_serial(qemu, "victim", "corral-guest ready")
    finally:
        await stream.aclose()
        await session.close()


async def test_serial_log_of_a_flooding_guest_stays_bounded(qemu, guest):
    from backends.console.serial_log import check_every

    # A 256 KiB limit (the smallest a user can set is 1 MiB, the default 4 MiB: the same
    # code with other numbers, tests/unit/test_serial_log.py): the server looks at the
    # log's size every 64 KiB of output, so a 420 kB flood finds it over its limit and
    # trims it. A serial flood under TCG goes at ~70 kB/s of a whole core: no more.
    limit = qemu.serial_log_max = 256 << 10
    ref = await running_vm(qemu, guest, "flood")
    session = await qemu.open_console(ref)
    sink = Collect()
    await session.start(sink)
    await session.send_bytes(b"yes corral-flood-line-of-text | head -c 420000; "
                             b"echo done-$((1+1))\n")
    log = qemu.vms.run_dir("flood") / "serial.log"
    peak = 0
    started = time.monotonic()
    deadline = started + 120
    total = 0
    while b"done-2" not in sink.data[-4096:]:
        assert time.monotonic() < deadline, "the flood did not end"
        peak = max(peak, log.stat().st_size)
        total += max(0, len(sink.data) - 8192)
        sink.data = sink.data[-8192:]
        await asyncio.sleep(0.02)
    await session.close()
    print(f"serial.log peak {peak / 2**10:.0f} KiB for a 420 kB flood at "
          f"{total / (time.monotonic() - started) / 1e3:.0f} kB/s (limit {limit >> 10} KiB)")
    assert peak <= limit + 2 * check_every(limit)  # looked at every quarter of the limit
    prev = (log.parent / "serial.log.prev").read_bytes()
    assert len(prev) == limit // 4 and b"corral-flood-line-of-text" in prev  # the history
    await qemu.stop(ref, force=True)
