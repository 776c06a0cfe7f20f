"""Console servers end with their VM (issue 32, item 4), against real QEMU (TCG): the
screen's server, idle with no viewer, does not read QEMU's socket and would outlive a
deleted or stopped VM; deleting the VM ends it, and a backend's connect or the VM's next
start ends what a stopped VM left."""

from __future__ import annotations

import asyncio
import os
import time

from backends.console.orphans import holder
from backends.models import InstanceRef
from backends.qemu import QEMUBackend


async def screen_server(qemu, name: str):
    """A running blank-disk BIOS VM whose screen was watched once (its server stays)."""
    await qemu.create(name, memory_mib=128, disk_gib=1, accel="tcg")
    ref = InstanceRef("qemu", name)
    await qemu.start(ref)
    session = await qemu.open_display(ref)
    await session.close()  # nobody watches now: the server waits for the next viewer
    sock = qemu.vms.run_dir(name) / "display.ws"
    pid = holder(sock)
    assert pid is not None, "the screen's server runs"
    return ref, sock, pid


def gone(pid: int, timeout: float = 5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if open(f"/proc/{pid}/stat").read().split()[2] == "Z":
            return True
        time.sleep(0.05)
    return False


async def test_deleting_a_vm_ends_its_console_servers(qemu):
    ref, sock, pid = await screen_server(qemu, "gone")
    await qemu.delete(ref, force=True)
    assert gone(pid), "the screen's server outlived its deleted VM"


async def test_a_connect_and_a_start_end_what_a_stopped_vm_left(qemu):
    ref, sock, pid = await screen_server(qemu, "left")
    await qemu.stop(ref, force=True)
    await asyncio.sleep(1)
    assert holder(sock) == pid, "idle, the server did not notice QEMU going"
    other = QEMUBackend(qemu.remote, timeout=10)  # the next corral
    try:
        await other.connect()
        assert gone(pid), "a connect ends the servers of VMs that do not run"
    finally:
        await other.close()
    # the same through the VM's next start
    await qemu.start(ref)
    session = await qemu.open_display(ref)
    await session.close()
    pid = holder(sock)
    await qemu.stop(ref, force=True)
    await qemu.start(ref)
    assert gone(pid), "a start ends its VM's servers of an earlier run"
    await qemu.stop(ref, force=True)
