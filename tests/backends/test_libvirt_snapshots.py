"""Snapshots of the libvirt backend against the suite's private libvirtd
(``tests/lab_libvirt.py``): internal snapshots kept inside the domain's qcow2 disk, read back
with ``virsh`` and ``qemu-img`` (not through corral); a domain with a disk that is not qcow2,
or with no disk, refused in words with nothing made; a running domain's snapshot keeps its
memory, and one taken shut off is not restored over a running domain. The contract suite
(``test_contract.py``) checks that a restore takes back what was written on the disk."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import pytest_asyncio

import lab_libvirt
from backends.errors import Conflict, InvalidInput, NotFound, Unsupported
from backends.models import InstanceStatus, Snapshot

from .libvirt_helpers import connected, define, disk_snapshots, virsh

live = pytest.mark.asyncio(loop_scope="module")
PREFIX = "lvs-"


@pytest.fixture(scope="module")
def vlab(request):
    return lab_libvirt.session_lab(request)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lv(vlab):
    async with connected(vlab, "lvs", PREFIX) as backend:
        yield backend


def snapshot_names(vlab, name: str) -> list[str]:
    return virsh(vlab, "snapshot-list", "--name", name).stdout.split()


@live
async def test_a_shut_off_domains_snapshots_live_in_its_qcow2_disk(lv, vlab, guest):
    ref = define(vlab, lv, guest, PREFIX)
    disk = vlab.root / f"{ref.name}-0.qcow2"
    await lv.set_description(ref, "as it was")
    one = await lv.create_snapshot(ref, "one")
    assert (one.ref, one.name, one.stateful) == (ref, "one", False)
    assert one.created_at and abs(datetime.now(timezone.utc) - one.created_at) < timedelta(
        minutes=5)
    assert snapshot_names(vlab, ref.name) == ["one"]
    assert disk_snapshots(disk) == ["one"]  # inside the disk: an internal snapshot
    assert "shutoff" in virsh(vlab, "snapshot-info", ref.name, "one").stdout

    with pytest.raises(Conflict, match="already has a snapshot named 'one'"):
        await lv.create_snapshot(ref, "one")
    for bad in ("", "two words", "a/b"):
        with pytest.raises(InvalidInput, match="without spaces or slashes"):
            await lv.create_snapshot(ref, bad)
    with pytest.raises(Conflict, match="not running: a snapshot of it has no memory"):
        await lv.create_snapshot(ref, "mem", stateful=True)
    with pytest.raises(Unsupported, match="expiry"):
        await lv.create_snapshot(ref, "exp", expires_at=datetime.now() + timedelta(days=1))
    assert snapshot_names(vlab, ref.name) == ["one"]

    two = await lv.create_snapshot(ref, "two")
    assert [s.name for s in await lv.list_snapshots(ref)] == ["one", "two"]
    assert await lv.snapshot_counts([ref]) == {ref: 2}
    assert (await lv.get_instance(ref)).snapshot_count == 2  # the row read after a verb

    # a restore brings back the definition as it was then (its description with it)
    await lv.set_description(ref, "changed since")
    await lv.restore_snapshot(one)
    assert (await lv.get_instance(ref)).status is InstanceStatus.STOPPED
    assert virsh(vlab, "desc", "--config", ref.name).stdout.strip() == "as it was"

    await lv.delete_snapshot(two)
    await lv.delete_snapshot(one)
    assert snapshot_names(vlab, ref.name) == []
    assert disk_snapshots(disk) == []
    assert await lv.snapshot_counts([ref]) == {ref: 0}
    with pytest.raises(NotFound, match="no snapshot named 'one'"):
        await lv.delete_snapshot(one)
    with pytest.raises(NotFound, match="no snapshot named 'one'"):
        await lv.restore_snapshot(one)


@live
async def test_a_disk_that_is_not_qcow2_is_refused_and_nothing_is_made(lv, vlab, guest):
    ref = define(vlab, lv, guest, PREFIX, formats=("qcow2", "raw"))
    with pytest.raises(Unsupported, match=r"not qcow2: vdb \(raw\)\. libvirt keeps internal "
                                          r"snapshots inside qcow2 disks only"):
        await lv.create_snapshot(ref, "one")
    assert snapshot_names(vlab, ref.name) == []
    assert disk_snapshots(vlab.root / f"{ref.name}-0.qcow2") == []  # not half made
    assert await lv.list_snapshots(ref) == []

    bare = define(vlab, lv, guest, PREFIX, formats=())
    with pytest.raises(InvalidInput, match="has no disk: there is nothing to snapshot"):
        await lv.create_snapshot(bare, "one")
    assert snapshot_names(vlab, bare.name) == []


@live
async def test_a_running_domains_snapshot_keeps_its_memory(lv, vlab, guest):
    ref = define(vlab, lv, guest, PREFIX)
    off = await lv.create_snapshot(ref, "off")
    await lv.start(ref)
    try:
        # libvirt's internal snapshot of a running domain always holds its memory
        on = await lv.create_snapshot(ref, "on")
        assert on.stateful and not off.stateful
        assert "running" in virsh(vlab, "snapshot-info", ref.name, "on").stdout
        assert {s.name: s.stateful for s in await lv.list_snapshots(ref)} == {
            "off": False, "on": True}

        # libvirt would force the domain off to restore a shut-off snapshot: refused
        with pytest.raises(Conflict, match="was taken while .* was shut off .* shut .* down "
                                           "to restore it"):
            await lv.restore_snapshot(off)
        assert virsh(vlab, "domstate", ref.name).stdout.strip() == "running"

        await lv.restore_snapshot(on)
        assert (await lv.get_instance(ref)).status is InstanceStatus.RUNNING

        # from shut off, a snapshot with memory comes back running (libvirt's revert)
        await lv.stop(ref, force=True)
        await lv.restore_snapshot(Snapshot(ref=ref, name="on"))
        assert virsh(vlab, "domstate", ref.name).stdout.strip() == "running"
        await lv.stop(ref, force=True)
        await lv.restore_snapshot(off)
        assert virsh(vlab, "domstate", ref.name).stdout.strip() == "shut off"
        await lv.delete_snapshot(on)
        await lv.delete_snapshot(off)
        assert snapshot_names(vlab, ref.name) == []
    finally:
        await lv.stop(ref, force=True)
