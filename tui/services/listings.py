"""The first listing of each remote in a run, made before its backend existed
(:mod:`.startup`), coming into the inventory: taken before the first frame when it is in
by then, else awaited by the remote's supervisor before it connects the backend."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from concurrent.futures import Future

from backends.models import FirstListing

from .members import ClusterMembers
from .state import InventoryState

log = logging.getLogger(__name__)

FIRST_WAIT = 1.0
"""Seconds a remote's supervisor waits for a first listing not in yet before connecting its
backend anyway (a remote that hangs would otherwise take two time-outs to be reported)."""


class FirstListings:
    """The first listing of each remote that has one (``first``: remote name -> the listing
    under way or done), shown in ``state``; a cluster's members, read with it, go to
    ``members``."""

    def __init__(self, state: InventoryState, members: ClusterMembers,
                 first: Mapping[str, Future[FirstListing | None]] | None) -> None:
        self.state = state
        self.members = members
        self._first: dict[str, Future[FirstListing | None]] = dict(first or {})
        self.first_frame: asyncio.Event | None = None
        """Set by the UI once its first frame is painted (see :meth:`after_first_frame`)."""
        self.keys_handled: asyncio.Event | None = None
        """Set by the UI once it has handled the keys typed before it was ready."""

    def _take(self, name: str, listing: FirstListing | None) -> None:
        # For the remote as it is now: the user may have changed its project meanwhile.
        st = self.state
        if listing is not None and listing.remote == st.remotes.get(name) \
                and not st.statuses[name].listed:
            st.statuses[name].server = listing.info
            if listing.members:  # a cluster: its members come with its rows
                self.members.seed(name, listing.members)
            st.apply_listing(name, listing.instances)

    @property
    def pending(self) -> bool:
        """Some first listing was started and is not shown (nor dropped) yet."""
        return bool(self._first)

    def take_arrived(self) -> None:
        """Show the first listings that are in already (the rest arrive as
        :meth:`wait_and_take` is awaited by each remote's supervisor)."""
        for name, future in list(self._first.items()):
            if future.done():
                del self._first[name]
                if future.exception() is None:
                    self._take(name, future.result())

    async def wait_and_take(self, name: str) -> bool:
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
        return self.state.statuses[name].listed

    def _late(self, name: str, done: asyncio.Future[FirstListing | None]) -> None:
        if not done.cancelled() and done.exception() is None and name in self.state.statuses:
            self._take(name, done.result())

    async def after_first_frame(self) -> None:
        """Until the UI's first frame is out (``first_frame``, when the UI set one; at
        most two seconds), then until it has handled the keys typed before it was ready
        (``keys_handled``; at most one second): a listed remote's backend (imports, TLS
        handshakes, a QEMU subprocess) would only delay the frame that shows its rows, and
        the filter or the view the user typed while corral started."""
        for event, limit in ((self.first_frame, 2.0), (self.keys_handled, 1.0)):
            if event is not None:
                try:
                    await asyncio.wait_for(event.wait(), limit)
                except TimeoutError:
                    pass
