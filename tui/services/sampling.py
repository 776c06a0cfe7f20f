"""Usage figures of the rows the user can see: the only periodic work of the inventory."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import replace

from backends.base import Backend
from backends.errors import BackendError
from backends.models import (
    Capability,
    ConnectionState,
    Instance,
    InstanceRef,
    InstanceState,
    InstanceStatus,
)

from .status import RemoteStatus


class Sampling:
    """CPU/memory/disk samples and snapshot counts, for :class:`~.inventory.Inventory`
    (which holds the state these read and write)."""

    backends: dict[str, Backend]
    statuses: dict[str, RemoteStatus]
    instances: dict[InstanceRef, Instance]
    states: dict[InstanceRef, InstanceState]
    rows_changed: Callable[..., None]

    async def sample(self, name: str, refs: list[InstanceRef], *, notify: bool = True) -> None:
        """Fetch usage figures of the running ones of these instances, and snapshot counts
        of those not counted yet (only rows the user can see are sampled)."""
        backend = self.backends.get(name)
        if backend is None or not refs or \
                self.statuses[name].state is not ConnectionState.CONNECTED:
            return
        running = [r for r in refs if (i := self.instances.get(r)) is not None
                   and i.status is InstanceStatus.RUNNING]
        uncounted = [r for r in refs if (i := self.instances.get(r)) is not None
                     and i.snapshot_count is None]
        counts_snapshots = Capability.SNAPSHOTS in backend.capabilities
        states: dict[InstanceRef, InstanceState] = {}
        counts: dict[InstanceRef, int] = {}
        try:
            if running and Capability.METRICS in backend.capabilities:
                states = await backend.get_states(running)
            if uncounted and counts_snapshots:
                counts = await backend.snapshot_counts(uncounted)
        except BackendError:
            return
        for ref in running:
            if ref in states:
                self.states[ref] = states[ref]
            else:
                self.states.pop(ref, None)
        for ref, n in counts.items():
            inst = self.instances.get(ref)
            if inst is not None:
                self.instances[ref] = replace(inst, snapshot_count=n)
        if notify:
            self.rows_changed(name, set(running) | set(counts))

    async def sample_visible(self, visible: Iterable[InstanceRef]) -> None:
        by_remote: dict[str, list[InstanceRef]] = {}
        for ref in visible:
            if ref in self.instances:
                by_remote.setdefault(ref.remote, []).append(ref)
        # one notification (so one repaint) for all remotes
        await asyncio.gather(*(self.sample(n, refs, notify=False)
                               for n, refs in by_remote.items()))
        for name, refs in by_remote.items():
            self.rows_changed(name, set(refs))
