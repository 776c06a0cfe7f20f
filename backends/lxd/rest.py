"""The transport of an LXD/Incus remote: one :class:`Rest` per remote holds the fast GET
connections, the pylxd client and its requests session, the remote's own thread pool, the
time-outs, and the mapping of transport and API errors to words. Beside it, each with its
own state: :mod:`.ops`
(waiting for, following and cancelling operations; undoing a creation), :mod:`.sockets`
(websockets) and :mod:`.known` (what the concerns remember between calls).

Notes that shape this module (``docs/protocols.md``, sections "pylxd pitfalls", "LXD/Incus
REST" and "TLS and pinning"):

* pylxd is synchronous and its ``Client()`` already does a GET, so every call, construction
  included, runs in this remote's own small thread pool. A hung remote then blocks only
  its own threads, never the event loop or another remote.
* Importing pylxd (and requests under it) costs more than a daemon needs to answer a
  listing: connecting, listing, one instance, the views' lists and events use the fast GET
  path (:meth:`Rest.get`) and websockets; the client is built in the background a moment
  after connecting, or as soon as a verb needs it (:meth:`Rest.build_client`), the verb
  waiting for it off the loop (:meth:`Rest.client_built`). pylxd's and requests'
  exceptions are named through :mod:`.lazy`.
* The requests session is built with ``trust_env = False`` (:mod:`.tls`); otherwise
  ``REQUESTS_CA_BUNDLE`` replaces the pinned certificate.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import http.client
import os
import ssl
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, TypeVar, cast

from ..errors import (
    AuthError,
    BackendError,
    Conflict,
    NotFound,
    NotResponding,
    OperationFailed,
    Unreachable,
)
from .. import threads
from ..models import Remote
from .fasthttp import FastGet, HTTPStatusError, api_path
from .lazy import pylxd_exc, requests_exc

if TYPE_CHECKING:
    import pylxd
    import requests

T = TypeVar("T")

BUILD_AFTER = 1.5
"""Seconds after connecting when the pylxd client is built if no verb asked for it before."""


class Rest:
    """One LXD/Incus remote's HTTP transport: the pylxd client on a pinned session, calls
    in the remote's own thread pool with a time-out, errors in words."""

    def __init__(self, remote: Remote, timeout: float, product: str) -> None:
        self.remote = remote
        self.timeout = timeout
        self.product = product
        """``LXD`` or ``Incus``, for messages."""
        self.pool = threads.Pool(max_workers=4, thread_name_prefix=f"lxd-{remote.name}")
        self.fast = FastGet(remote, timeout, read_timeout=timeout * 2)
        self._client: pylxd.Client | None = None
        self._session: requests.Session | None = None
        self._build: Callable[[], tuple[pylxd.Client, requests.Session]] | None = None
        self._building: concurrent.futures.Future[None] | None = None
        self._build_lock = threading.Lock()

    # Connection ------------------------------------------------------------------------

    @property
    def where(self) -> str:
        r = self.remote
        return r.socket_path if r.is_unix else r.address

    @property
    def client(self) -> pylxd.Client:
        """The pylxd client; while it is still being built (just after connecting), a
        stand-in that waits for it when first used. A verb has waited for it already
        (:meth:`client_built`), so the stand-in never waits on the loop."""
        client = self._client
        if client is not None:
            return client
        self.ensure_connected()
        return cast("pylxd.Client", _PendingClient(self))

    @property
    def client_started(self) -> bool:
        """The pylxd client is built or being built (see :meth:`build_client`)."""
        return self._client is not None or self._building is not None

    def ensure_connected(self) -> None:
        """Raises Unreachable unless the backend connected (and was not closed since)."""
        if self._client is None and self._build is None:
            raise self._not_connected()

    def _not_connected(self) -> Unreachable:
        return Unreachable(f"'{self.remote.name}' is not connected.")

    def build_client(self, build: Callable[[], tuple[pylxd.Client, requests.Session]],
                     after: float | None = None) -> None:
        """Build the pylxd client (and its session) with ``build`` in a thread of its own,
        ``after`` seconds from now or when a verb first needs it, whichever comes first:
        connecting, listing, the views' lists and events need neither pylxd nor requests,
        and importing them costs more than a listing (at start, beside everything else).
        Verbs wait for it (:meth:`client_built`)."""
        self._build = build
        threads.timer(BUILD_AFTER if after is None else after, self._building_now,
                      name=f"lxd-{self.remote.name}-build")

    def _start_build(self) -> concurrent.futures.Future[None]:
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._building = future
        build = self._build

        def run() -> None:
            try:
                assert build is not None
                client, session = build()
            except BaseException as e:
                future.set_exception(e)
                return
            if self._building is not future:  # closed (or rebuilt) meanwhile
                session.close()
                future.set_exception(self._not_connected())
                return
            self._client, self._session = client, session
            future.set_result(None)

        threads.run(run, name=f"lxd-{self.remote.name}-client")
        return future

    def _building_now(self) -> concurrent.futures.Future[None] | None:
        """The client's build, started again if the last one failed (the daemon was away
        for a moment, say); None once it is built or when not connected."""
        with self._build_lock:  # (the timer's thread and the loop may both start it)
            if self._client is not None or self._build is None:
                return None
            building = self._building
            if building is None or (building.done() and building.exception() is not None):
                building = self._start_build()
            return building

    def wait_client(self) -> pylxd.Client:
        """The pylxd client, waiting for its build (blocking: for pool threads)."""
        building = self._building_now()
        if building is not None:
            try:
                building.result(timeout=self.timeout * 2)
            except concurrent.futures.TimeoutError as e:
                raise NotResponding(f"'{self.remote.name}' ({self.where}) is not "
                                    f"responding.") from e
            except Exception as e:
                raise self.map_error(e) from e
        client = self._client
        if client is None:
            raise self._not_connected()
        return client

    def close(self) -> None:
        """Release the session, the pool and the fast GET connection. Safe twice."""
        session, self._session, self._client = self._session, None, None
        self._build = self._building = None
        if session is not None:
            session.close()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.fast.close()

    # Errors and calls --------------------------------------------------------------------

    def map_error(self, e: BaseException) -> BackendError:
        """Turn a requests/pylxd/OS error into words a user understands."""
        name = self.remote.name
        if isinstance(e, BackendError):
            return e
        if isinstance(e, HTTPStatusError):  # the fast GET path's answers
            if e.status == 404:
                return NotFound(str(e))
            if e.status == 409:
                return Conflict(str(e))
            if e.status == 403:
                return AuthError(f"'{name}' refused the request: {e} (is this client trusted?)")
            return OperationFailed(str(e))
        if isinstance(e, (requests_exc.Timeout, asyncio.TimeoutError, TimeoutError)):
            return NotResponding(f"'{name}' ({self.where}) is not responding.")
        if isinstance(e, requests_exc.SSLError):
            text = str(e)
            if "Fingerprints did not match" in text or "certificate verify failed" in text \
                    or "not the pinned one" in text:  # tls.PinnedContext's own words
                pinned = self.remote.server_cert or "the system CA store"
                return AuthError(
                    f"The server certificate of '{name}' ({self.where}) does not match the "
                    f"pinned certificate in {pinned}. Nothing was sent to it. If the server "
                    f"was reinstalled, remove and re-add the remote with the CLI."
                )
            return AuthError(f"TLS with '{name}' ({self.where}) failed: {text}")
        if isinstance(e, requests_exc.ConnectionError):
            text = str(e)
            if self.remote.is_unix and not os.path.exists(self.remote.socket_path):
                return Unreachable(f"No {self.product} socket at {self.remote.socket_path}.")
            if "refused" in text.lower():
                return Unreachable(
                    f"'{name}' ({self.where}) refused the connection. Is the daemon running?"
                )
            if "Permission denied" in text:
                group = "incus-admin" if self.product.lower() == "incus" else "lxd"
                return Unreachable(
                    f"No permission to use {self.where}: add yourself to the group "
                    f"'{group}' (sudo usermod -aG {group} $USER, then log in again), "
                    f"or run corral as root."
                )
            return Unreachable(f"Cannot reach '{name}' ({self.where}).")
        if isinstance(e, pylxd_exc.NotFound):
            return NotFound(str(e))
        if isinstance(e, pylxd_exc.Conflict):
            return Conflict(str(e))
        if isinstance(e, pylxd_exc.LXDAPIException):
            status = getattr(e.response, "status_code", 0)
            if status == 403:
                return AuthError(f"'{name}' refused the request: {e} (is this client trusted?)")
            return OperationFailed(str(e))
        if isinstance(e, pylxd_exc.ClientConnectionFailed):
            return Unreachable(f"Cannot connect to '{name}': {e}")
        if isinstance(e, ssl.SSLCertVerificationError):
            return AuthError(
                f"The server certificate of '{name}' ({self.where}) does not match the "
                f"pinned certificate in {self.remote.server_cert or 'the system CA store'}."
            )
        if isinstance(e, OSError):
            return Unreachable(f"Cannot reach '{name}' ({self.where}): {e.strerror or e}")
        if isinstance(e, http.client.HTTPException):  # the connection broke mid-answer
            return Unreachable(f"The connection to '{name}' ({self.where}) broke off "
                               f"({type(e).__name__}).")
        return OperationFailed(f"{type(e).__name__}: {e}")

    async def call(self, fn: Callable[..., T], *args: Any, timeout: float | None = None,
                   **kwargs: Any) -> T:
        """Run a blocking call in this remote's pool; map its errors."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self.pool, functools.partial(fn, *args, **kwargs))
        try:
            result = await asyncio.wait_for(future, timeout or self.timeout * 2)
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                # Python 3.11's wait_for drops a cancellation that races with the result
                # (gh-86296): honour it, so a cancelled caller never carries on.
                raise asyncio.CancelledError
            return result
        except BackendError:
            raise
        except Exception as e:  # mapped at the edge on purpose
            raise self.map_error(e) from e

    async def client_built(self) -> None:
        """Start the client's build if it is not, and wait for it without blocking the
        loop; a failure is raised, in words, where the verb first uses the client. Every
        verb that needs pylxd waits here first
        (:func:`backends.lxd.backend.hold_until_client`); in a pool thread, the client
        stands in for itself until built (:class:`_PendingClient`)."""
        building = self._building_now()
        if building is not None and not building.done():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(building)),
                                       self.timeout * 2)

    async def stream(self, fn: Callable[[threading.Event], Any]) -> Any:
        """Run a long blocking transfer in the pool (no time-out; cancelling the coroutine
        sets the event the transfer checks between chunks, and waits for it to stop)."""
        loop = asyncio.get_running_loop()
        stop = threading.Event()
        future = loop.run_in_executor(self.pool, fn, stop)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            stop.set()
            try:
                await asyncio.wait_for(asyncio.shield(future), 30)
            except BaseException:  # cancelled on purpose
                pass
            raise
        except BackendError:
            raise
        except Exception as e:
            raise self.map_error(e) from e

    @staticmethod
    def reporter(progress: Callable[[str], None] | None,
                 every: float = 0.2) -> Callable[[str, bool], None]:
        """A thread-safe, throttled progress function for pool threads."""
        loop = asyncio.get_running_loop()
        last = [0.0]

        def report(text: str, force: bool = False) -> None:
            if progress is None:
                return
            now = time.monotonic()
            if force or now - last[0] >= every:
                last[0] = now
                loop.call_soon_threadsafe(progress, text)

        return report

    def in_project(self, **params: str) -> dict[str, str]:
        """``params`` as a query in the remote's project (for :meth:`FastGet.get_json`,
        whose ``query`` replaces the project)."""
        if self.remote.project != "default":
            params["project"] = self.remote.project
        return params

    async def get(self, *parts: str, **params: str) -> Any:
        """``GET /1.0/<part>/<part>…`` in the remote's project, on the fast GET path (no
        pylxd): the ``metadata`` of the answer, errors in words (404: NotFound, 409:
        Conflict). A part is a name as given (:func:`~.fasthttp.api_path`)."""
        return await self.call(lambda: self.fast.get_json(api_path(*parts),
                                                          self.in_project(**params)))

    async def get_changed(self, known: bytes | None, *parts: str,
                          **params: str) -> tuple[bytes, Any]:
        """:meth:`get`, with the digest of the answer; its ``metadata`` is
        :data:`~.fasthttp.UNCHANGED` when that digest is ``known`` (nothing parsed)."""
        return await self.call(lambda: self.fast.get_changed(
            api_path(*parts), self.in_project(**params), known))

    async def instance(self, name: str) -> dict[str, Any]:
        """``GET /1.0/instances/<name>``: the instance's JSON (the fast GET path)."""
        data = await self.get("instances", name)
        if not isinstance(data, dict):
            raise OperationFailed(f"'{self.remote.name}' answered with no instance.")
        return data


class _PendingClient:
    """Stands for the pylxd client while it is built: any attribute waits for it."""

    def __init__(self, rest: Rest) -> None:
        self._rest = rest

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rest.wait_client(), name)
