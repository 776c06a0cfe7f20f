"""The members of every cluster remote, following the remotes' cluster events.

Plain asyncio (no Textual), a part of the :class:`~tui.services.inventory.Inventory`: when a
remote's backend reports a ``CLUSTER`` event (a member changed, or may have), the
remote's members are read again (bursts coalesced into one read; at a (re)connect the
inventory reads them beside the instances, so they come with the rows),
and the inventory is told, so the remotes pane and the instance rows follow. A member whose
state changed makes the remote's instances be listed again (those on an offline member are
then shown as unknown, with the reason).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace

from backends.errors import BackendError
from backends.members import ClusterMember, MemberStatus
from backends.models import BackendEvent, Capability, EventKind, InstanceStatus

from .state import InventoryState, Spawn

COALESCE = 0.1
"""Seconds to wait after a cluster event for the ones that follow it."""
CONFIRM_AFTER = 3.0
"""Seconds after a member changed state before its members are read once more."""
RETRIES = 15
"""Reads of the members tried (a second apart) before waiting for the next event."""
STALE_READS = 10
"""Reads (``CONFIRM_AFTER`` apart) while instances on an online member still read unknown:
a member back online is answered for by the cluster only after its next heartbeat, so a
listing made when corral first sees it again may still say its instances are unknown."""


class ClusterMembers:
    """``members[remote]``: the last reading of each cluster remote's members, read with
    the backends of ``state``; ``relist(remote)`` lists a remote's instances again soon (their
    states follow their members')."""

    def __init__(self, state: InventoryState, *, relist: Callable[[str], None],
                 spawn: Spawn) -> None:
        self.state = state
        self.relist = relist
        self.spawn = spawn
        self.members: dict[str, list[ClusterMember]] = {}
        self.clusters: set[str] = set()
        """Remotes seen to be clusters (kept while one reconnects)."""
        self.status_changed_at: dict[tuple[str, str], float] = {}
        """``(remote, member)`` -> ``time.monotonic()`` its status last changed on screen."""
        self._scheduled: set[str] = set()
        self._again: set[str] = set()
        self._stale_reads: dict[str, int] = {}

    def seed(self, remote: str, members) -> None:
        """``remote``'s members as its first listing read them (before its backend is
        connected; the backend's reading replaces them)."""
        if remote not in self.members:
            self.members[remote] = list(members)
            self.clusters.add(remote)

    def of(self, remote: str) -> list[ClusterMember]:
        """The members, each with the number of instances the inventory has on it now
        (kept current by the instance events; the backend's count is of its last read)."""
        members = self.members.get(remote, [])
        if not members or not self.state.statuses[remote].listed:
            return members
        counts: dict[str, int] = {}
        for inst in self.state.instances_of(remote):
            counts[inst.location] = counts.get(inst.location, 0) + 1
        return [m if m.instances == counts.get(m.name, 0)
                else replace(m, instances=counts.get(m.name, 0)) for m in members]

    def member(self, remote: str, name: str) -> ClusterMember | None:
        return next((m for m in self.of(remote) if m.name == name), None)

    def is_cluster(self, remote: str) -> bool:
        return remote in self.clusters

    def saw(self, remote: str, event: BackendEvent) -> None:
        """An event of ``remote``'s stream (the inventory passes cluster and connection
        events on)."""
        if event.kind is EventKind.CLUSTER:  # (at a connect the inventory reads them)
            self.refresh_soon(remote)

    def read_now(self, remote: str) -> None:
        """Read ``remote``'s members at once, beside what the caller does next (its
        listing): the members and the Location column come with the rows."""
        self.spawn(self.refresh(remote))

    def refresh_soon(self, remote: str) -> None:
        if remote in self._scheduled:
            self._again.add(remote)
            return
        self._scheduled.add(remote)
        self.spawn(self._refresh_later(remote))

    async def _refresh_later(self, remote: str) -> None:
        try:
            while True:
                self._again.discard(remote)
                await asyncio.sleep(COALESCE)
                await self.refresh(remote)
                if remote not in self._again:
                    return
        finally:
            self._scheduled.discard(remote)

    async def refresh(self, remote: str) -> None:
        """Read ``remote``'s members now (nothing for a remote that is not a cluster)."""
        st = self.state
        backend = st.backends.get(remote)
        if backend is None or Capability.CLUSTER not in backend.capabilities:
            return
        for attempt in range(RETRIES):
            try:
                members = await backend.list_members()
                break
            except BackendError:
                # a cluster electing a new leader answers nothing for a few seconds
                if attempt == RETRIES - 1 or st.backends.get(remote) is not backend:
                    return  # the next event or reconnect reads them again
                await asyncio.sleep(1.0)
        before = {m.name: m.status for m in self.members.get(remote, [])}
        self.members[remote] = members
        self.clusters.add(remote)
        now = time.monotonic()
        changed = False
        for m in members:
            if before.get(m.name) is not m.status:
                self.status_changed_at[(remote, m.name)] = now
                changed = changed or m.name in before
        if changed:
            self._stale_reads[remote] = 0
            self.relist(remote)  # instances on an offline member: unknown, or back
            self._confirm_later(remote)
        elif self._stale(remote, members) and self._stale_reads.get(remote, 0) < STALE_READS:
            self._stale_reads[remote] = self._stale_reads.get(remote, 0) + 1
            self.relist(remote)  # the cluster may know them again by now
            self._confirm_later(remote)
        st.rows_changed(remote, set())

    def _stale(self, remote: str, members: list[ClusterMember]) -> bool:
        """Whether an instance on a member now online still reads unknown."""
        online = {m.name for m in members if m.status is MemberStatus.ONLINE}
        return any(i.status is InstanceStatus.UNKNOWN and i.location in online
                   for i in self.state.instances_of(remote))

    def _confirm_later(self, remote: str) -> None:
        """Read once more a little later after a change: what corral saw first (an
        address that refuses) is then confirmed, or corrected, by the cluster itself."""
        async def later() -> None:
            await asyncio.sleep(CONFIRM_AFTER)
            self.refresh_soon(remote)

        self.spawn(later())
