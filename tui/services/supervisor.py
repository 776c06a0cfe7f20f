"""The supervisor of each remote: connect its backend (after its first listing, if it has
one), list, follow its event stream, and reconnect with back-off when it fails or when the
user asks (``R``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from backends import get_backend, loaded, preload
from backends.base import Backend
from backends.errors import AuthError, BackendError, NotResponding, Unreachable
from backends.models import BackendEvent, Capability, ConnectionState, EventKind, Remote
from backends.retry import Backoff

from .events import Events
from .fetching import Fetches
from .listings import FirstListings
from .members import ClusterMembers
from .state import InventoryState

BackendFactory = Callable[[Remote, float], Backend]


def backend_factory(options: Callable[[str], Mapping[str, Any]] | None = None
                    ) -> BackendFactory:
    """The one way the UI makes a remote's backend: ``options(kind)`` gives the settings a
    backend of that kind is made with (``Config.backend_options``; none: the defaults)."""
    def make(remote: Remote, timeout: float) -> Backend:
        return get_backend(remote, timeout=timeout,
                           **(options(remote.kind) if options is not None else {}))

    return make


default_factory = backend_factory()
"""A backend with its kind's default settings (an inventory made without a configuration)."""


class Supervisor:
    """Runs every remote's connection: its backend (made by ``factory``) goes into
    ``state.backends`` while connected; the first listing comes from ``listings``, later
    ones from ``fetches``, a cluster's members are read by ``members`` and each event is
    applied by ``events``."""

    def __init__(self, state: InventoryState, *, listings: FirstListings, fetches: Fetches,
                 members: ClusterMembers, events: Events, factory: BackendFactory,
                 timeout: float, reconnect_cap: float) -> None:
        self.state = state
        self.listings = listings
        self.fetches = fetches
        self.members = members
        self.events = events
        self.factory = factory
        self.timeout = timeout
        self.reconnect_cap = reconnect_cap
        self._wakeups: dict[str, asyncio.Event] = {}
        self._preloads: dict[str, asyncio.Future[None]] = {}

    def retry(self, name: str) -> None:
        """Reconnect a remote now (the user asked): ends its wait or connection at once."""
        self._wakeups.setdefault(name, asyncio.Event()).set()

    async def _sleep_or_wake(self, name: str, delay: float | None) -> bool:
        """Wait ``delay`` seconds (forever: ``None``) or until :meth:`retry`; True if woken."""
        event = self._wakeups.setdefault(name, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), delay)
        except asyncio.TimeoutError:
            return False
        event.clear()
        return True

    async def run(self, name: str) -> None:
        """Connect, list and follow one remote forever; reconnect with backoff."""
        st = self.state
        backoff = Backoff(cap=self.reconnect_cap)
        while True:
            remote = st.remotes[name]  # read again: the project shown may change
            if remote.problem:
                st.set_connection(name, ConnectionState.ERROR, remote.problem)
                await self._sleep_or_wake(name, None)
                continue
            st.set_connection(name, ConnectionState.CONNECTING, "")
            if await self.listings.wait_and_take(name):  # started before the UI, if it was
                await self.listings.after_first_frame()
            await self._preload(remote.kind)
            backend = self.factory(remote, self.timeout)
            # The event stream opens while the REST connection is made (one round trip
            # saved); its events wait in a queue until the first listing is in.
            events: asyncio.Queue[BackendEvent | None] = asyncio.Queue()
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
                    st.set_connection(name, ConnectionState.UNTRUSTED, e.message)
                    await self._sleep_or_wake(name, None)  # waits for the user to retry
                    continue
                state = (ConnectionState.NOT_RESPONDING if isinstance(e, NotResponding)
                         else ConnectionState.DISCONNECTED)
                st.set_connection(name, state, e.message)
            else:
                backoff.reset()
                st.statuses[name].server = info
                st.backends[name] = backend
                try:
                    if await self._follow(name, events if pump is not None else None):
                        continue  # the user asked to reconnect: at once
                finally:
                    if pump is not None:
                        pump.cancel()
                    st.backends.pop(name, None)
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
        st = self.state
        wake = self._wakeups.setdefault(name, asyncio.Event())
        if events is None:
            # Backends without an event stream: a full refresh now, then on request.
            st.set_connection(name, ConnectionState.CONNECTED)
            if not await self._list_until_done(name):
                return False
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
                st.set_connection(name, ConnectionState.DISCONNECTED, "event stream ended")
                return False
            if event.kind is EventKind.CONNECTION:
                st.statuses[name].operations.clear()
                if event.action == "connected":
                    # (Re)connected: list everything before applying the events that
                    # follow, so no stale listing overwrites a newer fetch.
                    st.set_connection(name, ConnectionState.CONNECTED)
                    self.members.read_now(name)  # a cluster's members with its rows
                    if not await self._list_until_done(name):
                        return False
                    continue
            self.events.apply(name, event)

    async def _list_until_done(self, name: str) -> bool:
        """The listing after a (re)connect, retried with backoff while it fails; False
        when the daemon went away meanwhile (the remote is then offline, and reconnects
        from the start: its event stream is gone too)."""
        backoff = Backoff(cap=self.reconnect_cap)
        while True:
            try:
                await self.fetches.refresh(name)
                self.state.set_connection(name, ConnectionState.CONNECTED)
                return True
            except Unreachable as e:
                if not isinstance(e, NotResponding):
                    self.state.set_connection(name, ConnectionState.DISCONNECTED, e.message)
                    return False
                self.state.set_connection(name, ConnectionState.NOT_RESPONDING,
                                          f"listing failed: {e.message} (retrying)")
                await asyncio.sleep(backoff.next())
            except BackendError as e:
                self.state.set_connection(name, ConnectionState.ERROR,
                                          f"listing failed: {e.message} (retrying)")
                await asyncio.sleep(backoff.next())
