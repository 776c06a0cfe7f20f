"""An LXD/Incus remote that is a cluster: its members, where instances live and go, and
failing over to another member when the one corral talks to dies.

* **Members** come from ``GET /1.0/cluster/members?recursion=1``. The daemon marks a member
  offline only after ``cluster.offline_threshold`` (20 s by default) of missed heartbeats,
  which are sent about every 10 s. corral learns sooner: the events stream carries the
  daemons' log lines (``type=logging``), and the ones that mean "a member stopped or
  started answering" (a failed heartbeat, a dropped database proxy or event listener,
  "Cluster member state has changed") become ``EventKind.CLUSTER`` events. The next
  :meth:`list_members` then also tries a TCP connection to every member's address: one
  that refuses is shown offline at once, with what failed, until it answers again.
* **Failover**: an HTTPS cluster remote has more addresses than the one configured: every
  member's URL (remembered for the process, per remote) and Incus' comma-separated list.
  ``connect`` tries them in turn; the events stream of a cluster ends when it drops, so
  the inventory reconnects at once through a member that is alive. The remote's
  ``ServerInfo.note`` then says which member corral went through and why.
* **Placement, moves, evacuation**: ``?target=`` on ``POST /1.0/instances`` (a member or
  ``@group``), ``POST /1.0/instances/<name>?target=<member>`` with ``migration: true``
  (stopped instances; the daemon moves running ones only for VMs with live migration),
  ``POST /1.0/cluster/members/<name>/state`` with ``evacuate`` / ``restore``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from .. import threads
from ..base import Backend
from ..errors import Conflict, InvalidInput, NotFound, NotResponding, OperationFailed, Unreachable
from ..members import AUTO_PLACEMENT, ClusterMember, MemberStatus, Placement
from ..models import (
    BackendEvent,
    Capability,
    EventKind,
    Instance,
    InstanceRef,
    InstanceStatus,
    InstanceType,
    ServerInfo,
)
from . import convert
from .convert import to_member
from .fasthttp import FastGet, HTTPStatusError
from .known import Known
from .lazy import pylxd_exc
from .ops import Ops
from .rest import Rest

LEARNED: dict[tuple[str, str], tuple[str, ...]] = {}
"""Member addresses of the cluster behind a remote, ``(name, configured address)`` ->
``https://host:port`` URLs, remembered across reconnects of this process."""

_HINTS_ANY = ("Cluster member state has changed", "Event listener server handler stopped")
"""Log lines that mean some member may have come or gone (the peer is not named)."""
_HINTS_MEMBER = ("Failed heartbeat", "Failed adding member event listener client",
                 "Added member event listener client",
                 "Removed inactive member event listener client",
                 "Dqlite proxy failed", "Dqlite proxy stopped", "Dqlite proxy started")
"""Log lines that name a member's address (``context.remote``) that went or came back."""

STALE_AFTER = 1.5
"""Seconds a members read may take before the last reading, checked against the members'
addresses, is given instead."""


SHARED_READ = 0.1
"""Seconds within which another read of the members shares the one under way: the listing
after connecting reads them, and so does the UI, at the same moment."""


def _ignore_outcome(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()  # read, so that asyncio does not log it as never retrieved


def host_port(url: str) -> str:
    return url.split("://", 1)[-1].rstrip("/")


async def _probe(url: str, timeout: float) -> str | None:
    """Why nothing answers at ``url`` (None: a TCP connection opens)."""
    host, _, port = host_port(url).rpartition(":")
    try:
        _reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host.strip("[]"), int(port)), timeout)
    except ConnectionRefusedError:
        return "refuses connections"
    except TimeoutError:
        return f"does not answer within {timeout:g} s"
    except (OSError, ValueError) as e:
        return f"cannot be reached ({getattr(e, 'strerror', None) or e})"
    writer.close()
    return None


