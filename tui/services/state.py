"""What the parts of the inventory share: the remotes, their backends and connection states,
every instance with its usage figures and history, and the one way to say that rows changed.

The parts (:mod:`.sampling`, :mod:`.fetching`, :mod:`.listings`, :mod:`.members`,
:mod:`.events`, :mod:`.supervisor`) each receive this state, and what else they need, when
:class:`~.inventory.Inventory` builds them; none reaches into another's internals. Plain
asyncio, no Textual.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from datetime import datetime, timezone

from backends.base import Backend
from backends.models import (
    ConnectionState,
    Instance,
    InstanceRef,
    InstanceState,
    InstanceStatus,
    Remote,
)

from .status import RemoteStatus

ChangeCallback = Callable[[str, "set[InstanceRef] | None"], None]
Spawn = Callable[[Awaitable[None]], None]
"""Runs a coroutine in the background, cancelled when the inventory closes."""


class InventoryState:
    """The inventory's data, read and written by its parts; :meth:`rows_changed` tells the
    screen about a change (every part that changes rows says so through it)."""

    def __init__(self, remotes: Iterable[Remote], on_change: ChangeCallback) -> None:
        self.remotes = {r.name: r for r in remotes}
        self.statuses = {name: RemoteStatus(r) for name, r in self.remotes.items()}
        self.backends: dict[str, Backend] = {}
        """The connected remotes' backends (a remote's is here only while it is connected)."""
        self.instances: dict[InstanceRef, Instance] = {}
        self.states: dict[InstanceRef, InstanceState] = {}
        """Usage figures of running instances the user has seen (:mod:`.sampling`)."""
        self.pending: dict[InstanceRef, str] = {}
        """Actions in flight shown in the status column (``stopping…``; UI: read only)."""
        self.history: dict[InstanceRef, deque[tuple[datetime, str]]] = {}
        """Recent lifecycle events and operations per instance (newest last)."""
        self.activity: dict[str, str] = {}
        """Work of a remote that belongs to no row (an import), for the activity line."""
        self._on_change = on_change

    def rows_changed(self, remote: str, refs: set[InstanceRef] | None = None) -> None:
        """Tell the screen that rows ``refs`` of ``remote`` changed (None: all of them; an
        empty set: none, but what the remote shows beside them, its operations…)."""
        self._on_change(remote, refs)

    def set_connection(self, name: str, state: ConnectionState, message: str = "") -> None:
        """Remote ``name`` is now in ``state`` (``message``: why)."""
        st = self.statuses[name]
        if st.state is not state or st.message != message:
            st.state = state
            st.message = message
            self.rows_changed(name, None)  # every row of the remote shows whether it is live

    def instances_of(self, remote: str) -> list[Instance]:
        return [i for r, i in self.instances.items() if r.remote == remote]

    def store(self, inst: Instance) -> Instance:
        """Keep a freshly read instance (with the snapshot count already known when the
        read did not carry one); a stopped one has no usage figures any more."""
        old = self.instances.get(inst.ref)
        if old is not None and inst.snapshot_count is None and old.snapshot_count is not None:
            inst = replace(inst, snapshot_count=old.snapshot_count)
        self.instances[inst.ref] = inst
        if inst.status is not InstanceStatus.RUNNING:
            self.states.pop(inst.ref, None)
        return inst

    def drop(self, ref: InstanceRef) -> None:
        """The instance is gone."""
        self.instances.pop(ref, None)
        self.states.pop(ref, None)

    def apply_listing(self, name: str, listed: Iterable[Instance]) -> None:
        """Every instance of remote ``name`` is now ``listed``: rows not in it go. Once the
        remote was listed, only the rows that changed are said to have changed (the
        listing after a reconnect, hundreds of rows, mostly the same)."""
        fresh = {i.ref: i for i in listed}
        changed = {r for r in self.instances if r.remote == name and r not in fresh}
        for ref in changed:
            self.drop(ref)
        for inst in fresh.values():
            old = self.instances.get(inst.ref)
            if not _same(self.store(inst), old):
                changed.add(inst.ref)
        status = self.statuses[name]
        first, status.listed = not status.listed, True
        # (every row also when one runs now: a listing is followed by a usage sample)
        running = any(self.instances[r].status is InstanceStatus.RUNNING
                      for r in changed if r in self.instances)
        self.rows_changed(name, None if first or running else changed)

    def remember(self, ref: InstanceRef, what: str, when: datetime | None) -> None:
        """Add ``what`` happened to ``ref`` (at ``when``; unknown: now) to its history."""
        events = self.history.setdefault(ref, deque(maxlen=30))
        events.append((when or datetime.now(timezone.utc), what))


def _same(new: Instance, old: Instance | None) -> bool:
    """Equal in every field, those left out of ``==`` too (config, devices, extra)."""
    return old is not None and new == old and new.config == old.config \
        and new.devices == old.devices and new.extra == old.extra


class Tasks:
    """The background tasks of the inventory's parts, cancelled together when it closes."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()
