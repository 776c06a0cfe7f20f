"""The LXC backend against real containers in a private lxcpath (busybox template, no
network: there is no lxcbr0 here)."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import pytest
from backend_checks import longest_stall, lxc, state

from backends import first_listing
from backends.errors import Conflict, InvalidInput, NotFound, StopTimedOut, Unreachable
from backends.lxc import LXCBackend, lxc_remotes
from backends.models import InstanceRef, InstanceStatus


@pytest.fixture
def backend(lxc_backend):
    return lxc_backend


async def test_create_list_and_every_action(backend, lxc_path):
    inst = await backend.create("c1")
    assert inst.status is InstanceStatus.STOPPED and "busybox" in inst.image
    config = (lxc_path / "c1" / "config").read_text()
    assert "lxc.net.0.type = empty" in config and "lxcbr0" not in config
    ref = InstanceRef("lxc", "c1")

    assert [i.name for i in await backend.list_instances()] == ["c1"]
    await backend.start(ref)
    assert state(lxc_path, "c1") == "RUNNING"
    listed = {i.name: i for i in await backend.list_instances()}
    assert listed["c1"].status is InstanceStatus.RUNNING
    # the first listing (before the backend exists) lists the same, running included
    first = first_listing(backend.remote, timeout=10)
    assert [(i.ref, i.status, i.image) for i in first.instances] == \
        [(i.ref, i.status, i.image) for i in listed.values()]

    usage = (await backend.get_states([ref]))[ref]
    assert usage.memory_usage > 0 and usage.pid
    await asyncio.sleep(0.2)
    assert (await backend.get_states([ref]))[ref].cpu_percent is not None

    await backend.freeze(ref)
    assert state(lxc_path, "c1") == "FROZEN"
    await backend.unfreeze(ref)
    assert state(lxc_path, "c1") == "RUNNING"
    pid = usage.pid
    await backend.restart(ref, timeout=10)
    assert state(lxc_path, "c1") == "RUNNING"
    assert (await backend.get_states([ref]))[ref].pid != pid
    await backend.stop(ref, timeout=10)
    assert state(lxc_path, "c1") == "STOPPED"

    await backend.start(ref)
    with pytest.raises(Conflict, match="Stop it first"):
        await backend.delete(ref)
    await backend.delete(ref, force=True)
    assert not (lxc_path / "c1").exists()
    with pytest.raises(NotFound):
        await backend.get_instance(ref)


async def test_graceful_stop_timeout_then_force(backend, lxc_path):
    await backend.create("hang")
    cfg = lxc_path / "hang" / "config"
    cfg.write_text(cfg.read_text().replace("lxc.signal.halt = SIGUSR1",
                                           "lxc.signal.halt = SIGWINCH"))
    ref = InstanceRef("lxc", "hang")
    await backend.start(ref)
    started = time.monotonic()
    with pytest.raises(StopTimedOut, match="did not shut down within 2 s"):
        await backend.stop(ref, timeout=2)
    assert time.monotonic() - started < 10
    assert state(lxc_path, "hang") == "RUNNING"
    await backend.stop(ref, force=True)
    assert state(lxc_path, "hang") == "STOPPED"


async def test_bad_names_missing_template_and_missing_bridge(backend, lxc_path):
    with pytest.raises(InvalidInput, match="not a valid container name"):
        await backend.create("bad name!")
    with pytest.raises(InvalidInput, match="No LXC template 'nosuch'.*busybox"):
        await backend.create("ok1", template="nosuch")
    with pytest.raises(InvalidInput, match="no bridge named 'nobr0'"):
        await backend.create("ok2", bridge="nobr0")
    await backend.create("dup")
    with pytest.raises(InvalidInput, match="already exists"):
        await backend.create("dup")
    assert sorted(p.name for p in lxc_path.iterdir()) == ["dup"]  # nothing half-made


async def test_failed_template_leaves_nothing_behind(backend, lxc_path):
    # the busybox template without its busybox binary fails inside lxc-create
    with pytest.raises(Exception) as err:
        await backend.create("broken", template="busybox",
                             template_args=["--busybox-path", "/nonexistent-busybox"])
    assert "broken" in str(err.value) or "failed" in str(err.value).lower()
    assert not (lxc_path / "broken").exists()


async def test_snapshot_create_restore_brings_back_a_file(backend, lxc_path):
    await backend.create("s1")
    ref = InstanceRef("lxc", "s1")
    marker = lxc_path / "s1" / "rootfs" / "marker"
    marker.write_text("before")
    snap = await backend.create_snapshot(ref, "first one")
    assert snap.name == "snap0" and snap.created_at is not None
    listed = await backend.list_snapshots(ref)
    assert [(s.name, s.comment) for s in listed] == [("snap0", "first one")]
    marker.write_text("after")
    await backend.restore_snapshot(snap)
    assert (lxc_path / "s1" / "rootfs" / "marker").read_text() == "before"
    assert (await backend.get_instance(ref)).snapshot_count == 1

    await backend.start(ref)
    with pytest.raises(Conflict, match="only snapshot a stopped container"):
        await backend.create_snapshot(ref, "")
    await backend.stop(ref, force=True)
    await backend.delete_snapshot(snap)
    assert await backend.list_snapshots(ref) == []


async def test_external_changes_arrive_as_events(backend, lxc_path):
    await backend.create("e1")
    stream = backend.watch()
    try:
        first = await asyncio.wait_for(anext(stream), 10)
        assert first.action == "connected"
        await asyncio.to_thread(lxc, lxc_path, "lxc-start", "-n", "e1")
        seen = []
        while True:
            ev = await asyncio.wait_for(anext(stream), 15)
            seen.append(ev)
            if ev.ref == InstanceRef("lxc", "e1") and ev.action == "instance-started":
                break
        await asyncio.to_thread(lxc, lxc_path, "lxc-stop", "-n", "e1", "-k")
        while True:
            ev = await asyncio.wait_for(anext(stream), 15)
            if ev.ref == InstanceRef("lxc", "e1") and ev.action == "instance-stopped":
                break
        # a container made outside corral changes the lxcpath: a listing is asked for
        await asyncio.to_thread(lxc, lxc_path, "lxc-create", "-t", "busybox", "-n", "e2")
        while True:
            ev = await asyncio.wait_for(anext(stream), 15)
            if ev.action == "remote-changed":
                break
    finally:
        await stream.aclose()


async def test_missing_lxcpath_is_explained(tmp_path):
    b = LXCBackend(lxc_remotes([str(tmp_path / "nope")])[0])
    with pytest.raises(Exception, match="does not exist"):
        await b.connect()
    with pytest.raises(Unreachable):  # no first listing either: the backend says why
        first_listing(b.remote, timeout=5)


def cgroup_value(path, name, key):
    return lxc(path, "lxc-cgroup", "-n", name, key).stdout.strip()


async def test_live_limits_reach_the_cgroup_and_survive_a_restart(backend, lxc_path):
    from backends.lxc.limits import cgroup_version

    v1 = cgroup_version() == 1
    await backend.create("lim")
    ref = InstanceRef("lxc", "lim")
    # stopped: saved for the next start
    assert await backend.set_limits(ref, {"cpu_weight": "200"}) == {"cpu_weight": "restart"}
    await backend.start(ref)
    fields = {f.key: f for f in await backend.get_limits(ref)}
    assert fields["memory"].applies == "live"
    assert fields["cpu_weight"].value == "200"
    # running: live, and in the config
    result = await backend.set_limits(ref, {"memory": "256MiB", "cpu_quota": "50",
                                            "cpuset": "0"})
    assert result == {"memory": "live", "cpu_quota": "live", "cpuset": "live"}
    mem_key = "memory.limit_in_bytes" if v1 else "memory.max"
    assert cgroup_value(lxc_path, "lim", mem_key) == str(256 * 1024 * 1024)
    if v1:
        assert cgroup_value(lxc_path, "lim", "cpu.cfs_quota_us") == "50000"
    config = (lxc_path / "lim" / "config").read_text()
    assert f"{mem_key} = {256 * 1024 * 1024}" in config
    await backend.stop(ref, force=True)
    await backend.start(ref)
    assert cgroup_value(lxc_path, "lim", mem_key) == str(256 * 1024 * 1024)
    fields = {f.key: f for f in await backend.get_limits(ref)}
    assert fields["memory"].value == str(256 * 1024 * 1024)
    assert fields["cpu_quota"].value == "50"
    await backend.stop(ref, force=True)


async def test_bad_limits_are_refused_before_anything_changes(backend, lxc_path):
    await backend.create("badlim")
    ref = InstanceRef("lxc", "badlim")
    before = (lxc_path / "badlim" / "config").read_text()
    with pytest.raises(InvalidInput, match="at least 4MiB"):
        await backend.set_limits(ref, {"cpu_weight": "300", "memory": "12"})
    with pytest.raises(InvalidInput, match="CPU 99 does not exist"):
        await backend.set_limits(ref, {"cpuset": "0,99"})
    with pytest.raises(InvalidInput, match="Unknown limit"):
        await backend.set_limits(ref, {"bogus": "1"})
    assert (lxc_path / "badlim" / "config").read_text() == before


class Collect:
    """A console sink that records output and answers the cursor-position query (busybox
    sh waits for it), as the console widget will."""

    def __init__(self, session=None):
        self.data = b""
        self.session = session
        self.reason = None

    def feed(self, data: bytes) -> None:
        self.data += data
        if b"\x1b[6n" in data and self.session is not None:
            asyncio.ensure_future(self.session.send_bytes(b"\x1b[1;1R"))

    def closed(self, reason: str) -> None:
        self.reason = reason

    async def wait_for(self, needle: bytes, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.data:
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} not in output: {self.data[-400:]!r}")
            await asyncio.sleep(0.05)


async def test_attach_shell_reads_real_output_and_follows_window_size(backend, lxc_path):
    await backend.create("sh1")
    ref = InstanceRef("lxc", "sh1")
    await backend.start(ref)
    session = await backend.open_shell(ref, width=100, height=40)
    sink = Collect(session)
    await session.start(sink)
    try:
        await sink.wait_for(b"# ")  # the shell is ready (typed-ahead input would be flushed)
        await session.send_bytes(b"echo hello-$((6*7)); stty size\n")
        await sink.wait_for(b"hello-42")
        await sink.wait_for(b"40 100")
        await session.resize(132, 43)
        await session.send_bytes(b"stty size\n")
        await sink.wait_for(b"43 132")
        await session.close()  # detach: the shell goes on inside its console server
        assert await asyncio.wait_for(session.wait(), 5) == "detached"
        session = await backend.open_shell(ref, width=100, height=40)
        again = Collect(session)
        await session.start(again)
        await again.wait_for(b"hello-42")  # what it printed before is shown on re-attach
        await session.send_bytes(b"echo still-$((6*7+1))\n")
        await again.wait_for(b"still-43")
        await session.send_bytes(b"exit\n")
        assert "exited" in await asyncio.wait_for(session.wait(), 10)
    finally:
        await session.close()


async def test_console_shows_the_containers_console_shell(backend, lxc_path):
    await backend.create("con1")
    ref = InstanceRef("lxc", "con1")
    with pytest.raises(Conflict, match="start it"):
        await backend.open_console(ref)
    await backend.start(ref)
    session = await backend.open_console(ref, width=90, height=30)
    sink = Collect(session)
    await session.start(sink)
    try:
        await sink.wait_for(b"Connected to tty 0")
        await session.send_bytes(b"\r")
        await session.send_bytes(b"echo console-$((40+2))\r")
        await sink.wait_for(b"console-42")
        # Ctrl+a (lxc-console's own escape) reaches the guest: ash moves to line start
        await session.send_bytes(b"echo X\x01echo Y\r")
        await sink.wait_for(b"Yecho X")  # the line became "echo Yecho X"
    finally:
        await session.close()
    assert sink.reason is not None


async def test_create_from_an_lxd_style_image_through_the_archive_reader(backend, lxc_path,
                                                                           tmp_path):
    import lab as labmod  # tests/ is on sys.path (conftest)

    image = labmod.build_busybox_image(tmp_path / "img")
    inst = await backend.create_from_image("fromimg", str(image))
    assert inst.status is InstanceStatus.STOPPED
    assert (lxc_path / "fromimg" / "rootfs" / "bin" / "busybox").exists()
    ref = InstanceRef("lxc", "fromimg")
    await backend.start(ref)
    assert state(lxc_path, "fromimg") == "RUNNING"
    await backend.delete(ref, force=True)
    bogus = tmp_path / "bogus.tar.gz"
    subprocess.run(["tar", "-czf", str(bogus), "-C", str(tmp_path), "img"], check=True)
    (tmp_path / "empty").mkdir()
    subprocess.run(["tar", "-czf", str(bogus), "-C", str(tmp_path / "empty"), "."], check=True)
    with pytest.raises(InvalidInput, match="not an LXD-style image"):
        await backend.create_from_image("nope", str(bogus))
    assert not (lxc_path / "nope").exists()


async def test_create_on_an_existing_bridge(backend, lxc_path):
    subprocess.run(["ip", "link", "add", "corraltbr0", "type", "bridge"], check=True)
    try:
        subprocess.run(["ip", "link", "set", "corraltbr0", "up"], check=True)
        await backend.create("bridged", bridge="corraltbr0")
        config = (lxc_path / "bridged" / "config").read_text()
        assert "lxc.net.0.type = veth" in config and "lxc.net.0.link = corraltbr0" in config
        ref = InstanceRef("lxc", "bridged")
        await backend.start(ref)
        assert list(Path("/sys/class/net/corraltbr0/brif").iterdir())  # its veth is attached
        await backend.delete(ref, force=True)
    finally:
        subprocess.run(["ip", "link", "del", "corraltbr0"], check=False)


async def test_listing_reads_the_containers_files_off_the_event_loop(backend, lxc_path,
                                                                    monkeypatch):
    """Each container's config and snapshot directory are read for its row: a slow disk
    (or an NFS lxcpath) must not stop the event loop, which keeps drawing and taking keys
    meanwhile. Here each read takes 0.2 s; the loop ticks every 20 ms throughout."""
    from backends.lxc.tools import LXCTools

    subprocess.run(["lxc-create", "-P", str(lxc_path), "-n", "slowdisk", "-t", "busybox"],
                   check=True, capture_output=True)
    real = LXCTools.instance

    def slow(self, name, status):
        time.sleep(0.2)
        return real(self, name, status)

    monkeypatch.setattr(LXCTools, "instance", slow)
    (listed, got), stall = await longest_stall(
        backend.list_instances(), backend.get_instance(InstanceRef(backend.remote.name, "slowdisk")))
    assert "slowdisk" in {i.name for i in listed} and got.name == "slowdisk"
    assert stall < 0.15, f"the loop stood still for {stall:.2f} s"
