"""Reads of a remote's instances after it changed: whole listings (coalesced), one
instance at a time (a changed instance, read again while it keeps changing), snapshot
counts."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from backends.errors import BackendError, NotFound
from backends.models import Capability, InstanceRef, InstanceStatus

from .sampling import Sampler
from .state import InventoryState, Spawn

FETCH_RETRIES = 3
"""Reads of a changed instance tried again (1, 2, 3 s later) after the daemon failed one."""


class Fetches:
    """Listings and reads scheduled by events and actions, written into ``state``; a read
    instance that runs is sampled at once (``sampler``)."""

    def __init__(self, state: InventoryState, sampler: Sampler, spawn: Spawn) -> None:
        self.state = state
        self.sampler = sampler
        self.spawn = spawn
        self._fetching: set[InstanceRef] = set()
        self._refetch: set[InstanceRef] = set()
        self._refresh_pending: set[str] = set()

    async def refresh(self, name: str) -> None:
        """Full listing of one remote (after (re)connecting, and on request). Raises
        BackendError when the listing failed (the previous rows stay)."""
        backend = self.state.backends.get(name)
        if backend is None:
            return
        self.state.apply_listing(name, await backend.list_instances())

    def refresh_soon(self, name: str) -> None:
        """List a remote again shortly (bursts of requests are coalesced into one)."""
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

        self.spawn(later())

    def fetch_soon(self, ref: InstanceRef) -> None:
        """Read one instance again shortly (it changed; a read under way reads again)."""
        if ref in self._fetching:
            self._refetch.add(ref)
            return
        self._fetching.add(ref)
        self.spawn(self._fetch(ref))

    def dropped(self, ref: InstanceRef) -> None:
        """``ref`` was deleted: a read of it under way must not bring it back."""
        if ref in self._fetching:
            self._refetch.add(ref)

    def count_snapshots_soon(self, ref: InstanceRef) -> None:
        """Count ``ref``'s snapshots again (one was taken or deleted)."""
        self.spawn(self._snapshot_count(ref))

    async def _fetch(self, ref: InstanceRef) -> None:
        st = self.state
        failures = 0
        try:
            while True:
                self._refetch.discard(ref)
                backend = st.backends.get(ref.remote)
                if backend is None:
                    return
                try:
                    inst = await backend.get_instance(ref)
                except NotFound:
                    st.drop(ref)
                    st.rows_changed(ref.remote, {ref})
                    return
                except BackendError:
                    # e.g. a cluster member busy with a move, or a slow answer: the row
                    # would keep what it showed before the change; read again a little later
                    failures += 1
                    if failures > FETCH_RETRIES:
                        return
                    await asyncio.sleep(failures)
                    continue
                inst = st.store(inst)
                st.rows_changed(ref.remote, {ref})
                if ref not in self._refetch:
                    break
            if inst.status is InstanceStatus.RUNNING:
                await self.sampler.sample(ref.remote, [ref])
        finally:
            self._fetching.discard(ref)

    async def _snapshot_count(self, ref: InstanceRef) -> None:
        backend = self.state.backends.get(ref.remote)
        if backend is None or Capability.SNAPSHOTS not in backend.capabilities:
            return
        try:
            counts = await backend.snapshot_counts([ref])
        except BackendError:
            return
        inst = self.state.instances.get(ref)
        if inst is not None and ref in counts:
            self.state.instances[ref] = replace(inst, snapshot_count=counts[ref])
            self.state.rows_changed(ref.remote, {ref})
