"""Usage figures of the rows the user can see: the only periodic work of the inventory."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import replace

from backends.errors import BackendError
from backends.models import (
    Capability,
    ConnectionState,
    InstanceRef,
    InstanceState,
    InstanceStatus,
)

from .state import InventoryState


class Sampler:
    """CPU/memory/disk samples and snapshot counts, written into the inventory's
    :class:`~.state.InventoryState`."""

    def __init__(self, state: InventoryState) -> None:
        self.state = state

    async def sample(self, name: str, refs: list[InstanceRef], *, notify: bool = True) -> None:
        """Fetch usage figures of the running ones of these instances, and snapshot counts
        of those not counted yet (only rows the user can see are sampled)."""
        st = self.state
        backend = st.backends.get(name)
        if backend is None or not refs or \
                st.statuses[name].state is not ConnectionState.CONNECTED:
            return
        running = [r for r in refs if (i := st.instances.get(r)) is not None
                   and i.status is InstanceStatus.RUNNING]
        uncounted = [r for r in refs if (i := st.instances.get(r)) is not None
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
                st.states[ref] = states[ref]
            else:
                st.states.pop(ref, None)
        for ref, n in counts.items():
            inst = st.instances.get(ref)
            if inst is not None:
                st.instances[ref] = replace(inst, snapshot_count=n)
        if notify:
            st.rows_changed(name, set(running) | set(counts))

    async def sample_visible(self, visible: Iterable[InstanceRef]) -> None:
        by_remote: dict[str, list[InstanceRef]] = {}
        for ref in visible:
            if ref in self.state.instances:
                by_remote.setdefault(ref.remote, []).append(ref)
        # one notification (so one repaint) for all remotes
        await asyncio.gather(*(self.sample(n, refs, notify=False)
                               for n, refs in by_remote.items()))
        for name, refs in by_remote.items():
            self.state.rows_changed(name, set(refs))
