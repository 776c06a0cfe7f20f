"""The LXD/Incus backend against the real lab daemons: lxd1 over its unix socket ('local'),
lxd2 over HTTPS through a real `lxc remote add` config ('lab2') and Incus over HTTPS through
a real `incus remote add` config ('inc1')."""

from __future__ import annotations

import asyncio
import time

import pytest
from backend_checks import cli_status, watching

from backends import get_backend
from backends.errors import Conflict, NotFound
from backends.models import EventKind, FileEntry, InstanceRef, InstanceStatus, InstanceType
from backends.remotes import discover

BUSYBOX_IMAGE = "busybox (corral test image)"
"""What the listing shows as the image of an instance made from the lab's image (its
``image.description``, from the metadata tests/lab.py builds)."""


def init_started(daemon, name) -> int:
    """When the instance's init process started (``/proc/1/stat`` field 22, in clock ticks
    since the host booted): a restart makes a new init, which started later."""
    stat = daemon.cli("exec", name, "--", "cat", "/proc/1/stat").stdout
    return int(stat.rsplit(")", 1)[1].split()[19])


def pulled(daemon, name, path, tmp_path) -> str | None:
    """The text of ``path`` in the instance, pulled with the CLI; None when it is missing."""
    out = tmp_path / "pulled"
    out.unlink(missing_ok=True)
    proc = daemon.cli("file", "pull", f"{name}{path}", out, check=False)
    if proc.returncode != 0:
        # LXD: "Error: Not Found"; Incus: "Error: file does not exist"
        assert any(w in proc.stderr.lower() for w in ("not found", "does not exist")), \
            proc.stderr
        return None
    return out.read_text()


async def test_connect_identifies_server(remote_backend):
    name, backend, info, daemon = remote_backend
    assert info.server == ("incus" if daemon.kind == "incus" else "lxd")
    assert info.auth == "trusted"
    assert info.version


async def test_listing_shows_running_and_stopped_instances(remote_backend, unique):
    name, backend, info, daemon = remote_backend
    running, stopped = unique("r"), unique("s")
    daemon.cli("launch", "busybox", running)
    daemon.cli("init", "busybox", stopped)
    try:
        listed = {i.name: i for i in await backend.list_instances()}
        assert listed[running].status is InstanceStatus.RUNNING
        assert listed[stopped].status is InstanceStatus.STOPPED
        assert listed[running].type is InstanceType.CONTAINER
        assert listed[running].ref == InstanceRef(name, running, "default")
        # the lab imports one image, with the alias busybox and this description
        assert listed[running].image == listed[stopped].image == BUSYBOX_IMAGE, listed
        one = await backend.get_instance(listed[stopped].ref)
        assert one.name == stopped
        with pytest.raises(NotFound):
            await backend.get_instance(InstanceRef(name, unique("missing")))
    finally:
        daemon.cli("delete", "--force", running, stopped)


async def test_usage_figures_of_running_instances(remote_backend, unique):
    name, backend, info, daemon = remote_backend
    c = unique()
    daemon.cli("launch", "busybox", c)
    try:
        ref = InstanceRef(name, c)
        first = (await backend.get_states([ref]))[ref]
        assert first.memory_usage > 0
        assert first.processes and first.processes >= 1
        assert first.cpu_percent is None  # needs two samples
        await asyncio.sleep(0.3)
        second = (await backend.get_states([ref]))[ref]
        assert second.cpu_percent is not None and second.cpu_percent >= 0
    finally:
        daemon.cli("delete", "--force", c)


async def test_every_action_really_happens(remote_backend, unique):
    name, backend, info, daemon = remote_backend
    c = unique()
    daemon.cli("init", "busybox", c)
    ref = InstanceRef(name, c)
    try:
        await backend.start(ref)
        assert cli_status(daemon, c) == "RUNNING"
        await backend.freeze(ref)
        assert cli_status(daemon, c) == "FROZEN"
        assert (await backend.get_instance(ref)).status is InstanceStatus.FROZEN
        await backend.unfreeze(ref)
        assert cli_status(daemon, c) == "RUNNING"
        init_before = init_started(daemon, c)
        await backend.restart(ref, timeout=20)
        assert cli_status(daemon, c) == "RUNNING"
        # a new init process: it started later than the one before the restart
        assert init_started(daemon, c) > init_before
        await backend.stop(ref, timeout=20)
        assert cli_status(daemon, c) == "STOPPED"
        await backend.start(ref)
        with pytest.raises(Conflict, match="running"):
            await backend.delete(ref)
        assert cli_status(daemon, c) == "RUNNING"
        await backend.delete(ref, force=True)
        assert cli_status(daemon, c) is None
    finally:
        daemon.cli("delete", "--force", c, check=False)


