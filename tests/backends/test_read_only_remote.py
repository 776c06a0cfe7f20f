"""A remote configured read-only is refused every change below the UI (backends/read_only.py),
on the lab's LXD: lxd1 as 'local', marked read-only the way corral's config does it
(``discover(read_only=...)``). Every verb that would change it refuses in words and the
daemon shows nothing changed; reading it (listing, usage, snapshots, images, events, an
export to a file) still works; a copy from another remote into it is refused too."""

from __future__ import annotations

import asyncio
import json

import pytest
from backend_checks import names, watching

from backends import get_backend
from backends.base import CAPABILITY_METHODS, Backend
from backends.models import Capability, EventKind, InstanceRef, InstanceStatus, Snapshot
from backends.read_only import (
    READ_ONLY_CAPABILITIES,
    ReadOnlyRemote,
    allowed_verbs,
    guarded_verbs,
)
from backends.remotes import discover

from .verb_calls import CALLS, CORE_CALLS

REFUSED_ON_RUNNING = {"stop", "restart", "freeze", "unfreeze", "open_shell", "set_password"}
"""Verbs called on the running instance (the stopped one for every other): were the guard
missing, each would change something the check below sees."""


def daemon_state(daemon, *instances) -> dict:
    """Everything on the daemon a verb could change, as it answers `lxc query`."""
    def q(path):
        return json.loads(daemon.cli("query", path).stdout)

    state = {path: q(path) for path in (
        "/1.0/profiles?recursion=1", "/1.0/networks?recursion=1", "/1.0/projects?recursion=1",
        "/1.0/storage-pools/default/volumes?recursion=1", "/1.0/images?recursion=1")}
    state["instances"] = sorted(names(daemon))
    for name in instances:
        inst = q(f"/1.0/instances/{name}")
        state[name] = {k: inst[k] for k in ("status", "config", "devices", "description",
                                            "profiles", "architecture")}
        state[name]["snapshots"] = q(f"/1.0/instances/{name}/snapshots?recursion=1")
        state[name]["backups"] = q(f"/1.0/instances/{name}/backups")
    return state


@pytest.fixture
async def read_only_local(lab, lab_env):
    remote = {r.name: r for r in discover(lab_env, read_only=["local"]).remotes}["local"]
    assert remote.read_only
    backend = get_backend(remote, timeout=10)
    await backend.connect()
    yield backend
    await backend.close()