class ClusterState:
    """What the cluster concern remembers between calls (one per backend)."""

    def __init__(self, configured: str) -> None:
        self.configured = configured
        """The address the remote was configured with (the key of ``LEARNED``)."""
        self.clustered = False
        self.members: dict[str, ClusterMember] = {}
        """The last listing, by name."""
        self.down: dict[str, str] = {}
        """Member name -> why corral finds it not answering (its own observation)."""
        self.note = ""
        self.locations: dict[str, str] | None = None
        """Instance name -> member, from the last listing (kept current by reads); the
        members' instance counts come from it."""
        self.pool = threads.Pool(max_workers=1, thread_name_prefix="lxd-cluster")
        self.reading: tuple[float, asyncio.Future[list[ClusterMember]]] | None = None
        """The read of the members under way, and when it started."""


class Clustering(Backend):
    """The cluster verbs of :class:`~backends.lxd.backend.LXDBackend`, and the failover."""

    rest: Rest
    ops: Ops
    known: Known
    cluster: ClusterState

    # Connecting, with failover -----------------------------------------------------------

    def _candidates(self) -> list[str]:
        remote = self.remote
        seen: list[str] = []
        # the configured list counts when it holds the address (a Remote whose address
        # was replaced on its own is meant to be reached there only)
        listed = remote.addresses if remote.address in remote.addresses else ()
        for addr in (remote.address, *listed,
                     *LEARNED.get((remote.name, remote.address), ())):
            if addr and addr not in seen:
                seen.append(addr)
        return seen

    def _use_address(self, address: str) -> None:
        remote = replace(self.remote, address=address)
        self.remote = remote
        self.rest.remote = remote
        self.rest.fast.close()
        self.rest.fast = FastGet(remote, self.timeout, read_timeout=self.timeout * 2)

    async def connect(self) -> ServerInfo:
        try:
            return await self._connect_any()
        finally:
            self.known.ready.set()  # the events stream may subscribe (and fail) now

    async def _connect_any(self) -> ServerInfo:
        configured = self.remote
        candidates = [] if configured.is_unix else self._candidates()
        failures: list[tuple[str, str]] = []
        info: ServerInfo | None = None
        for address in candidates if len(candidates) > 1 else ():
            if address != self.remote.address:
                self._use_address(address)
            try:
                info = await super().connect()
                break
            except (Unreachable, NotResponding) as e:
                failures.append((address, "no answer" if isinstance(e, NotResponding)
                                 else "refused" if "refused" in e.message else "unreachable"))
                if address == candidates[-1]:
                    self._use_address(configured.address)
                    raise
        if info is None:
            info = await super().connect()
        return await self._after_connect(info, failures)

    async def _after_connect(self, info: ServerInfo,
                             failures: list[tuple[str, str]]) -> ServerInfo:
        host = self.known.host
        env = host.get("environment") or {}
        self.cluster.clustered = bool(env.get("server_clustered"))
        if not self.cluster.clustered:
            self.capabilities = type(self).capabilities - {Capability.CLUSTER}
            return info
        self.known.cluster_hook = self._cluster_frame
        self.known.ready.set()  # the stream knows it is a cluster: subscribe while members load
        if not failures:  # nothing to say of the members here: the listing reads them
            return info
        # failed over: say which members did not answer, by name
        by_url = {host_port(m.url): m.name for m in await self._members_or_none()}
        dead = ", ".join(f"{by_url.get(host_port(a), 'member')} at {host_port(a)} "
                         f"({why})" for a, why in failures)
        here = info.server_name or "another member"
        self.cluster.note = (f"reached through {here} ({host_port(self.remote.address)}):"
                             f" {dead} when corral connected")
        info = replace(info, note=self.cluster.note)
        self.known.info = info
        return info

    async def _members_or_none(self) -> list[ClusterMember]:
        try:
            return await self.list_members()
        except (OperationFailed, NotFound):
            return []

    async def close(self) -> None:
        self.cluster.pool.shutdown(wait=False, cancel_futures=True)
        await super().close()

    # Events -----------------------------------------------------------------------------

    def _cluster_frame(self, data: Mapping[str, Any]) -> BackendEvent | None:
        """A frame of the events stream that says a member changed (or may have)."""
        meta = data.get("metadata") or {}
        kind = data.get("type")
        name = self.remote.name
        if kind == "lifecycle":
            action = str(meta.get("action") or "")
            if action.startswith("cluster-member-"):
                member = convert.url_name(str(meta.get("source") or ""))
                return BackendEvent(EventKind.CLUSTER, name, action="member-changed",
                                    message=member)
            return None
        if kind != "logging":
            return None
        message = str(meta.get("message") or "")
        context = meta.get("context") or {}
        if message in _HINTS_ANY:
            return BackendEvent(EventKind.CLUSTER, name, action="member-changed")
        if message in _HINTS_MEMBER:
            peer = str(context.get("remote") or context.get("address") or "")
            member = next((m.name for m in self.cluster.members.values()
                           if host_port(m.url) == peer), None)
            if member is not None:
                return BackendEvent(EventKind.CLUSTER, name, action="member-changed",
                                    message=member)
        return None

    # Members ----------------------------------------------------------------------------

    def _need_cluster(self) -> None:
        if not self.cluster.clustered:
            raise self._unsupported("do this: it is not a cluster")

    async def list_members(self) -> list[ClusterMember]:
        self._need_cluster()
        now = time.monotonic()
        under_way = self.cluster.reading
        if under_way is None or under_way[1].done() or now - under_way[0] > SHARED_READ:
            task = asyncio.ensure_future(self._read_members())
            task.add_done_callback(_ignore_outcome)  # (its callers may all be gone)
            under_way = self.cluster.reading = (now, task)
        return list(await asyncio.shield(under_way[1]))

    async def _read_members(self) -> list[ClusterMember]:
        rest = self.rest
        rest.ensure_connected()
        known = self.cluster.locations or {}

        def _read() -> list[dict[str, Any]]:  # the fast GET path: no wait for pylxd
            members = rest.fast.get_json("cluster/members", {"recursion": "1"})
            return members if isinstance(members, list) else []

        # Its own thread: usage sampling may keep the remote's pool busy, and a member
        # going away must reach the screen at once.
        loop = asyncio.get_running_loop()
        reading = asyncio.ensure_future(asyncio.wait_for(
            loop.run_in_executor(self.cluster.pool, _read), self.timeout * 2))
        previous = list(self.cluster.members.values())
        if previous:
            # When the database leader died, the cluster answers nothing until a new one
            # is elected (seconds): say meanwhile what the members' own addresses say.
            done, _pending = await asyncio.wait({reading}, timeout=STALE_AFTER)
            if not done:
                reading.add_done_callback(_ignore_outcome)
                return await self._overlay(previous, " (the cluster's database does not "
                                                     "answer yet)")
        try:
            raw = await reading
        except Exception as e:
            raise rest.map_error(e) from e
        counts: dict[str, int] = {}
        for loc in known.values():
            counts[loc] = counts.get(loc, 0) + 1
        members = [to_member(d, self.remote.name, counts.get(str(d.get("server_name")), 0))
                   for d in raw]
        LEARNED[(self.remote.name, self.cluster.configured)] = tuple(
            m.url for m in members if m.url)
        return await self._overlay(members, " (the cluster's heartbeat has not noticed yet)")

    async def _overlay(self, members: list[ClusterMember], why: str) -> list[ClusterMember]:
        """``members`` with those whose address refuses shown offline, in words."""
        probes = await asyncio.gather(*(_probe(m.url, 1.0) for m in members if m.url))
        down: dict[str, str] = {}
        for member, problem in zip([m for m in members if m.url], probes):
            if problem:
                down[member.name] = f"{host_port(member.url)} {problem}"
        self.cluster.down = down
        out = []
        for m in members:
            if m.name in down and m.status is not MemberStatus.OFFLINE:
                m = replace(m, status=MemberStatus.OFFLINE,
                            message=f"not answering: {down[m.name]}{why}")
            out.append(m)
        self.cluster.members = {m.name: m for m in out}
        return out

    def _offline(self) -> dict[str, str]:
        """Members whose instances cannot be known right now, with the reason."""
        return {m.name: m.message or m.status.value for m in self.cluster.members.values()
                if m.status is MemberStatus.OFFLINE}

    def _mark(self, inst: Instance, offline: Mapping[str, str]) -> Instance:
        return convert.on_offline_member(inst, offline)

    async def list_instances(self) -> list[Instance]:
        if self.cluster.clustered and not self.cluster.members:
            # none read yet (connecting does not wait for them): read beside the instances,
            # so that those on an offline member are marked
            _members, instances = await asyncio.gather(self._members_or_none(),
                                                       super().list_instances())
        else:
            instances = await super().list_instances()
        if self.cluster.clustered:
            self.cluster.locations = {i.name: i.location for i in instances}
        offline = self._offline() if self.cluster.clustered else {}
        return [self._mark(i, offline) for i in instances] if offline else instances

    async def get_instance(self, ref: InstanceRef) -> Instance:
        try:
            inst = await super().get_instance(ref)
        except NotFound:
            if self.cluster.locations is not None:
                self.cluster.locations.pop(ref.name, None)
            raise
        if self.cluster.locations is not None:
            self.cluster.locations[ref.name] = inst.location
        offline = self._offline() if self.cluster.clustered else {}
        return self._mark(inst, offline) if offline else inst

    async def placements(self) -> list[Placement]:
        members = await self.list_members()
        out = [AUTO_PLACEMENT]
        for m in members:
            usable = m.status is MemberStatus.ONLINE
            out.append(Placement(m.name, f"member {m.name}",
                                 f"{m.instances} instances" if usable
                                 else f"{m.status.value}: {m.message}"))
        if "clustering_groups" in self.known.extensions:
            client = self.rest.client
            groups = await self.rest.call(lambda: client.api.cluster.groups.get(
                params={"recursion": 1}).json()["metadata"])
            for g in groups or ():
                names = ", ".join(g.get("members") or ()) or "no members"
                out.append(Placement(f"@{g.get('name')}", f"group {g.get('name')}", names))
        return out

    # Moving and evacuating --------------------------------------------------------------

    def live_move_problem(self, instance: Instance) -> str | None:
        if instance.type is not InstanceType.VM:
            return (f"{self.rest.product} moves a running container only by stopping it "
                    f"first (live migration is for VMs)")
        if "migration.stateful" not in instance.config or \
                instance.config.get("migration.stateful") not in ("true", "1"):
            return "live migration needs migration.stateful=true on the VM"
        return None

    async def move_to_member(self, ref: InstanceRef, member: str, *,
                             progress: Callable[[str], None] | None = None) -> Instance:
        self._need_cluster()
        rest = self.rest
        inst = await self.get_instance(ref)
        if inst.location == member:
            raise InvalidInput(f"{ref} is already on {member}.")
        known = self.cluster.members.get(member)
        if known is None:
            raise InvalidInput(f"'{member}' is not a member of '{self.remote.name}'.")
        if known.status is not MemberStatus.ONLINE:
            raise Conflict(f"{member} is {known.status.value} ({known.message}); "
                           f"nothing can move there now.")
        live = inst.status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN)
        if live:
            problem = self.live_move_problem(inst)
            if problem:
                raise Conflict(f"{ref} is running and {problem}. Stop it, then move it.")
        report = progress or (lambda _text: None)
        report(f"moving to {member}")
        client = rest.client
        body = {"name": ref.name, "migration": True, "live": live}

        def _post() -> str:
            return convert.operation_id(client.api.instances[ref.name].post(
                json=body, params={"target": member}).json())

        op_id = await rest.call(_post)
        watcher = asyncio.ensure_future(self._transfer_progress(ref.name, report))
        try:
            meta = await self.ops.follow(op_id, lambda _text: None, timeout=3600)
        except asyncio.CancelledError:
            await asyncio.shield(self._cancel(op_id, ref.name))
            raise
        finally:
            watcher.cancel()
        if meta.get("status") != "Success":
            raise OperationFailed(f"Moving {ref} to {member} failed: "
                                  f"{meta.get('err') or meta.get('status')}.")
        return await self.get_instance(ref)

    def _operations_of(self, name: str) -> list[dict[str, Any]]:
        """(In a pool thread) the running operations that name instance ``name``."""
        data = self.rest.client.api.operations.get(params={"recursion": 1}).json()
        running = (data.get("metadata") or {}).get("running") or []
        return [op for op in running
                if f"/1.0/instances/{name}" in (op.get("resources") or {}).get("instances", ())]

    async def _transfer_progress(self, name: str, report: Callable[[str], None]) -> None:
        """Pass on what the operations moving ``name`` say (the copy's size and speed are
        on the migration's websocket operation, not on the one the move returned)."""
        last = ""
        while True:
            await asyncio.sleep(1)
            try:
                ops = await self.rest.call(self._operations_of, name)
            except (OperationFailed, Unreachable, NotResponding, NotFound):
                continue
            # the websocket operation carries the copy; the other one an image unpack
            ops.sort(key=lambda op: op.get("class") != "websocket")
            texts = [convert.progress_text(op.get("metadata")) for op in ops]
            text = next((t for t in texts if t), "")
            text = re.sub(r"lxd-move-of-[0-9a-f-]+|incus-move-of-[0-9a-f-]+", name, text)
            if text and text != last:
                last = text
                report(text.removeprefix(f"{name}: "))

    async def _cancel(self, op_id: str, name: str) -> None:
        """Stop a move: LXD cancels it through the migration's websocket operation (the
        one the move returned cannot be cancelled); the instance stays where it was."""
        rest = self.rest
        client = rest.client

        def _do() -> None:
            for op in self._operations_of(name):
                if op.get("may_cancel"):
                    try:
                        client.api.operations[op["id"]].delete()
                    except pylxd_exc.LXDAPIException:
                        pass  # finished meanwhile
            self.ops.wait_quietly(op_id, 120)

        with contextlib.suppress(Exception):  # the caller was cancelled; nothing to tell
            await rest.call(_do, timeout=150)

    async def _member_state(self, member: str, action: str,
                            progress: Callable[[str], None] | None) -> None:
        self._need_cluster()
        rest = self.rest
        client = rest.client
        report = progress or (lambda _text: None)

        def _post() -> str:
            return convert.operation_id(client.api.cluster.members[member].state.post(
                json={"action": action}).json())

        try:
            op_id = await rest.call(_post)
        except NotFound as e:
            raise InvalidInput(f"'{member}' is not a member of '{self.remote.name}'.") from e
        started = time.monotonic()
        meta = await self.ops.follow(op_id, report, timeout=3600)
        if meta.get("status") != "Success":
            verb = "Evacuating" if action == "evacuate" else "Restoring"
            raise OperationFailed(f"{verb} {member} failed after "
                                  f"{time.monotonic() - started:.0f} s: "
                                  f"{meta.get('err') or meta.get('status')}.")

    async def cluster_instances(self) -> list[Instance]:
        self._need_cluster()
        fast = self.rest.fast

        def _read() -> Any:
            try:
                return fast.get_json("instances", {"recursion": "1", "all-projects": "true"})
            except HTTPStatusError as e:  # e.g. a certificate restricted to some projects
                raise OperationFailed(f"Cannot list the instances of every project on "
                                      f"'{self.remote.name}': {e}") from e

        items = await self.rest.call(_read)
        out = []
        for d in items if isinstance(items, list) else ():
            with contextlib.suppress(Exception):  # a malformed entry: listed nowhere else
                out.append(convert.to_instance(d, self.remote.name))
        here = self.remote.project
        return sorted(out, key=lambda i: (i.ref.project != here, i.ref.project, i.name))

    async def evacuate_member(self, member: str, *,
                              progress: Callable[[str], None] | None = None) -> None:
        await self._member_state(member, "evacuate", progress)

    async def restore_member(self, member: str, *,
                             progress: Callable[[str], None] | None = None) -> None:
        await self._member_state(member, "restore", progress)
