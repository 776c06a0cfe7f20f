"""The inventory: every remote's backend, connection state, instances and usage figures.

Plain asyncio (no Textual): the app runs :meth:`Inventory.run_remote` once per remote as a
worker and gets told about changes through ``on_change(remote, refs)`` (``refs`` is
``None`` when the whole remote changed). State follows the backends' event streams;
the only periodic work is sampling CPU/memory of the running instances the user can see.

The inventory is the UI's one door; behind it, parts that each receive the shared
:class:`~.state.InventoryState` (and whatever else they use) when it builds them:
:class:`~.supervisor.Supervisor` (connections), :class:`~.events.Events` (one event
applied), :class:`~.fetching.Fetches` (reads after changes), :class:`~.sampling.Sampler`
(usage figures), :class:`~.listings.FirstListings` (the listings made before the UI) and
:class:`~.members.ClusterMembers` (a cluster's members).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping
from concurrent.futures import Future
from datetime import datetime
from typing import Awaitable, Callable, Iterable, TypeVar

from backends.base import Backend
from backends.errors import BackendError
from backends.models import (
    BackendEvent,
    Capability,
    ConnectionState,
    FirstListing,
    Instance,
    InstanceRef,
    InstanceState,
    Remote,
)
from backends.read_only import READ_ONLY_CAPABILITIES

from .events import Events
from .fetching import Fetches
from .listings import FirstListings
from .members import ClusterMembers
from .sampling import Sampler
from .state import ChangeCallback, InventoryState, Tasks
from .status import RemoteStatus
from .supervisor import BackendFactory, Supervisor, default_factory

__all__ = ["BackendFactory", "ChangeCallback", "Inventory"]

T = TypeVar("T")


class Inventory:
    """Owns the backends and the merged view of all instances."""

    def __init__(
        self,
        remotes: Iterable[Remote],
        *,
        on_change: ChangeCallback,
        timeout: float = 10.0,
        factory: BackendFactory = default_factory,
        reconnect_cap: float = 15.0,
        first_listings: Mapping[str, Future[FirstListing | None]] | None = None,
    ) -> None:
        self.state = InventoryState(remotes, on_change)
        self.timeout = timeout
        self.tasks = Tasks()
        self.sampler = Sampler(self.state)
        self.fetches = Fetches(self.state, self.sampler, self.tasks.spawn)
        self.members = ClusterMembers(self.state, relist=self.fetches.refresh_soon,
                                      spawn=self.tasks.spawn)  # of cluster remotes
        self.listings = FirstListings(self.state, self.members, first_listings)
        self.events = Events(self.state, self.fetches)
        self.supervisor = Supervisor(
            self.state, listings=self.listings, fetches=self.fetches, members=self.members,
            events=self.events, factory=factory, timeout=timeout, reconnect_cap=reconnect_cap)

    # The shared state, as the UI reads it ---------------------------------------------

    @property
    def remotes(self) -> dict[str, Remote]:
        return self.state.remotes

    @property
    def statuses(self) -> dict[str, RemoteStatus]:
        return self.state.statuses

    @property
    def backends(self) -> dict[str, Backend]:
        return self.state.backends

    @property
    def instances(self) -> dict[InstanceRef, Instance]:
        return self.state.instances

    @property
    def states(self) -> dict[InstanceRef, InstanceState]:
        return self.state.states

    @property
    def pending(self) -> dict[InstanceRef, str]:
        """Actions in flight shown in the status column (``stopping…``; UI: read only)."""
        return self.state.pending

    @property
    def history(self) -> dict[InstanceRef, deque[tuple[datetime, str]]]:
        """Recent lifecycle events and operations per instance (newest last)."""
        return self.state.history

    @property
    def activity(self) -> dict[str, str]:
        """Work of a remote that belongs to no row (an import), for the activity line."""
        return self.state.activity

    @property
    def on_resource(self) -> Callable[[str, BackendEvent], None] | None:
        """Told of every lifecycle and operation event (the resource views follow them)."""
        return self.events.on_resource

    @on_resource.setter
    def on_resource(self, callback: Callable[[str, BackendEvent], None] | None) -> None:
        self.events.on_resource = callback

    @property
    def first_frame(self) -> asyncio.Event | None:
        """Set by the UI once its first frame is painted (see :meth:`after_first_frame`)."""
        return self.listings.first_frame

    @first_frame.setter
    def first_frame(self, event: asyncio.Event | None) -> None:
        self.listings.first_frame = event

    @property
    def keys_handled(self) -> asyncio.Event | None:
        """Set by the UI once it has handled the keys typed before it was ready (see
        :meth:`after_first_frame`)."""
        return self.listings.keys_handled

    @keys_handled.setter
    def keys_handled(self, event: asyncio.Event | None) -> None:
        self.listings.keys_handled = event

    def rows_changed(self, remote: str, refs: set[InstanceRef] | None = None) -> None:
        """Tell the screen that rows ``refs`` of ``remote`` changed (None: all of them)."""
        self.state.rows_changed(remote, refs)

    def instances_of(self, remote: str) -> list[Instance]:
        return self.state.instances_of(remote)

    # Queries ---------------------------------------------------------------------------

    def backend_for(self, ref: InstanceRef) -> Backend:
        backend = self.backends.get(ref.remote)
        status = self.statuses.get(ref.remote)
        if backend is None or status is None or status.state is not ConnectionState.CONNECTED:
            raise BackendError(f"Remote '{ref.remote}' is not connected.")
        return backend

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

    # Start and connections -------------------------------------------------------------

    def seed(self, name: str, instances: Iterable[Instance]) -> None:
        """Show rows from the last run until the remote's first listing replaces them."""
        if not self.statuses[name].listed:
            for inst in instances:
                self.instances.setdefault(inst.ref, inst)

    @property
    def first_listings_pending(self) -> bool:
        """Some first listing was started and is not shown (nor dropped) yet."""
        return self.listings.pending

    def take_first_listings(self) -> None:
        """Show the first listings that are in already (the rest arrive as each remote's
        supervisor awaits them: :meth:`first_listing`)."""
        self.listings.take_arrived()

    async def first_listing(self, name: str) -> bool:
        """Wait for remote ``name``'s first listing, if one was started, and show it; True
        when its rows are listed now (:meth:`.FirstListings.wait_and_take`)."""
        return await self.listings.wait_and_take(name)

    async def after_first_frame(self) -> None:
        """Until the UI's first frame is out and the keys typed before it are handled."""
        await self.listings.after_first_frame()

    async def run_remote(self, name: str) -> None:
        """Connect, list and follow one remote forever; reconnect with backoff."""
        await self.supervisor.run(name)

    def retry(self, name: str) -> None:
        """Reconnect a remote now (the user asked): ends its wait or connection at once."""
        self.supervisor.retry(name)

    # Reads -----------------------------------------------------------------------------

    async def refresh(self, name: str) -> None:
        """Full listing of one remote (after (re)connecting, and on request). Raises
        BackendError when the listing failed (the previous rows stay)."""
        await self.fetches.refresh(name)

    def refresh_soon(self, name: str) -> None:
        """List a remote again shortly (bursts of requests are coalesced into one)."""
        self.fetches.refresh_soon(name)

    def fetch_soon(self, ref: InstanceRef) -> None:
        """Read one instance again shortly (its limits or description changed)."""
        self.fetches.fetch_soon(ref)

    async def sample_visible(self, visible: Iterable[InstanceRef]) -> None:
        """Usage figures of the rows the user can see (one notification for all)."""
        await self.sampler.sample_visible(visible)

    # Actions ---------------------------------------------------------------------------

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
                self.fetches.fetch_soon(ref)
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
                self.fetches.fetch_soon(ref)
            self.rows_changed(ref.remote, {ref})

    async def close(self) -> None:
        self.tasks.cancel()
        for backend in list(self.backends.values()):
            await backend.close()
