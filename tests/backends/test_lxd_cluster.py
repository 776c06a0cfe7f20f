"""The LXD/Incus backend on a real 3-member LXD cluster and Incus cluster (tests/lab_cluster.py): members, placement,
moves, evacuation, a member going offline and failover when corral's own member dies. Every
outcome is checked with the `lxc` CLI."""

from __future__ import annotations

import asyncio
import json
import os
import time

import pytest

from backends import first_listing, get_backend
from backends.errors import Conflict, InvalidInput
from backends.members import MemberStatus
from backends.models import Capability, EventKind, InstanceRef, InstanceStatus
from backends.create_models import CreateRequest
from backends.remotes import discover

pytestmark = pytest.mark.asyncio(loop_scope="module")
REMOTE = "clu"


def remote_of(cluster):
    return {r.name: r for r in discover(cluster.env()).remotes}[REMOTE]


@pytest.fixture(params=["lxd", "incus"])
def cluster(request):
    the_cluster = request.getfixturevalue(f"{request.param}_cluster")
    the_cluster.wait_online()  # a member a test killed and started again is back
    return the_cluster


@pytest.fixture
async def backend(cluster):
    b = get_backend(remote_of(cluster), timeout=10)
    await b.connect()
    yield b
    await b.close()


def cli_members(cluster) -> dict[str, dict]:
    return {m["server_name"]: m for m in json.loads(
        cluster.cli("cluster", "list", "--format", "json").stdout)}


