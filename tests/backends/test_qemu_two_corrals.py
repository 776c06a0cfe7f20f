"""Two corrals on the same QEMU VMs (two SSH sessions of one user), and a corral beside
another QMP client: each gets a QMP monitor of its own, sees the right states at once and
follows what the other does."""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from pathlib import Path

from qemu_guest import wait_serial

from backends.models import InstanceRef, InstanceStatus
from backends.qemu import QEMUBackend

from .test_qemu_backend import next_event

ROOT = Path(__file__).resolve().parents[2]

LIST = """
import asyncio, sys, time
sys.path.insert(0, {root!r})
from backends.qemu import QEMUBackend, qemu_remote
async def main():
    t = time.monotonic()
    b = QEMUBackend(qemu_remote({vms!r}), timeout=10)
    await b.connect()
    rows = await b.list_instances()
    print(time.monotonic() - t, *(f"{{i.name}}={{i.status.value}}" for i in rows))
    await b.close()
asyncio.run(main())
"""


async def other_process_lists(vms: str) -> tuple[float, dict[str, str]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", LIST.format(root=str(ROOT), vms=vms),
        stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    seconds, *rows = out.decode().split()
    return float(seconds), dict(r.split("=") for r in rows)


async def test_two_corrals_and_a_foreign_qmp_client_share_a_vm(qemu, guest):
    kernel, initrd = guest
    await qemu.create("shared", kernel=str(kernel), initrd=str(initrd), memory_mib=256,
                      cmdline="console=ttyS0", accel="tcg")
    await qemu.create("later", kernel=str(kernel), initrd=str(initrd), memory_mib=256,
                      cmdline="console=ttyS0", accel="tcg")
    ref, later = InstanceRef("qemu", "shared"), InstanceRef("qemu", "later")
    await qemu.start(ref)
    await wait_serial(qemu, "shared", "corral-guest ready")
    # somebody else's QMP client on the first free monitor (qmp-shell, libvirt, a script)
    foreign = socket.socket(socket.AF_UNIX)
    foreign.connect(str(qemu.vms.run_dir("shared") / "qmp-1.sock"))
    second = QEMUBackend(qemu.remote, timeout=10)
    started = time.monotonic()
    await second.connect()
    rows = {i.name: i.status for i in await second.list_instances()}
    took = time.monotonic() - started
    assert rows == {"shared": InstanceStatus.RUNNING, "later": InstanceStatus.STOPPED}
    # and a third corral, in another process, at the same time
    seconds, others = await other_process_lists(qemu.remote.address)
    assert others == {"shared": "running", "later": "stopped"}
    print(f"second corral listed in {took:.2f} s (beside a foreign QMP client), "
          f"third in {seconds:.2f} s")
    assert took < 5 and seconds < 8
    a_events, b_events = qemu.watch(), second.watch()
    assert (await anext(a_events)).action == "connected"
    assert (await anext(b_events)).action == "connected"
    try:
        await second.freeze(ref)  # B acts, A follows
        await next_event(a_events, ref, {"instance-paused"})
        assert (await qemu.get_instance(ref)).status is InstanceStatus.FROZEN
        await qemu.unfreeze(ref)  # A acts, B follows
        await next_event(b_events, ref, {"instance-resumed"})
        assert (await second.get_instance(ref)).status is InstanceStatus.RUNNING
        await second.start(later)  # B starts a VM: A notices
        await next_event(a_events, later, {"instance-started"}, timeout=10)
        assert (await qemu.get_instance(later)).status is InstanceStatus.RUNNING
        await qemu.stop(ref, force=True)  # A stops: B sees it stop
        await next_event(b_events, ref, {"instance-stopped"})
        assert (await second.get_instance(ref)).status is InstanceStatus.STOPPED
        await qemu.stop(later, force=True)
    finally:
        foreign.close()
        await a_events.aclose()
        await b_events.aclose()
        await second.close()