async def test_force_stop(remote_backend, unique):
    name, backend, info, daemon = remote_backend
    c = unique()
    daemon.cli("launch", "busybox", c)
    try:
        await backend.stop(InstanceRef(name, c), force=True)
        assert cli_status(daemon, c) == "STOPPED"
    finally:
        daemon.cli("delete", "--force", c)


async def test_snapshots_round_trip(remote_backend, unique, tmp_path):
    """A restore brings back the snapshot's files and config: a file rewritten and a file
    and a config key added after the snapshot are as they were (read with the CLI)."""
    name, backend, info, daemon = remote_backend
    c = unique()
    daemon.cli("init", "busybox", c)
    ref = InstanceRef(name, c)
    local = tmp_path / "marker"
    local.write_text("before\n")
    daemon.cli("file", "push", local, f"{c}/root/marker")
    try:
        snap = await backend.create_snapshot(ref, "snap0")
        assert snap.name == "snap0" and snap.created_at is not None
        assert [s.name for s in await backend.list_snapshots(ref)] == ["snap0"]
        assert await backend.snapshot_counts([ref]) == {ref: 1}
        local.write_text("after\n")
        await backend.write_file(ref, FileEntry("/root/marker", "file"), str(local))
        await backend.write_file(ref, FileEntry("/root/added", "file"), str(local))
        daemon.cli("config", "set", c, "user.marker", "after")
        assert pulled(daemon, c, "/root/marker", tmp_path) == "after\n"
        await backend.restore_snapshot(snap)
        assert pulled(daemon, c, "/root/marker", tmp_path) == "before\n"
        assert pulled(daemon, c, "/root/added", tmp_path) is None
        assert daemon.cli("config", "get", c, "user.marker").stdout.strip() == ""
        await backend.delete_snapshot(snap)
        assert await backend.list_snapshots(ref) == []
    finally:
        daemon.cli("delete", "--force", c)


async def test_event_arrives_when_another_client_changes_state(remote_backend, unique):
    name, backend, info, daemon = remote_backend
    c = unique()
    daemon.cli("launch", "busybox", c)
    try:
        async with watching(backend) as events:
            first = await asyncio.wait_for(events.get(), 10)
            assert (first.kind, first.action) == (EventKind.CONNECTION, "connected")
            started = time.monotonic()
            await asyncio.to_thread(daemon.cli, "stop", "--force", c)
            seen = []
            while True:
                ev = await asyncio.wait_for(events.get(), 15)
                seen.append(ev)
                if ev.kind is EventKind.LIFECYCLE and ev.ref == InstanceRef(name, c) \
                        and ev.action in ("instance-stopped", "instance-shutdown"):
                    break
            assert time.monotonic() - started < 15
            assert any(e.kind is EventKind.OPERATION for e in seen)
    finally:
        daemon.cli("delete", "--force", c)


async def test_one_event_stream_for_every_project(remote_backend, unique):
    """The stream listens to every project: a project created elsewhere is heard of (the
    projects view lists them all), while an instance of another project, even one named
    like an instance of the project shown, never reaches the remote's rows."""
    name, backend, info, daemon = remote_backend
    c, other, later = unique(), unique("p"), unique("q")
    daemon.cli("init", "busybox", c)
    daemon.cli("project", "create", other, "-c", "features.images=false",
               "-c", "features.profiles=false")
    daemon.cli("init", "busybox", c, "--project", other)
    try:
        async with watching(backend) as events:
            first = await asyncio.wait_for(events.get(), 10)
            assert (first.kind, first.action) == (EventKind.CONNECTION, "connected")
            await asyncio.to_thread(daemon.cli, "start", c, "--project", other)
            await asyncio.to_thread(daemon.cli, "project", "create", later)
            seen = []
            while True:  # one stream, in order: the other project's events came before
                ev = await asyncio.wait_for(events.get(), 15)
                seen.append(ev)
                if ev.kind is EventKind.LIFECYCLE and ev.action == "project-created" \
                        and later in ev.message:
                    break
            assert not [e for e in seen if e.ref is not None], seen
            assert not [e for e in seen if e.operation is not None
                        and c in e.operation.instances], seen
            # the project shown still has its own events
            await asyncio.to_thread(daemon.cli, "start", c)
            while True:
                ev = await asyncio.wait_for(events.get(), 15)
                if ev.ref == InstanceRef(name, c) and ev.action == "instance-started":
                    break
    finally:
        daemon.cli("delete", "--force", c, check=False)
        daemon.cli("delete", "--force", c, "--project", other, check=False)
        for project in (other, later):
            daemon.cli("project", "delete", project, check=False)


