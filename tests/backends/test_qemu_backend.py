"""The QEMU backend against real QEMU (TCG: a Linux guest hangs under KVM on these
machines), booting a Debian cloud kernel with a busybox initramfs."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qemu_guest import wait_serial

from backends import first_listing
from backends.errors import Conflict, InvalidInput, NotFound, StopTimedOut
from backends.models import InstanceRef, InstanceStatus
from backends.qemu import QEMUBackend


async def next_event(stream, ref, actions, timeout=20):
    deadline = time.monotonic() + timeout
    while True:
        ev = await asyncio.wait_for(anext(stream), max(0.1, deadline - time.monotonic()))
        if ev.ref == ref and ev.action in actions:
            return ev


async def test_kernel_vm_lifecycle_and_events(qemu, guest):
    kernel, initrd = guest
    inst = await qemu.create("vm1", kernel=str(kernel), initrd=str(initrd), memory_mib=256,
                             cmdline="console=ttyS0 panic=-1", accel="tcg")
    assert inst.status is InstanceStatus.STOPPED and inst.type.value == "vm"
    ref = InstanceRef("qemu", "vm1")
    stream = qemu.watch()
    assert (await anext(stream)).action == "connected"
    try:
        await qemu.start(ref)
        await next_event(stream, ref, {"instance-started"})
        await wait_serial(qemu, "vm1", "corral-guest ready")
        assert (await qemu.get_instance(ref)).status is InstanceStatus.RUNNING

        first = (await qemu.get_states([ref]))[ref]
        assert first.memory_usage > 0 and first.pid
        await asyncio.sleep(0.3)
        assert (await qemu.get_states([ref]))[ref].cpu_percent is not None

        await qemu.freeze(ref)
        await next_event(stream, ref, {"instance-paused"})
        assert (await qemu.get_instance(ref)).status is InstanceStatus.FROZEN
        # running or paused, only QMP knows: no first listing of the definitions then
        assert first_listing(qemu.remote) is None
        await qemu.unfreeze(ref)
        await next_event(stream, ref, {"instance-resumed"})

        await qemu.restart(ref)
        await next_event(stream, ref, {"instance-restarted"})

        # busybox as init ignores the ACPI power button: graceful stop times out
        with pytest.raises(StopTimedOut, match="did not power off within 2 s"):
            await qemu.stop(ref, timeout=2)
        await qemu.stop(ref, force=True)
        ev = await next_event(stream, ref, {"instance-stopped"})
        assert ev.message == ""  # we stopped it: no complaint
        assert (await qemu.get_instance(ref)).status is InstanceStatus.STOPPED
        assert qemu.vms.pid("vm1") is None
        listing = first_listing(qemu.remote)
        assert [(i.ref, i.status, i.image) for i in listing.instances] == \
            [(ref, InstanceStatus.STOPPED, f"kernel {Path(kernel).name}")]
    finally:
        await stream.aclose()


async def test_vm_outlives_corral_and_an_outside_kill_is_reported(qemu, guest, tmp_path):
    kernel, initrd = guest
    await qemu.create("vm2", kernel=str(kernel), initrd=str(initrd), memory_mib=256,
                      cmdline="console=ttyS0", accel="tcg")
    ref = InstanceRef("qemu", "vm2")
    await qemu.start(ref)
    pid = qemu.vms.pid("vm2")
    await qemu.close()  # corral quits; QEMU keeps running
    assert qemu.vms.pid("vm2") == pid

    again = QEMUBackend(qemu.remote, timeout=10)
    await again.connect()  # a new corral adopts the running VM
    try:
        listed = {i.name: i for i in await again.list_instances()}
        assert listed["vm2"].status is InstanceStatus.RUNNING
        stream = again.watch()
        assert (await anext(stream)).action == "connected"
        os.kill(pid, signal.SIGKILL)
        ev = await next_event(stream, ref, {"instance-stopped"})
        assert "killed outside corral" in ev.message
        inst = await again.get_instance(ref)
        assert inst.status is InstanceStatus.STOPPED
        assert "killed outside corral" in inst.extra["reason"]
        await stream.aclose()
    finally:
        await again.close()


async def test_create_validation_and_delete_leave_nothing_behind(qemu, guest, tmp_path):
    kernel, initrd = guest
    vms = Path(qemu.remote.address)
    with pytest.raises(InvalidInput, match="not a valid VM name"):
        await qemu.create("Bad_Name", kernel=str(kernel))
    with pytest.raises(InvalidInput, match="does not exist"):
        await qemu.create("vm3", kernel="/nonexistent/vmlinuz")
    with pytest.raises(InvalidInput, match="Nothing to boot"):
        await qemu.create("vm3")
    with pytest.raises(InvalidInput, match="tcg or auto"):
        await qemu.create("vm3", kernel=str(kernel), accel="hvf")
    assert list(vms.iterdir()) == []

    # an empty disk + network boot, and a qcow2 overlay of an existing image
    await qemu.create("pxe", disk_gib=1, network_boot=True, accel="tcg")
    assert (vms / "pxe" / "disk0.qcow2").exists()
    await qemu.create("ovl", image=str(vms / "pxe" / "disk0.qcow2"), accel="tcg")
    with pytest.raises(InvalidInput, match="already exists"):
        await qemu.create("ovl", disk_gib=1)

    ref = InstanceRef("qemu", "pxe")
    await qemu.start(ref)
    with pytest.raises(Conflict, match="Stop it first"):
        await qemu.delete(ref)
    await qemu.delete(ref, force=True)
    assert not (vms / "pxe").exists()
    with pytest.raises(NotFound):
        await qemu.get_instance(ref)


class Collect:
    def __init__(self):
        self.data = b""
        self.reason = None

    def feed(self, data):
        self.data += data

    def closed(self, reason):
        self.reason = reason

    async def wait_for(self, needle, timeout=20):
        deadline = time.monotonic() + timeout
        while needle not in self.data:
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} not in {self.data[-300:]!r}")
            await asyncio.sleep(0.05)


async def test_serial_console_attach_detach_reattach_with_history(qemu, guest):
    kernel, initrd = guest
    await qemu.create("con", kernel=str(kernel), initrd=str(initrd), memory_mib=256,
                      cmdline="console=ttyS0", accel="tcg")
    ref = InstanceRef("qemu", "con")
    with pytest.raises(Conflict, match="not running"):
        await qemu.open_console(ref)
    await qemu.start(ref)
    await wait_serial(qemu, "con", "corral-guest ready")
    # output printed while nobody was attached is in the history
    session = await qemu.open_console(ref)
    sink = Collect()
    await session.start(sink)
    await sink.wait_for(b"corral-guest ready")
    await session.send_bytes(b"echo first-$((20+1))\n")
    await sink.wait_for(b"first-21")
    await session.close()  # detach: the VM keeps running
    assert qemu.vms.pid("con") is not None
    await session.wait()

    again = await qemu.open_console(ref)
    sink2 = Collect()
    await again.start(sink2)
    await again.send_bytes(b"echo second-$((40+2))\n")
    await sink2.wait_for(b"second-42")
    assert b"first-21" in sink2.data  # shown again on re-attach
    await again.close()
    await qemu.stop(ref, force=True)


async def test_live_resources_through_qmp(qemu, guest):
    kernel, initrd = guest
    await qemu.create("res", kernel=str(kernel), initrd=str(initrd), memory_mib=512,
                      cpus=1, disk_gib=1, cmdline="console=ttyS0", accel="tcg")
    ref = InstanceRef("qemu", "res")
    # stopped: saved for the next start
    assert await qemu.set_limits(ref, {"write_bps": "1048576"}) == {"write_bps": "restart"}
    await qemu.start(ref)
    await wait_serial(qemu, "res", "corral-guest ready")
    fields = {f.key: f for f in await qemu.get_limits(ref)}
    assert fields["cpus"].applies == "live" and fields["cpus"].value == "1"
    assert fields["memory_max"].applies == "restart"

    result = await qemu.set_limits(ref, {"cpus": "2", "memory": "384", "disk": "2GiB",
                                         "read_iops": "500"})
    assert result == {"cpus": "live", "memory": "live", "disk": "live", "read_iops": "live"}
    assert len(await qemu.monitor.execute(ref, "query-cpus-fast")) == 2
    block = next(b for b in await qemu.monitor.execute(ref, "query-block") if b["device"] == "drive0"
                 or b.get("qdev", "").startswith("/machine/peripheral/vblk0"))
    assert block["inserted"]["iops_rd"] == 500
    assert block["inserted"]["bps_wr"] == 1048576  # the saved limit was applied at start
    assert await qemu._virtual_size(ref) == 2 * 1024**3
    # the guest's virtio_balloon driver (loaded by its /init) gives the memory back
    deadline = time.monotonic() + 20  # TCG is slow
    while (await qemu.monitor.execute(ref, "query-balloon"))["actual"] != 384 << 20:
        assert time.monotonic() < deadline, await qemu.monitor.execute(ref, "query-balloon")
        await asyncio.sleep(0.2)
    state = (await qemu.get_states([ref]))[ref]
    assert state.memory_limit == 512 << 20
    # the guest's use where its balloon driver reports statistics, else the allocation,
    # marked as such
    deadline = time.monotonic() + 30
    while state.memory_is_allocation and time.monotonic() < deadline:
        assert state.memory_usage == 384 << 20
        await asyncio.sleep(1)
        state = (await qemu.get_states([ref]))[ref]
    assert not state.memory_is_allocation, "the guest reported no memory statistics"
    assert 0 < state.memory_usage < 384 << 20
    fields = {f.key: f for f in await qemu.get_limits(ref)}
    assert (fields["memory"].value, fields["memory_max"].value) == ("384MiB", "512MiB")

    with pytest.raises(InvalidInput, match="Disks only grow"):
        await qemu.set_limits(ref, {"disk": "1GiB"})
    with pytest.raises(InvalidInput, match="at most 512MiB"):
        await qemu.set_limits(ref, {"memory": "1024"})
    assert await qemu.set_limits(ref, {"cpus": "1"}) == {"cpus": "restart"}
    await qemu.stop(ref, force=True)
    d = qemu.vms.definition("res")
    assert (d.cpus, d.memory_target_mib, d.io_limits["read_iops"]) == (1, 384, 500)


async def test_snapshots_offline_and_live(qemu, guest):
    kernel, initrd = guest
    await qemu.create("snap", kernel=str(kernel), initrd=str(initrd), memory_mib=256,
                      disk_gib=1, cmdline="console=ttyS0", accel="tcg")
    ref = InstanceRef("qemu", "snap")
    offline = await qemu.create_snapshot(ref, "cold")
    assert not offline.stateful and offline.created_at is not None
    await qemu.start(ref)
    await wait_serial(qemu, "snap", "corral-guest ready")
    live = await qemu.create_snapshot(ref, "warm")
    assert live.stateful and live.size
    assert [s.name for s in await qemu.list_snapshots(ref)] == ["cold", "warm"]
    assert await qemu.snapshot_counts([ref]) == {ref: 2}
    with pytest.raises(InvalidInput, match="already has a snapshot"):
        await qemu.create_snapshot(ref, "warm")
    # a live restore brings the VM back to the moment of the snapshot
    await qemu.restore_snapshot(live)
    assert (await qemu.get_instance(ref)).status in (InstanceStatus.RUNNING,
                                                     InstanceStatus.FROZEN)
    with pytest.raises(Conflict, match="no VM state"):
        await qemu.restore_snapshot(offline)
    await qemu.delete_snapshot(live)
    await qemu.stop(ref, force=True)
    await qemu.restore_snapshot(offline)
    await qemu.delete_snapshot(offline)
    assert await qemu.list_snapshots(ref) == []


async def test_uefi_vm_gets_a_private_variables_file_and_runs(qemu, tmp_path):
    await qemu.create("efi", disk_gib=1, firmware="uefi", network_boot=True, accel="tcg",
                      memory_mib=256)
    vars_file = Path(qemu.remote.address) / "efi" / "OVMF_VARS.fd"
    assert vars_file.exists() and vars_file.stat().st_size > 0
    ref = InstanceRef("qemu", "efi")
    await qemu.start(ref)
    try:
        assert (await qemu.get_instance(ref)).status is InstanceStatus.RUNNING
        assert "OVMF_VARS.fd" in Path(f"/proc/{qemu.vms.pid('efi')}/cmdline").read_text()
    finally:
        await qemu.stop(ref, force=True)


async def test_damaged_or_missing_definition_hides_no_other_vm(qemu, guest):
    kernel, initrd = guest
    await qemu.create("good", kernel=str(kernel), accel="tcg")
    await qemu.create("bad", kernel=str(kernel), accel="tcg")
    root = Path(qemu.remote.address)
    (root / "bad" / "vm.json").write_text("{not json")
    (root / "orphan").mkdir()  # a directory without a definition is not a VM
    listed = {i.name: i for i in await qemu.list_instances()}
    assert set(listed) == {"good", "bad"}
    assert listed["good"].status is InstanceStatus.STOPPED
    assert listed["bad"].status is InstanceStatus.ERROR
    assert "definition of 'bad'" in listed["bad"].description and "damaged" in \
        listed["bad"].description
    with pytest.raises(Exception, match="damaged"):
        await qemu.start(InstanceRef("qemu", "bad"))
    with pytest.raises(NotFound, match="No QEMU VM named 'orphan'"):
        await qemu.start(InstanceRef("qemu", "orphan"))


async def test_live_snapshot_brings_back_the_vm_state(qemu, guest):
    """A shell variable set before a live snapshot is back after loading it."""
    kernel, initrd = guest
    await qemu.create("st", kernel=str(kernel), initrd=str(initrd), memory_mib=256,
                      disk_gib=1, cmdline="console=ttyS0", accel="tcg")
    ref = InstanceRef("qemu", "st")
    await qemu.start(ref)
    await wait_serial(qemu, "st", "corral-guest ready")
    session = await qemu.open_console(ref)
    sink = Collect()
    await session.start(sink)
    try:
        await session.send_bytes(b"MARK=before; echo set-$MARK\n")
        await sink.wait_for(b"set-before")
        snap = await qemu.create_snapshot(ref, "with-state")
        await session.send_bytes(b"MARK=after; echo now-$MARK\n")
        await sink.wait_for(b"now-after")
        await qemu.restore_snapshot(snap)
        await session.send_bytes(b"echo back-$MARK\n")
        await sink.wait_for(b"back-before", timeout=30)
    finally:
        await session.close()
        await qemu.stop(ref, force=True)


class Screen:
    """A pyte screen as a console sink (VGA text arrives as absolute-positioned rows)."""

    def __init__(self, columns=80, lines=25):
        import pyte

        self.screen = pyte.Screen(columns, lines)
        self.stream = pyte.ByteStream(self.screen)
        self.reason = None

    def feed(self, data):
        self.stream.feed(data)

    def closed(self, reason):
        self.reason = reason

    def text(self):
        return "\n".join(line.rstrip() for line in self.screen.display)

    async def wait_for(self, needle, timeout=30):
        deadline = time.monotonic() + timeout
        while needle not in self.text():
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} not on the VGA screen:\n{self.text()}")
            await asyncio.sleep(0.1)


async def test_vga_text_console_shows_seabios_and_survives_detach(qemu):
    """A BIOS VM with no disk: SeaBIOS draws real VGA text, read through the console
    server; a second viewer sees the same screen; a console server killed from outside
    is reported and a new attach starts a new one."""
    from backends.console import server_alive
    from backends.console.client import server_pid
    from backends.errors import Unsupported

    await qemu.create("bios", memory_mib=128, disk_gib=1, accel="tcg")  # blank disk
    await qemu.create("efi", memory_mib=128, disk_gib=1, accel="tcg", firmware="uefi")
    ref = InstanceRef("qemu", "bios")
    await qemu.start(ref)
    session = await qemu.open_console(ref, kind="vga")
    screen = Screen()
    await session.start(screen)
    await screen.wait_for("SeaBIOS")
    # a second viewer attached at the same time gets the current screen at once
    second = await qemu.open_console(ref, kind="vga")
    screen2 = Screen()
    await second.start(screen2)
    await screen2.wait_for("SeaBIOS", timeout=5)
    await second.close()
    assert await asyncio.wait_for(second.wait(), 5) == "detached"

    sock = str(qemu.vms.run_dir("bios") / "vga.ws")
    pid = server_pid(sock)
    assert pid and server_alive(sock)
    os.kill(pid, signal.SIGKILL)
    reason = await asyncio.wait_for(session.wait(), 10)
    assert "console server" in reason and "killed" in reason
    again = await qemu.open_console(ref, kind="vga")  # restarts the server
    screen3 = Screen()
    await again.start(screen3)
    await screen3.wait_for("SeaBIOS")
    assert server_pid(sock) not in (None, pid)
    await again.close()

    with pytest.raises(Unsupported, match="UEFI"):
        await qemu.start(InstanceRef("qemu", "efi"))
        await qemu.open_console(InstanceRef("qemu", "efi"), kind="vga")
    caps = qemu.instance_capabilities(await qemu.get_instance(InstanceRef("qemu", "efi")))
    assert "vga" not in {c.value for c in caps}
    await qemu.stop(ref, force=True)
    deadline = time.monotonic() + 10
    while server_alive(sock) and time.monotonic() < deadline:  # the VM's end ends it
        await asyncio.sleep(0.1)
    assert not server_alive(sock)


async def test_serial_console_outlives_the_backend_object(qemu, guest, tmp_path):
    """Closing corral (here: its backend object) leaves the VM and its console server
    running; a new backend re-attaches and sees what was printed meanwhile."""
    kernel, initrd = guest
    await qemu.create("keep", kernel=str(kernel), initrd=str(initrd), memory_mib=256,
                      cmdline="console=ttyS0", accel="tcg")
    ref = InstanceRef("qemu", "keep")
    await qemu.start(ref)
    await wait_serial(qemu, "keep", "corral-guest ready")
    session = await qemu.open_console(ref)
    sink = Collect()
    await session.start(sink)
    await session.send_bytes(b"sleep 1; echo while-away-$((3*3))\n")
    await session.close()  # detached before the guest printed it
    await qemu.close()  # corral exits
    fresh = QEMUBackend(qemu.remote, timeout=10)
    await fresh.connect()
    try:
        await asyncio.sleep(2)
        again = await fresh.open_console(ref)
        sink2 = Collect()
        await again.start(sink2)
        await sink2.wait_for(b"while-away-9")
        await again.close()
        assert (await fresh.get_instance(ref)).status is InstanceStatus.RUNNING
    finally:
        await fresh.close()


async def test_a_vm_defined_or_removed_outside_corral_asks_for_a_listing(qemu, guest):
    """A VM copied into the VMs' directory (or removed from it) by hand or by another tool:
    the event stream asks for a listing, which then has it (told by the kernel, no period
    to wait for: backends/dirwatch.py)."""
    import shutil

    kernel, _initrd = guest
    await qemu.create("made", kernel=str(kernel), accel="tcg")
    root = Path(qemu.remote.address)
    stream = qemu.watch()

    async def asked() -> None:
        while (await asyncio.wait_for(anext(stream), 10)).action != "remote-changed":
            pass

    try:
        assert (await asyncio.wait_for(anext(stream), 10)).action == "connected"
        shutil.copytree(root / "made", root / "copy-of-made-by-hand")
        await asked()
        assert "copy-of-made-by-hand" in {i.name for i in await qemu.list_instances()}
        shutil.rmtree(root / "copy-of-made-by-hand")
        await asked()
        assert "copy-of-made-by-hand" not in {i.name for i in await qemu.list_instances()}
    finally:
        await stream.aclose()


async def test_a_listing_during_a_start_leaves_the_starting_qemu_alone(qemu, guest, tmp_path):
    """Listings made while a VM starts (a VM defined a moment ago is listed at once, its
    directory being watched) must not take the QEMU being started for a dead one and
    clear its runtime files: the start ends with the VM running, attached. Nor may a
    listing by another corral clear the fresh files of a QEMU still writing its pid file;
    old leftovers are cleared."""
    kernel, _initrd = guest
    await qemu.create("racing", kernel=str(kernel), accel="tcg")
    ref = InstanceRef("qemu", "racing")
    start = asyncio.ensure_future(qemu.start(ref))
    while not start.done():
        await qemu.list_instances()
        await asyncio.sleep(0.005)
    await start
    assert (await qemu.get_instance(ref)).status is InstanceStatus.RUNNING
    assert qemu.vms.pid("racing") is not None
    await qemu.stop(ref, force=True)

    other = QEMUBackend(qemu.remote, timeout=10)  # another corral, on the same VMs
    await other.connect()
    try:
        run = qemu.vms.run_dir("racing")
        run.mkdir(parents=True, exist_ok=True)
        (run / "qemu.pid").write_text("")  # a QEMU being started: its pid not written yet
        other.vms.status.clear()
        await other.list_instances()
        assert (run / "qemu.pid").exists()
        old = time.time() - 3600
        os.utime(run / "qemu.pid", (old, old))  # a leftover of a QEMU long gone
        other.vms.status.clear()
        await other.list_instances()
        assert not (run / "qemu.pid").exists()
    finally:
        await other.close()