async def wait_for(predicate, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        await asyncio.sleep(0.2)


async def test_members_equal_the_cli(backend, cluster, unique):
    name = unique()
    cluster.cli("init", "busybox", name, "--target", "m2")
    try:
        assert Capability.CLUSTER in backend.capabilities
        # the first listing (made before the backend exists) has the members and the
        # locations too: the first screen shows the cluster whole
        first = first_listing(backend.remote, timeout=10)
        assert {i.name: i.location for i in first.instances}[name] == "m2"
        cli = cli_members(cluster)
        assert {m.name: m.status.value for m in first.members} \
            == {n: c["status"].lower() for n, c in cli.items()}
        listed = {i.name: i for i in await backend.list_instances()}
        assert listed[name].location == "m2"
        members = {m.name: m for m in await backend.list_members()}
        assert set(members) == set(cli) == {"m1", "m2", "m3"}
        for n, m in members.items():
            c = cli[n]
            assert m.url == c["url"]
            assert m.roles == tuple(c["roles"])
            assert m.architecture == c["architecture"]
            assert m.failure_domain == c["failure_domain"]
            assert m.status.value == c["status"].lower()
            assert m.message == c["message"]
        counts = {}
        for loc in cluster.locations().values():
            counts[loc] = counts.get(loc, 0) + 1
        assert {n: m.instances for n, m in members.items()} == \
            {n: counts.get(n, 0) for n in members}
        leader = [m for m in members.values() if "database-leader" in m.roles]
        assert len(leader) == 1 and leader[0].role_text.startswith("leader")
    finally:
        cluster.cli("delete", "--force", name)


async def test_members_read_together_are_read_once(backend, cluster, monkeypatch):
    """The listing after connecting and the UI read the members at the same moment: one
    read (a GET and a probe of each member's address) serves both; a read asked for once
    it is over is a new one."""
    fast = backend.rest.fast
    reads = []
    get_json = fast.get_json

    def counted(path, *args, **kwargs):
        if path == "cluster/members":
            reads.append(path)
        return get_json(path, *args, **kwargs)

    monkeypatch.setattr(fast, "get_json", counted)
    first, second = await asyncio.gather(backend.list_members(), backend.list_members())
    assert len(reads) == 1
    assert {m.name for m in first} == {m.name for m in second} == {"m1", "m2", "m3"}
    again = await backend.list_members()
    assert len(reads) == 2 and {m.name for m in again} == {"m1", "m2", "m3"}


async def test_a_plain_remote_is_not_a_cluster(lab, lab_env):
    b = get_backend({r.name: r for r in discover(lab_env).remotes}["lab2"], timeout=10)
    await b.connect()
    try:
        assert Capability.CLUSTER not in b.capabilities
        with pytest.raises(Exception, match="not a cluster"):
            await b.list_members()
    finally:
        await b.close()


async def test_launch_on_a_chosen_member_and_where_the_cluster_places_it(
        backend, cluster, unique):
    placements = {p.value: p for p in await backend.placements()}
    assert placements[""].label == "let the cluster place it"
    assert {"m1", "m2", "m3", "@default"} <= set(placements)
    source = next(s for s in await backend.create_sources() if s.value == "busybox"
                  or "busybox" in s.label)
    chosen, auto, grouped = unique("t"), unique("a"), unique("g")
    try:
        made = await backend.create_instance(CreateRequest(
            name=chosen, source=source, options={"target": "m3"}))
        assert made.location == "m3"
        made_auto = await backend.create_instance(CreateRequest(name=auto, source=source))
        made_group = await backend.create_instance(CreateRequest(
            name=grouped, source=source, options={"target": "@default"}))
        where = cluster.locations()
        assert where[chosen] == "m3"
        assert where[auto] == made_auto.location and where[auto] in ("m1", "m2", "m3")
        assert where[grouped] == made_group.location
    finally:
        for n in (chosen, auto, grouped):
            cluster.cli("delete", "--force", n, check=False)


async def test_move_a_stopped_instance_between_members(backend, cluster, unique):
    name = unique()
    cluster.cli("init", "busybox", name, "--target", "m1")
    ref = InstanceRef(REMOTE, name)
    texts: list[str] = []
    try:
        await backend.list_members()
        moved = await backend.move_to_member(ref, "m3", progress=texts.append)
        assert moved.location == "m3" and moved.status is InstanceStatus.STOPPED
        assert cluster.locations()[name] == "m3"
        assert texts and texts[0] == "moving to m3"
        with pytest.raises(InvalidInput, match="already on m3"):
            await backend.move_to_member(ref, "m3")
        with pytest.raises(InvalidInput, match="not a member"):
            await backend.move_to_member(ref, "m9")
        cluster.cli("start", name)
        inst = await backend.get_instance(ref)
        problem = backend.live_move_problem(inst)
        assert problem and "stopping it first" in problem
        with pytest.raises(Conflict, match="Stop it, then move it"):
            await backend.move_to_member(ref, "m2")
        assert cluster.locations()[name] == "m3"
    finally:
        cluster.cli("delete", "--force", name)


async def test_evacuate_and_restore_a_member(backend, cluster, unique):
    running, stopped, project = unique("r"), unique("s"), unique("p")
    cluster.cli("launch", "busybox", running, "--target", "m2")
    cluster.cli("init", "busybox", stopped, "--target", "m2")
    # one of another project: evacuation moves it too, so corral lists it
    cluster.cli("project", "create", project, "-c", "features.images=false",
                "-c", "features.profiles=false")
    cluster.cli("init", "busybox", stopped, "--target", "m2", "--project", project)
    texts: list[str] = []
    try:
        every = [(i.ref.project, i.name, i.location) for i in await backend.cluster_instances()]
        assert ("default", stopped, "m2") in every and (project, stopped, "m2") in every
        shown = [p for p, _n, _l in every]
        assert shown == sorted(shown, key=lambda p: p != "default")  # the project shown first
        await backend.evacuate_member("m2", progress=texts.append)
        cli = cli_members(cluster)
        assert cli["m2"]["status"] == "Evacuated"
        where = cluster.locations()
        assert where[running] != "m2" and where[stopped] != "m2"
        assert {i.name: i.location for i in await backend.cluster_instances()
                if i.ref.project == project}[stopped] != "m2"
        # the daemon's own words, as often as a 1 s poll of the operation catches them
        assert any(running in t or stopped in t for t in texts), texts
        members = {m.name: m for m in await backend.list_members()}
        assert members["m2"].status is MemberStatus.EVACUATED
        assert members["m2"].message == cli["m2"]["message"]
        texts.clear()
        await backend.restore_member("m2", progress=texts.append)
        assert cli_members(cluster)["m2"]["status"] == "Online"
        where = cluster.locations()
        assert where[running] == "m2" and where[stopped] == "m2"
        out = cluster.cli("list", running, "--format", "csv", "-c", "s").stdout.strip()
        assert out == "RUNNING"
        with pytest.raises(InvalidInput, match="not a member"):
            await backend.evacuate_member("m9")
    finally:
        if cli_members(cluster)["m2"]["status"] != "Online":
            cluster.cli("cluster", "restore", "m2", "--force", check=False)
        cluster.cli("delete", "--force", running, stopped, check=False)
        cluster.cli("delete", "--force", stopped, "--project", project, check=False)
        cluster.cli("project", "delete", project, check=False)


async def _collect(backend, events: list, stop: asyncio.Event):
    async for event in backend.watch():
        events.append((time.monotonic(), event))
        if stop.is_set():
            return


async def test_a_member_going_offline_is_seen_within_seconds(backend, cluster):
    """m3 is SIGKILLed: a cluster event arrives and the member shows offline long before
    the daemon's offline threshold (20 s); started again, it comes back online."""
    events: list = []
    stop = asyncio.Event()
    task = asyncio.ensure_future(_collect(backend, events, stop))
    await wait_for(lambda: _has(events, EventKind.CONNECTION), 15, "events connected")
    await backend.list_members()
    m3 = cluster.member("m3")
    killed = time.monotonic()
    m3.kill()
    try:
        async def offline():
            if not any(e.kind is EventKind.CLUSTER and t > killed for t, e in events):
                return False
            members = {m.name: m for m in await backend.list_members()}
            return members["m3"].status is MemberStatus.OFFLINE and members["m3"]
        seen = await wait_for(offline, 15, "m3 offline")
        took = time.monotonic() - killed
        assert took <= 5, f"offline shown after {took:.1f} s"
        assert "not answering" in seen.message and "refuses connections" in seen.message
        assert cli_members(cluster)["m3"]["status"] == "Online"  # the daemon: not yet
    finally:
        m3.start()
    async def online():
        members = {m.name: m for m in await backend.list_members()}
        return members["m3"].status is MemberStatus.ONLINE
    await wait_for(online, 60, "m3 online again")
    stop.set()
    task.cancel()


async def _has(events, kind):
    return any(e.kind is kind for _t, e in events)


async def test_failover_when_corrals_member_dies(cluster, unique):
    """The remote points at m1; m1 is SIGKILLed. The events stream ends, the next connect
    goes through another member and says so, m1 shows offline and its instances unknown
    with the reason while the others keep working; m1 started again comes back online."""
    on_m1, on_m2 = unique("x"), unique("y")
    cluster.cli("init", "busybox", on_m1, "--target", "m1")
    cluster.cli("init", "busybox", on_m2, "--target", "m2")
    remote = remote_of(cluster)
    assert remote.address == cluster.member("m1").url
    first = get_backend(remote, timeout=5)
    await first.connect()
    await first.list_members()  # learns the members' addresses
    events: list = []
    stop = asyncio.Event()
    task = asyncio.ensure_future(_collect(first, events, stop))
    await wait_for(lambda: _has(events, EventKind.CONNECTION), 15, "events connected")
    m1 = cluster.member("m1")
    m1.kill()
    second = None
    try:
        await asyncio.wait_for(task, 10)  # the stream of a cluster ends when it drops
        assert events[-1][1].action == "disconnected"
        await first.close()
        second = get_backend(remote, timeout=5)
        info = await second.connect()
        assert info.server_name in ("m2", "m3")
        assert "through" in info.note and m1.https_address in info.note
        members = {m.name: m for m in await second.list_members()}
        assert members["m1"].status is MemberStatus.OFFLINE
        listed = {i.name: i for i in await second.list_instances()}
        assert listed[on_m1].status is InstanceStatus.UNKNOWN
        assert "m1 is offline" in listed[on_m1].extra["reason"]

        async def survivors_online():
            # the dead member may have led the heartbeats: until the new leader's reach
            # the others (seconds, more on a busy host), the cluster calls them offline too
            members = {m.name: m for m in await second.list_members()}
            return all(members[n].status is MemberStatus.ONLINE for n in ("m2", "m3"))
        await wait_for(survivors_online, 60, "m2 and m3 online after m1's death")
        listed = {i.name: i for i in await second.list_instances()}
        assert listed[on_m2].status is InstanceStatus.STOPPED
        await second.start(InstanceRef(REMOTE, on_m2))
        assert (await second.get_instance(InstanceRef(REMOTE, on_m2))).status \
            is InstanceStatus.RUNNING
    finally:
        m1.start()
    try:
        async def online():
            members = {m.name: m for m in await second.list_members()}
            return members["m1"].status is MemberStatus.ONLINE
        await wait_for(online, 60, "m1 online again")
        listed = {i.name: i for i in await second.list_instances()}
        assert listed[on_m1].status is InstanceStatus.STOPPED
    finally:
        await second.close()
        cluster.cli("delete", "--force", on_m1, on_m2, check=False)


async def test_a_move_shows_progress_and_can_be_cancelled(backend, cluster, unique, tmp_path):
    """A container with 300 MB in it takes seconds to move: the progress says how much was
    copied, and cancelling leaves it where it was, with nothing left on the target."""
    name = unique()
    cluster.cli("init", "busybox", name, "--target", "m1")
    blob = tmp_path / "blob.bin"
    await asyncio.to_thread(_write_random, blob, 300)
    cluster.cli("file", "push", str(blob), f"{name}/root/blob.bin", timeout=300)
    ref = InstanceRef(REMOTE, name)
    texts: list[str] = []
    try:
        await backend.list_members()
        task = asyncio.ensure_future(backend.move_to_member(ref, "m2", progress=texts.append))
        await wait_for(lambda: _async(any("MB" in t for t in texts)), 60,
                       "progress of the copy")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert cluster.locations()[name] == "m1"
        assert not [n for n in cluster.locations() if "move-of" in n]
        running = [line for line in cluster.cli("operation", "list", "--format", "csv")
                   .stdout.splitlines() if "RUNNING" in line and "instance" in line]
        assert running == [], running
    finally:
        cluster.cli("delete", "--force", name)


def _write_random(path, mib: int) -> None:
    with open(path, "wb") as f:
        f.writelines(os.urandom(1 << 20) for _ in range(mib))


async def _async(value):
    return value


async def test_failover_through_the_addresses_an_incus_remote_lists(incus_cluster, unique):
    """An Incus remote may carry several comma-separated addresses: with nothing learnt
    yet (a fresh corral), a dead first address is skipped for the next one."""
    from backends.lxd import cluster as cluster_mod

    incus_cluster.wait_online()
    m1, m2 = incus_cluster.member("m1"), incus_cluster.member("m2")
    incus_cluster.set_remote_addresses([m1.url, m2.url])
    remote = remote_of(incus_cluster)
    assert remote.addresses == (m1.url, m2.url)
    saved = dict(cluster_mod.LEARNED)
    cluster_mod.LEARNED.clear()
    m1.kill()
    try:
        b = get_backend(remote, timeout=5)
        info = await b.connect()
        try:
            assert info.server_name == "m2"
            assert m1.https_address in info.note and "refused" in info.note
            await b.list_instances()  # the cluster answers through m2
        finally:
            await b.close()
    finally:
        m1.start()
        incus_cluster.set_remote_addresses([m1.url])
        cluster_mod.LEARNED.update(saved)