async def test_every_change_is_refused_and_reading_works(read_only_local, lab, unique,
                                                         tmp_path):
    ro, d = read_only_local, lab.lxd1
    running, stopped = unique("r"), unique("s")
    d.cli("launch", "busybox", running)
    d.cli("exec", running, "--", "sh", "-c", "echo kept > /root/marker")
    d.cli("init", "busybox", stopped)
    d.cli("snapshot", stopped, "s0")
    try:
        # reading works
        listed = {i.name: i for i in await ro.list_instances()}
        assert listed[running].status is InstanceStatus.RUNNING
        assert listed[stopped].status is InstanceStatus.STOPPED
        run_ref, stop_ref = listed[running].ref, listed[stopped].ref
        assert (await ro.get_instance(stop_ref)).name == stopped
        assert (await ro.get_states([run_ref]))[run_ref].memory_usage > 0
        assert await ro.snapshot_counts([stop_ref]) == {stop_ref: 1}
        snap = (await ro.list_snapshots(stop_ref))[0]
        assert snap.name == "s0"
        assert any("busybox" in i.aliases for i in await ro.list_images())
        assert isinstance(await ro.list_operations(), list)
        assert {f.key for f in await ro.get_limits(stop_ref)} >= {"memory", "cpus"}
        assert "default" in {p.name for p in await ro.list_profiles()}
        async with watching(ro) as events:
            first = await asyncio.wait_for(events.get(), 10)
            assert (first.kind, first.action) == (EventKind.CONNECTION, "connected")
        # what the UI offers on a read-only remote: an export to a file
        assert await ro.export_instance(stop_ref, str(tmp_path / "kept.tar.gz")) > 0
        assert ro.instance_capabilities(listed[running]) <= READ_ONLY_CAPABILITIES
        assert Capability.START not in ro.instance_capabilities(listed[stopped])

        # every verb that changes something refuses, in words, and nothing changes
        refused, _ = guarded_verbs(type(ro), Backend, CAPABILITY_METHODS)
        calls = {**CALLS, **CORE_CALLS}
        assert set(refused) <= set(calls), "a refused verb without a call here"
        before = daemon_state(d, running, stopped)
        problems = []
        for verb in sorted(set(refused) & set(calls)):
            ref = run_ref if verb in REFUSED_ON_RUNNING else stop_ref
            try:
                outcome = calls[verb](ro, ref, Snapshot(ref=stop_ref, name="s0"), tmp_path)
                if asyncio.iscoroutine(outcome):
                    outcome = await asyncio.wait_for(outcome, 60)
            except ReadOnlyRemote as e:
                if f"local is read-only in corral's config: '{verb.replace('_', ' ')}'" \
                        not in str(e):
                    problems.append(f"{verb}: {e}")
                continue
            except Exception as e:  # the list says what went wrong
                problems.append(f"{verb}: raised {type(e).__name__}: {e}")
                continue
            problems.append(f"{verb}: returned {outcome!r}")
        assert problems == []
        assert daemon_state(d, running, stopped) == before
        assert d.cli("exec", running, "--", "cat", "/root/marker").stdout == "kept\n"
        print(f"\nrefused on a read-only remote: {', '.join(sorted(refused))}")
        with pytest.raises(ReadOnlyRemote) as refused_words:
            await ro.delete(stop_ref, force=True)
        print(f"in words: {refused_words.value}")
    finally:
        d.cli("delete", "--force", running, stopped, check=False)


async def test_a_copy_into_a_read_only_remote_is_refused(read_only_local, lab, lab_env,
                                                         unique):
    ro = read_only_local
    lab2 = get_backend({r.name: r for r in discover(lab_env).remotes}["lab2"], timeout=10)
    await lab2.connect()
    c = unique()
    lab.lxd2.cli("init", "busybox", c)
    try:
        before = names(lab.lxd1)
        with pytest.raises(ReadOnlyRemote, match="local is read-only"):
            await lab2.copy_to(InstanceRef("lab2", c), ro, c)
        fingerprint = (await lab2.list_images())[0].fingerprint
        with pytest.raises(ReadOnlyRemote, match="local is read-only"):
            await lab2.copy_image(fingerprint, ro, aliases=(unique("a"),))
        assert names(lab.lxd1) == before and c in names(lab.lxd2)
    finally:
        lab.lxd2.cli("delete", "--force", c, check=False)
        await lab2.close()


def test_what_a_read_only_remote_serves():
    """The verbs served on a read-only remote are those that change nothing and those the UI
    offers there (READ_ONLY_CAPABILITIES) but deleting an image and cancelling an
    operation; every other verb of the contract is refused, and a copy *into* such a remote
    is checked on every backend (the verbs with a target)."""
    refused, targeted = guarded_verbs(Backend, Backend, CAPABILITY_METHODS)
    allowed = allowed_verbs(CAPABILITY_METHODS)
    assert set(targeted) == {"copy_to", "copy_volume", "copy_image"}
    assert not set(refused) & allowed
    assert {"watch", "open_console", "open_display", "export_instance", "list_images",
            "list_operations", "snapshot_counts", "get_limits"} <= allowed
    assert {"start", "stop", "restart", "freeze", "unfreeze", "delete", "create_instance",
            "restore_snapshot", "put_yaml", "set_limits", "write_file", "open_shell",
            "delete_image", "cancel_operation", "copy_to"} <= set(refused)
