"""The inventory: every remote's backend, connection state, instances and usage figures.

Plain asyncio (no Textual): the app runs :meth:`Inventory.run_remote` once per remote as a
worker and gets told about changes through ``on_change(remote, refs)`` (``refs`` is
``None`` when the whole remote changed). State follows the backends' event streams;
the only periodic work is sampling CPU/memory of the running instances the user can see.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import replace
from datetime import datetime, timezone
from typing import Awaitable, Callable, Iterable, TypeVar

from backends import get_backend, loaded, preload
from backends.base import Backend
from backends.read_only import READ_ONLY_CAPABILITIES
from backends.retry import Backoff
from backends.errors import AuthError, BackendError, NotFound, NotResponding
from backends.models import (
    BackendEvent,
    Capability,
    ConnectionState,
    EventKind,
    FirstListing,
    Instance,
    InstanceRef,
    InstanceState,
    InstanceStatus,
    Remote,
)

from .listings import Listings
from .sampling import Sampling
from .members import ClusterMembers
from .status import RemoteStatus

_IMPLIED_STATUS = {
    "instance-started": InstanceStatus.RUNNING,
    "instance-restarted": InstanceStatus.RUNNING,
    "instance-resumed": InstanceStatus.RUNNING,
    "instance-stopped": InstanceStatus.STOPPED,
    "instance-shutdown": InstanceStatus.STOPPED,
    "instance-paused": InstanceStatus.FROZEN,
}
"""Lifecycle actions whose outcome is known: shown at once, then confirmed by a fetch."""
FETCH_RETRIES = 3
"""Reads of a changed instance tried again (1, 2, 3 s later) after the daemon failed one."""

ChangeCallback = Callable[[str, "set[InstanceRef] | None"], None]
BackendFactory = Callable[[Remote, float], Backend]
T = TypeVar("T")


def _default_factory(remote: Remote, timeout: float) -> Backend:
    return get_backend(remote, timeout=timeout)


class Inventory(Sampling, Listings):
    """Owns the backends and the merged view of all instances."""

    def __init__(
        self,
        remotes: Iterable[Remote],
        *,
        on_change: ChangeCallback,
        timeout: float = 10.0,
        factory: BackendFactory = _default_factory,
        reconnect_cap: float = 15.0,
        first_listings: Mapping[str, Future[FirstListing | None]] | None = None,
    ) -> None:
        self.remotes = {r.name: r for r in remotes}
        self.statuses = {name: RemoteStatus(r) for name, r in self.remotes.items()}
        self.backends: dict[str, Backend] = {}
        self.instances: dict[InstanceRef, Instance] = {}
        self.states: dict[InstanceRef, InstanceState] = {}
        self.pending: dict[InstanceRef, str] = {}
        """Actions in flight shown in the status column (``stopping…``; UI: read only)."""
        self.history: dict[InstanceRef, deque[tuple[datetime, str]]] = {}
        """Recent lifecycle events and operations per instance (newest last)."""
        self.activity: dict[str, str] = {}
        """Work of a remote that belongs to no row (an import), for the activity line."""
        self.timeout = timeout
        self.reconnect_cap = reconnect_cap
        self._factory = factory
        self._on_change = on_change
        self._fetching: set[InstanceRef] = set()
        self._refetch: set[InstanceRef] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._refresh_pending: set[str] = set()
        self._wakeups: dict[str, asyncio.Event] = {}
        self._preloads: dict[str, asyncio.Future[None]] = {}
        self.on_resource: Callable[[str, BackendEvent], None] | None = None
        """Told of every lifecycle and operation event (the resource views follow them)."""
        self.members = ClusterMembers(self)  # of cluster remotes, from their events
        self._init_listings(first_listings)

    # Helpers ---------------------------------------------------------------------------

    def rows_changed(self, remote: str, refs: set[InstanceRef] | None = None) -> None:
        """Tell the screen that rows ``refs`` of ``remote`` changed (None: all of them)."""
        self._on_change(remote, refs)

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _set_state(self, name: str, state: ConnectionState, message: str = "") -> None:
        st = self.statuses[name]
        if st.state is not state or st.message != message:
            st.state = state
            st.message = message
            self.rows_changed(name, None)  # every row of the remote shows whether it is live

    def backend_for(self, ref: InstanceRef) -> Backend:
        backend = self.backends.get(ref.remote)
        status = self.statuses.get(ref.remote)
        if backend is None or status is None or status.state is not ConnectionState.CONNECTED:
            raise BackendError(f"Remote '{ref.remote}' is not connected.")
        return backend

    def instances_of(self, remote: str) -> list[Instance]:
        return [i for r, i in self.instances.items() if r.remote == remote]

    def remote_capabilities(self, name: str) -> frozenset[Capability]:
        """What a connected remote offers (a read-only one: only what changes nothing)."""
        status = self.statuses.get(name)
        connected = status is not None and status.state is ConnectionState.CONNECTED
        return self.declared_capabilities(name) if connected else frozenset()

    def declared_capabilities(self, name: str, *, narrowed: bool = True) -> frozenset[Capability]:
        """What ``name``'s backend offers, connected or not (read-only: only what changes
        nothing, if ``narrowed``); the UI reads them only here (tests/unit/test_structure)."""
        backend, status = self.backends.get(name), self.statuses.get(name)
        caps = backend.capabilities if backend is not None else frozenset()
        read_only = narrowed and status is not None and status.remote.read_only
        return caps & READ_ONLY_CAPABILITIES if read_only else caps

    def capabilities(self, ref: InstanceRef) -> frozenset[Capability]:
        """What can be done to one instance right now (nothing while an action runs)."""
        inst = self.instances.get(ref)
        backend = self.backends.get(ref.remote)
        if inst is None or backend is None or ref in self.pending:
            return frozenset()
        status = self.statuses[ref.remote]
        if status.state is not ConnectionState.CONNECTED or not status.listed:
            return frozenset()  # offline, or a row from the last run not yet confirmed
        return backend.instance_capabilities(inst) & self.declared_capabilities(ref.remote)

    def seed(self, name: str, instances: Iterable[Instance]) -> None:
        """Show rows from the last run until the remote's first listing replaces them."""
        if not self.statuses[name].listed:
            for inst in instances:
                self.instances.setdefault(inst.ref, inst)

    def retry(self, name: str) -> None:
        """Reconnect a remote now (the user asked): ends its wait or connection at once."""
        self._wakeups.setdefault(name, asyncio.Event()).set()

    # Supervisor ------------------------------------------------------------------------

    async def _sleep_or_wake(self, name: str, delay: float | None) -> bool:
        """Wait ``delay`` seconds (forever: ``None``) or until :meth:`retry`; True if woken."""
        event = self._wakeups.setdefault(name, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), delay)
        except asyncio.TimeoutError:
            return False
        event.clear()
        return True

    async def run_remote(self, name: str) -> None:
        """Connect, list and follow one remote forever; reconnect with backoff."""
        backoff = Backoff(cap=self.reconnect_cap)
        while True:
            remote = self.remotes[name]  # read again: the project shown may change
            if remote.problem:
                self._set_state(name, ConnectionState.ERROR, remote.problem)
                await self._sleep_or_wake(name, None)
                continue
            self._set_state(name, ConnectionState.CONNECTING, "")
            if await self.first_listing(name):  # started before the UI, if it was
                await self.after_first_frame()
            await self._preload(remote.kind)
            backend = self._factory(remote, self.timeout)
            # The event stream opens while the REST connection is made (one round trip
            # saved); its events wait in a queue until the first listing is in.
            events: asyncio.Queue[BackendEvent] = asyncio.Queue()
            pump = None
            if Capability.EVENTS in backend.capabilities:
                pump = asyncio.ensure_future(self._pump(backend, events))
            try:
                info = await backend.connect()
            except (BackendError, asyncio.CancelledError) as e:
                if pump is not None:
                    pump.cancel()
                await backend.close()
                if isinstance(e, asyncio.CancelledError):
                    raise
                if isinstance(e, AuthError):
                    self._set_state(name, ConnectionState.UNTRUSTED, e.message)
                    await self._sleep_or_wake(name, None)  # waits for the user to retry
                    continue
                state = (ConnectionState.NOT_RESPONDING if isinstance(e, NotResponding)
                         else ConnectionState.DISCONNECTED)
                self._set_state(name, state, e.message)
            else:
                backoff.reset()
                self.statuses[name].server = info
                self.backends[name] = backend
                try:
                    if await self._follow(name, events if pump is not None else None):
                        continue  # the user asked to reconnect: at once
                finally:
                    if pump is not None:
                        pump.cancel()
                    self.backends.pop(name, None)
                    await backend.close()
            if await self._sleep_or_wake(name, backoff.next()):
                backoff.reset()  # the user asked to reconnect

    async def _preload(self, kind: str) -> None:
        """Import a kind's backend (pylxd, websockets…: tens of milliseconds) in a thread,
        once per kind, so that neither the first frame nor the event loop waits for it.
        Every remote of the kind awaits the same import: a module already in
        ``sys.modules`` may still be importing in another thread, and importing it on the
        loop would then block the loop on the import lock."""
        task = self._preloads.get(kind)
        if task is None:
            if loaded(kind) and not self._preloads:
                return  # imported before this inventory started (tests, a second app)
            task = self._preloads[kind] = asyncio.ensure_future(
                asyncio.to_thread(preload, kind))
        try:
            await asyncio.shield(task)
        except BackendError:
            pass  # the factory says what is wrong

    @staticmethod
    async def _pump(backend: Backend, queue: asyncio.Queue[BackendEvent | None]) -> None:
        try:
            async for event in backend.watch():
                queue.put_nowait(event)
        finally:
            queue.put_nowait(None)  # the stream ended (or failed): the follower reconnects

    async def _follow(self, name: str, events: asyncio.Queue[BackendEvent | None] | None
                      ) -> bool:
        """Apply a connected remote's events until its stream ends (False) or the user
        asks to reconnect (True)."""
        wake = self._wakeups.setdefault(name, asyncio.Event())
        if events is None:
            # Backends without an event stream: a full refresh now, then on request.
            self._set_state(name, ConnectionState.CONNECTED)
            await self._list_until_done(name)
            return await self._sleep_or_wake(name, None)
        while True:
            getter = asyncio.ensure_future(events.get())
            waker = asyncio.ensure_future(wake.wait())
            try:
                await asyncio.wait({getter, waker}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waker.cancel()
                if not getter.done():
                    getter.cancel()
            if wake.is_set():
                wake.clear()
                return True
            event = getter.result()
            if event is not None and event.kind in (EventKind.CLUSTER, EventKind.CONNECTION):
                self.members.saw(name, event)
            if event is None:
                self._set_state(name, ConnectionState.DISCONNECTED, "event stream ended")
                return False
            if event.kind is EventKind.CONNECTION:
                self.statuses[name].operations.clear()
                if event.action == "connected":
                    # (Re)connected: list everything before applying the events that
                    # follow, so no stale listing overwrites a newer fetch.
                    self._set_state(name, ConnectionState.CONNECTED)
                    self.members.read_now(name)  # a cluster's members with its rows
                    await self._list_until_done(name)
                    continue
            self._handle(name, event)

    async def _list_until_done(self, name: str) -> None:
        """The listing after a (re)connect, retried with backoff while it fails."""
        backoff = Backoff(cap=self.reconnect_cap)
        while True:
            try:
                await self.refresh(name)
                self._set_state(name, ConnectionState.CONNECTED)
                return
            except BackendError as e:
                state = (ConnectionState.NOT_RESPONDING if isinstance(e, NotResponding)
                         else ConnectionState.ERROR)
                self._set_state(name, state, f"listing failed: {e.message} (retrying)")
                await asyncio.sleep(backoff.next())

    def _handle(self, name: str, event: BackendEvent) -> None:
        if event.kind is EventKind.CONNECTION:
            self.statuses[name].operations.clear()
            self._set_state(name, ConnectionState.NOT_RESPONDING if event.action ==
                            "not-responding" else ConnectionState.DISCONNECTED, event.message)
            return
        if self.on_resource is not None and event.kind in (EventKind.LIFECYCLE,
                                                           EventKind.OPERATION):
            self.on_resource(name, event)  # the views follow them (tui/views/pane.py)
        if event.kind is EventKind.OPERATION and event.operation is not None:
            ops = self.statuses[name].operations
            op = event.operation
            if op.done or op.id not in ops:
                for inst_name in op.instances:
                    ref = InstanceRef(name, inst_name, self.remotes[name].project)
                    what = op.description + (f": {op.status}" if op.done else "")
                    if op.error:
                        what += f" ({op.error})"
                    self._remember(ref, what, event.timestamp)
            if op.interactive:  # an open console/shell: not "busy"
                return
            if op.done:
                ops.pop(op.id, None)
            else:
                ops[op.id] = op
            self.rows_changed(name, set())
            return
        if event.action == "remote-changed":  # something was created/removed: list again
            self._schedule_refresh(name)
            return
        ref = event.ref
        if ref is None:
            return
        if ref.project != self.remotes[name].project:
            return
        action = event.action
        if action.startswith("instance-"):
            self._remember(ref, action.removeprefix("instance-").replace("-", " "),
                           event.timestamp)
        if action == "instance-deleted":
            self._drop(ref)
            if ref in self._fetching:
                self._refetch.add(ref)  # the fetch in flight must not bring it back
            self.rows_changed(name, {ref})
        elif action == "instance-renamed":
            self._schedule_refresh(name)
        elif action.startswith("instance-snapshot-"):
            self._spawn(self._snapshot_count(ref))
        elif action.startswith("instance-"):
            implied = _IMPLIED_STATUS.get(action)
            inst = self.instances.get(ref)
            if implied is not None and inst is not None and inst.status is not implied:
                self.instances[ref] = replace(inst, status=implied)
                if implied is not InstanceStatus.RUNNING:
                    self.states.pop(ref, None)
                self.rows_changed(name, {ref})
            self._schedule_fetch(ref)

    def _remember(self, ref: InstanceRef, what: str, when: datetime | None) -> None:
        events = self.history.setdefault(ref, deque(maxlen=30))
        events.append((when or datetime.now(timezone.utc), what))

    def _drop(self, ref: InstanceRef) -> None:
        self.instances.pop(ref, None)
        self.states.pop(ref, None)

    # Fetching --------------------------------------------------------------------------

    def refresh_soon(self, name: str) -> None:
        """List a remote again shortly (bursts of requests are coalesced into one)."""
        self._schedule_refresh(name)

    def fetch_soon(self, ref: InstanceRef) -> None:
        """Read one instance again shortly (its limits or description changed)."""
        self._schedule_fetch(ref)

    def show_progress(self, ref: InstanceRef, text: str) -> None:
        """Show ``text`` in the status column of an instance with work in flight."""
        self.pending[ref] = text
        self.rows_changed(ref.remote, {ref})

    def show_activity(self, remote: str, text: str) -> None:
        """Show (or with an empty ``text``, clear) work of a remote on the activity line."""
        if text:
            self.activity[remote] = text
        else:
            self.activity.pop(remote, None)
        self.rows_changed(remote, set())

    def _schedule_refresh(self, name: str) -> None:
        if name in self._refresh_pending:
            return
        self._refresh_pending.add(name)

        async def later() -> None:
            await asyncio.sleep(0.2)  # coalesce bursts of events into one listing
            self._refresh_pending.discard(name)
            try:
                await self.refresh(name)
            except BackendError:
                pass  # the next event or reconnect lists again

        self._spawn(later())

    def _schedule_fetch(self, ref: InstanceRef) -> None:
        if ref in self._fetching:
            self._refetch.add(ref)
            return
        self._fetching.add(ref)
        self._spawn(self._fetch(ref))

    async def _fetch(self, ref: InstanceRef) -> None:
        failures = 0
        try:
            while True:
                self._refetch.discard(ref)
                backend = self.backends.get(ref.remote)
                if backend is None:
                    return
                try:
                    inst = await backend.get_instance(ref)
                except NotFound:
                    self._drop(ref)
                    self.rows_changed(ref.remote, {ref})
                    return
                except BackendError:
                    # e.g. a cluster member busy with a move, or a slow answer: the row
                    # would keep what it showed before the change; read again a little later
                    failures += 1
                    if failures > FETCH_RETRIES:
                        return
                    await asyncio.sleep(failures)
                    continue
                inst = self._store(inst)
                self.rows_changed(ref.remote, {ref})
                if ref not in self._refetch:
                    break
            if inst.status is InstanceStatus.RUNNING:
                await self.sample(ref.remote, [ref])
        finally:
            self._fetching.discard(ref)

    def _store(self, inst: Instance) -> Instance:
        """Keep a freshly read instance (with the snapshot count already known when the
        read did not carry one); a stopped one has no usage figures any more."""
        old = self.instances.get(inst.ref)
        if old is not None and inst.snapshot_count is None:
            inst = replace(inst, snapshot_count=old.snapshot_count)
        self.instances[inst.ref] = inst
        if inst.status is not InstanceStatus.RUNNING:
            self.states.pop(inst.ref, None)
        return inst

    async def _snapshot_count(self, ref: InstanceRef) -> None:
        backend = self.backends.get(ref.remote)
        if backend is None or Capability.SNAPSHOTS not in backend.capabilities:
            return
        try:
            counts = await backend.snapshot_counts([ref])
        except BackendError:
            return
        inst = self.instances.get(ref)
        if inst is not None and ref in counts:
            self.instances[ref] = replace(inst, snapshot_count=counts[ref])
            self.rows_changed(ref.remote, {ref})

    async def refresh(self, name: str) -> None:
        """Full listing of one remote (after (re)connecting, and on request). Raises
        BackendError when the listing failed (the previous rows stay)."""
        backend = self.backends.get(name)
        if backend is None:
            return
        self._apply_listing(name, await backend.list_instances())

    # Actions ---------------------------------------------------------------------------

    async def act(self, ref: InstanceRef, verb: str, label: str, **kwargs) -> None:
        """Run the lifecycle ``verb`` (start, stop, restart, freeze, unfreeze, delete) on
        ``ref`` with ``kwargs``, showing ``label`` meanwhile.

        Raises:
            BackendError: whatever the backend raised, for the UI to show.
        """
        backend = self.backend_for(ref)
        run = {"start": backend.start, "stop": backend.stop, "restart": backend.restart,
               "freeze": backend.freeze, "unfreeze": backend.unfreeze,
               "delete": backend.delete}[verb]
        self.pending[ref] = label
        self.rows_changed(ref.remote, {ref})
        try:
            await run(ref, **kwargs)
        finally:
            self.pending.pop(ref, None)
            if ref.remote in self.backends:
                self._schedule_fetch(ref)
            self.rows_changed(ref.remote, {ref})

    async def track(self, ref: InstanceRef, label: str, work: Awaitable[T]) -> T:
        """Await ``work`` (an action on ``ref`` the verbs do not cover: snapshots,
        limits), showing ``label`` on its row meanwhile."""
        self.pending[ref] = label
        self.rows_changed(ref.remote, {ref})
        try:
            return await work
        finally:
            self.pending.pop(ref, None)
            if ref.remote in self.backends:
                self._schedule_fetch(ref)
            self.rows_changed(ref.remote, {ref})

    async def close(self) -> None:
        self.members.close()
        for task in list(self._tasks):
            task.cancel()
        for backend in list(self.backends.values()):
            await backend.close()
