"""Rename and description of the libvirt backend against the suite's private libvirtd
(``tests/lab_libvirt.py``), read back with ``virsh``: a shut-off domain is renamed (the
old name is gone, both are announced as renamed); a running domain, one with snapshots, a
taken name and a name libvirt cannot take are refused in words with nothing changed. The
description is kept in the saved definition, and in the running domain too while it runs;
libvirt's metadata event makes the row read again."""

from __future__ import annotations

import pytest
import pytest_asyncio

import lab_libvirt
from backends.errors import Conflict, InvalidInput, NotFound
from backends.models import InstanceRef, InstanceStatus

from .contract_subjects import EventLog
from .libvirt_helpers import connected, define, virsh

live = pytest.mark.asyncio(loop_scope="module")
PREFIX = "lvn-"


@pytest.fixture(scope="module")
def vlab(request):
    return lab_libvirt.session_lab(request)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lv(vlab):
    async with connected(vlab, "lvn", PREFIX) as backend:
        events = EventLog(backend)
        await events.start()
        backend.events = events
        try:
            yield backend
        finally:
            await events.stop()


def exists(vlab, name: str) -> bool:
    return virsh(vlab, "dominfo", name, check=False).returncode == 0


@live
async def test_a_shut_off_domain_is_renamed(lv, vlab, guest):
    ref = define(vlab, lv, guest, PREFIX)
    new = InstanceRef(ref.remote, ref.name + "-new")
    mark = lv.events.mark()
    inst = await lv.rename_instance(ref, new.name)
    assert (inst.ref, inst.status) == (new, InstanceStatus.STOPPED)
    assert exists(vlab, new.name) and not exists(vlab, ref.name)
    with pytest.raises(NotFound):
        await lv.get_instance(ref)
    # announced as a rename of both names (the remote is listed again), not a deletion
    await lv.events.lifecycle(ref, {"instance-renamed"}, since=mark)
    await lv.events.lifecycle(new, {"instance-renamed"}, since=mark)
    assert not [e for e in lv.events.events[mark:] if e.action == "instance-deleted"]
    assert (await lv.rename_instance(new, new.name)).ref == new  # its own name: nothing

    other = define(vlab, lv, guest, PREFIX)
    with pytest.raises(Conflict, match=f"A domain named '{other.name}' already exists"):
        await lv.rename_instance(new, other.name)
    for bad, words in (("", "A domain name is needed"), (" x", "without spaces"),
                       ("a/b", "no '/'"), ("a\nb", "no control characters"),
                       ("x" * 201, "at most 200")):
        with pytest.raises(InvalidInput, match=words):
            await lv.rename_instance(new, bad)
    assert exists(vlab, new.name)


@live
async def test_a_running_domain_or_one_with_snapshots_is_not_renamed(lv, vlab, guest):
    ref = define(vlab, lv, guest, PREFIX)
    snap = await lv.create_snapshot(ref, "keep")
    with pytest.raises(Conflict, match=r"has 1 snapshot\(s\): libvirt cannot rename a domain "
                                       "that has snapshots. Delete them first."):
        await lv.rename_instance(ref, ref.name + "-x")
    await lv.delete_snapshot(snap)
    await lv.start(ref)
    try:
        with pytest.raises(Conflict, match="is running: libvirt renames only a shut-off "
                                           "domain. Shut it down first."):
            await lv.rename_instance(ref, ref.name + "-x")
        assert exists(vlab, ref.name) and not exists(vlab, ref.name + "-x")
    finally:
        await lv.stop(ref, force=True)


@live
async def test_the_description_is_saved_and_live_while_running(lv, vlab, guest):
    ref = define(vlab, lv, guest, PREFIX)
    mark = lv.events.mark()
    await lv.set_description(ref, "  a build server\nsecond line  ")
    assert virsh(vlab, "desc", "--config", ref.name).stdout.strip() == \
        "a build server\nsecond line"
    assert (await lv.get_instance(ref)).description == "a build server\nsecond line"
    listed = {i.ref: i for i in await lv.list_instances()}
    assert listed[ref].description == "a build server\nsecond line"
    await lv.events.lifecycle(ref, {"instance-updated"}, since=mark)  # libvirt's event

    await lv.start(ref)
    try:
        await lv.set_description(ref, "running notes")
        for where in ("--live", "--config"):
            assert virsh(vlab, "desc", where, ref.name).stdout.strip() == "running notes"
        assert (await lv.get_instance(ref)).description == "running notes"
        await lv.set_description(ref, "")
        for where in ("--live", "--config"):
            assert "No description" in virsh(vlab, "desc", where, ref.name).stdout
        assert (await lv.get_instance(ref)).description == ""
    finally:
        await lv.stop(ref, force=True)
    with pytest.raises(NotFound):
        await lv.set_description(InstanceRef(ref.remote, PREFIX + "missing"), "x")