async def test_graceful_stop_that_times_out_offers_force(remote_backend, unique):
    """A guest that ignores the halt signal: the graceful stop gives up after the timeout
    with StopTimedOut (the UI then offers force), and a forced stop works."""
    from backends.errors import StopTimedOut

    name, backend, info, daemon = remote_backend
    c = unique()
    daemon.cli("init", "busybox", c)
    daemon.cli("config", "set", c, "raw.lxc", "lxc.signal.halt=SIGWINCH")
    daemon.cli("start", c)
    ref = InstanceRef(name, c)
    try:
        started = time.monotonic()
        with pytest.raises(StopTimedOut, match="did not shut down within 2 s"):
            await backend.stop(ref, timeout=2)
        assert time.monotonic() - started < 15
        assert cli_status(daemon, c) == "RUNNING"
        await backend.stop(ref, force=True)
        assert cli_status(daemon, c) == "STOPPED"
    finally:
        daemon.cli("delete", "--force", c)


class Terminal:
    """A console sink that answers the cursor-position query (busybox waits for it)."""

    def __init__(self):
        self.data = b""
        self.reason = None
        self.session = None

    def feed(self, data):
        self.data += data
        if b"\x1b[6n" in data and self.session is not None:
            asyncio.ensure_future(self.session.send_bytes(b"\x1b[1;3R"))

    def closed(self, reason):
        self.reason = reason

    async def wait_for(self, needle, timeout=15):
        deadline = time.monotonic() + timeout
        while needle not in self.data:
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} not in output: {self.data[-400:]!r}")
            await asyncio.sleep(0.05)

    async def prompt(self, timeout=15):
        """Wait for the next prompt: busybox asks where the cursor is and reads the
        answer from its input, so keys typed before the answer would be eaten."""
        seen = getattr(self, "_prompts", 0)
        deadline = time.monotonic() + timeout
        while self.data.count(b"\x1b[6n") <= seen:
            if time.monotonic() > deadline:
                raise AssertionError(f"no prompt: {self.data[-400:]!r}")
            await asyncio.sleep(0.05)
        self._prompts = self.data.count(b"\x1b[6n")
        await asyncio.sleep(0.1)


async def live_prompt(session, term, timeout=15):
    """Press Enter until the console answers with a prompt: LXD attaches the console a
    moment after the websockets connect, and keys sent before that are dropped."""
    start = len(term.data)
    deadline = time.monotonic() + timeout
    while b"# " not in term.data[start:]:
        if time.monotonic() > deadline:
            raise AssertionError(f"the console never answered: {term.data[-300:]!r}")
        await session.send_bytes(b"\r")
        await asyncio.sleep(0.3)


async def attach(session):
    sink = Terminal()
    sink.session = session
    await session.start(sink)
    return sink


async def test_exec_shell_over_websockets_types_resizes_and_exits(remote_backend, unique):
    name, backend, info, daemon = remote_backend
    inst = unique("x")
    daemon.cli("launch", "busybox", inst)
    ref = InstanceRef(name, inst, "default")
    try:
        session = await backend.open_shell(ref, width=100, height=40)
        term = await attach(session)
        await term.prompt()
        await session.send_bytes(b"echo $((6*7)); stty size\r")
        await term.wait_for(b"\n42\r\n")
        await term.wait_for(b"40 100")  # the size given at open
        await session.resize(132, 43)  # a window-resize control message
        # (it travels on the control websocket, the command on the data one: the daemon
        # may run a command typed at once before it applies the size, so ask until it has)
        for _ in range(20):
            start = len(term.data)
            await session.send_bytes(b"stty size\r")
            await term.prompt()
            if b"43 132" in term.data[start:]:
                break
            await asyncio.sleep(0.25)
        assert b"43 132" in term.data[start:], term.data[-400:]
        await session.send_bytes(b"exit 3\r")
        assert "exited (3)" in await asyncio.wait_for(session.wait(), 15)
        # a user's own command
        # (it lingers a little: once, in CI under load, LXD 5.0.2 sent none of the pty
        # output of a command that exited at once, and then its exit code)
        custom = await backend.open_shell(ref, ["/bin/sh", "-c",
                                                "echo custom-$((1+1)); sleep 0.3"])
        out = await attach(custom)
        assert "exited (0)" in await asyncio.wait_for(custom.wait(), 15)
        assert b"custom-2" in out.data
    finally:
        daemon.cli("delete", "--force", inst)


