"""Whole listings of a remote coming into the inventory: the first one of a run, made
before the backend existed (:mod:`.startup`), and every later one."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING

from backends.models import FirstListing, Instance, InstanceRef, Remote

from .status import RemoteStatus

if TYPE_CHECKING:
    from .members import ClusterMembers

log = logging.getLogger(__name__)

FIRST_WAIT = 1.0
"""Seconds a remote's supervisor waits for a first listing not in yet before connecting its
backend anyway (a remote that hangs would otherwise take two time-outs to be reported)."""


class Listings:
    """For :class:`~.inventory.Inventory` (which holds the state these write)."""

    remotes: dict[str, Remote]
    statuses: dict[str, RemoteStatus]
    instances: dict[InstanceRef, Instance]
    members: ClusterMembers
    rows_changed: Callable[..., None]
    _drop: Callable[[InstanceRef], None]
    _store: Callable[[Instance], Instance]

    def _init_listings(self, first: Mapping[str, Future[FirstListing | None]] | None) -> None:
        self._first: dict[str, Future[FirstListing | None]] = dict(first or {})
        self.first_frame: asyncio.Event | None = None
        """Set by the UI once its first frame is painted (see :meth:`after_first_frame`)."""

    def _apply_listing(self, name: str, listed: Iterable[Instance]) -> None:
        """Every instance of remote ``name`` is now ``listed``: rows not in it go."""
        fresh = {i.ref: i for i in listed}
        for ref in [r for r in self.instances if r.remote == name and r not in fresh]:
            self._drop(ref)
        for inst in fresh.values():
            self._store(inst)
        self.statuses[name].listed = True
        self.rows_changed(name, None)

    def _take(self, name: str, listing: FirstListing | None) -> None:
        # For the remote as it is now: the user may have changed its project meanwhile.
        if listing is not None and listing.remote == self.remotes.get(name) \
                and not self.statuses[name].listed:
            self.statuses[name].server = listing.info
            if listing.members:  # a cluster: its members come with its rows
                self.members.seed(name, listing.members)
            self._apply_listing(name, listing.instances)

    @property
    def first_listings_pending(self) -> bool:
        """Some first listing was started and is not shown (nor dropped) yet."""
        return bool(self._first)

    def take_first_listings(self) -> None:
        """Show the first listings that are in already (the rest arrive as
        :meth:`first_listing` is awaited by each remote's supervisor)."""
        for name, future in list(self._first.items()):
            if future.done():
                del self._first[name]
                if future.exception() is None:
                    self._take(name, future.result())

    async def first_listing(self, name: str) -> bool:
        """Wait for remote ``name``'s first listing, if one was started, and show it; True
        when its rows are listed now. A listing that failed changes nothing: the backend's
        connection lists (or says what is wrong) next; one not in after
        :data:`FIRST_WAIT` seconds is shown when it comes, unless the backend has listed
        by then."""
        future = self._first.pop(name, None)
        if future is not None:
            arriving = asyncio.wrap_future(future)
            try:
                listing = await asyncio.wait_for(asyncio.shield(arriving), FIRST_WAIT)
            except TimeoutError:
                # A slow remote: its backend connects meanwhile; the listing is shown if
                # it comes before the backend's own (a hung one: as long as it would).
                arriving.add_done_callback(lambda done: self._late(name, done))
            except Exception as e:  # reported by the backend's connection
                log.debug("%s: first listing not used (%s: %s)", name, type(e).__name__, e)
            else:
                self._take(name, listing)
        return self.statuses[name].listed

    def _late(self, name: str, done: asyncio.Future[FirstListing | None]) -> None:
        if not done.cancelled() and done.exception() is None and name in self.statuses:
            self._take(name, done.result())

    async def after_first_frame(self) -> None:
        """Until the UI's first frame is out (``first_frame``, when the UI set one; at
        most two seconds): a listed remote's backend (imports, TLS handshakes, a QEMU
        subprocess) would only delay the frame that shows its rows."""
        if self.first_frame is not None:
            try:
                await asyncio.wait_for(self.first_frame.wait(), 2)
            except TimeoutError:
                pass