async def test_console_over_websockets_detaches_and_reattaches_with_the_log(remote_backend,
                                                                            unique):
    from backends.errors import Unsupported

    name, backend, info, daemon = remote_backend
    inst = unique("c")
    daemon.cli("init", "busybox", inst)
    ref = InstanceRef(name, inst, "default")
    try:
        with pytest.raises(Conflict, match="start it"):
            await backend.open_console(ref)
        daemon.cli("start", inst)
        with pytest.raises(Unsupported, match="VGA"):
            await backend.open_console(ref, kind="vga")
        session = await backend.open_console(ref, width=100, height=30)
        term = await attach(session)
        await live_prompt(session, term)
        await session.send_bytes(b"echo console-$((40+2))\r")
        await term.wait_for(b"console-42")
        await session.resize(120, 40)  # accepted (LXD does not pass it to /dev/console)
        await session.close()
        assert await asyncio.wait_for(session.wait(), 10) == "detached"

        again = await backend.open_console(ref)
        term2 = await attach(again)
        assert b"console-42" in await again.history()  # the console log came first
        await live_prompt(again, term2)
        await again.send_bytes(b"echo back-$((50+5))\r")
        await term2.wait_for(b"back-55")
        await again.close()
    finally:
        daemon.cli("delete", "--force", inst)


async def test_the_verbs_without_pylxd_need_no_client_and_the_others_wait_for_it(
        lab, lab_env, unique, monkeypatch):
    """Connecting, listing, events, one instance and the views' lists go through the fast
    GET path: on each remote they answer with the pylxd client not even started (its build
    is put off here); the first other verb starts it and waits for it, off the loop."""
    import backends.lxd.rest as rest_module
    from backends.lxd.backend import WITHOUT_CLIENT

    monkeypatch.setattr(rest_module, "BUILD_AFTER", 600.0)
    c = unique()
    lab.lxd1.cli("init", "busybox", c)
    lab.lxd1.cli("snapshot", c, "s1")
    remotes = {r.name: r for r in discover(lab_env).remotes}
    for name in ("local", "lab2", "inc1"):
        backend = get_backend(remotes[name], timeout=10)
        try:
            await backend.connect()
            listed = await backend.list_instances()
            assert all(i.name for i in listed)
            assert await backend.get_states([i.ref for i in listed[:3]]) is not None
            counts = await backend.snapshot_counts([i.ref for i in listed[:3]])
            assert set(counts) == {i.ref for i in listed[:3]}
            assert {p.name for p in await backend.list_profiles()} >= {"default"}
            await backend.list_networks()
            pools = await backend.list_storage_pools()
            assert pools and pools[0].name
            await backend.list_volumes(pools[0].name)
            assert "default" in {p.name for p in await backend.list_projects()}
            assert await backend.list_images()
            await backend.list_operations()
            if name == "local":
                assert (await backend.get_instance(InstanceRef("local", c))).name == c
                assert await backend.snapshot_counts([InstanceRef("local", c)]) == {
                    InstanceRef("local", c): 1}
                with pytest.raises(NotFound):
                    await backend.get_instance(InstanceRef("local", unique("gone")))
            exempt = {"connect", "close", "list_instances", "get_states", "list_members",
                      "list_profiles", "list_networks", "list_storage_pools",
                      "list_volumes", "list_projects", "list_images", "list_operations",
                      "get_instance", "snapshot_counts"}
            assert WITHOUT_CLIENT == exempt  # each one is called above (list_members: the
            # cluster tests) and a new one must be added here
            assert not backend.rest.client_started, name
            # a verb that needs pylxd starts its build at once and waits for it
            if name == "local":
                snaps = await asyncio.wait_for(backend.list_snapshots(InstanceRef("local", c)),
                                               30)
                assert [s.name for s in snaps] == ["s1"]
                assert backend.rest.client_started
        finally:
            await backend.close()
    lab.lxd1.cli("delete", "--force", c)
