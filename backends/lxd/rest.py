"""The plumbing every concern of the LXD/Incus backend shares: one :class:`Rest` per remote
holds the pylxd client and its requests session, the remote's own thread pool, error
mapping, waiting for and following operations, ETag-safe instance updates, websockets, and
what the concerns remember between calls (names, run states, pending limits, server facts).

Notes that shape this module (``docs/protocols.md``, sections "pylxd pitfalls", "LXD/Incus
REST" and "TLS and pinning"):

* pylxd is synchronous and its ``Client()`` already does a GET, so every call, construction
  included, runs in this remote's own small thread pool. A hung remote then blocks only
  its own threads, never the event loop or another remote.
* The requests session is built with ``trust_env = False`` (:mod:`.tls`); otherwise
  ``REQUESTS_CA_BUNDLE`` replaces the pinned certificate.
"""

from __future__ import annotations

import asyncio
import functools
import os
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar
from urllib.parse import urlencode

import pylxd
import requests
from pylxd import exceptions as pylxd_exc
from websockets.asyncio.client import connect as ws_connect
from websockets.asyncio.client import unix_connect as ws_unix_connect

from ..errors import (
    AuthError,
    BackendError,
    Conflict,
    InvalidInput,
    NotFound,
    NotResponding,
    OperationFailed,
    Unreachable,
)
from ..models import InstanceRef, InstanceState, InstanceStatus, Remote, ServerInfo
from . import convert
from .fasthttp import FastGet
from .tls import check_credentials, ssl_context

T = TypeVar("T")

DONE = ("Success", "Failure", "Cancelled")
"""Statuses of an operation that has ended."""

_PUT_FIELDS = ("architecture", "config", "devices", "ephemeral", "profiles", "stateful",
               "description")


class Rest:
    """One LXD/Incus remote's connection and the state its concerns share."""

    def __init__(self, remote: Remote, timeout: float, product: str) -> None:
        self.remote = remote
        self.timeout = timeout
        self.product = product
        """``LXD`` or ``Incus``, for messages."""
        self.pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix=f"lxd-{remote.name}")
        self.fast = FastGet(remote, timeout)
        self.info: ServerInfo | None = None
        self._client: pylxd.Client | None = None
        self._session: requests.Session | None = None
        # What the concerns remember between calls ----------------------------------------
        self.names: set[str] = set()
        """Instance names of the last listing (for ``check_name``)."""
        self.status: dict[InstanceRef, InstanceStatus] = {}
        self.previous: dict[InstanceRef, InstanceState] = {}
        """The last usage sample of each running instance (CPU % needs two)."""
        self.pending: dict[InstanceRef, dict[str, tuple[str, str]]] = {}
        """Limits changed on a running instance that apply at its next start:
        ``{ref: {key: (value in effect, saved value)}}``."""
        self.config_live: dict[str, bool] | None | bool = False
        """``liveupdate`` per instance key from /1.0/metadata/configuration; None when the
        server has no such endpoint; False until asked."""
        self.pool_drivers: dict[str, str] = {}
        self.host_unsupported: dict[str, str] = {}
        """Limits this host refused for every instance (key -> the daemon's words)."""
        self.ready = asyncio.Event()
        """Set once ``connect`` has finished (the events stream subscribes accordingly)."""
        self.cluster_hook: Callable[[dict[str, Any]], Any] | None = None
        """Set on a cluster remote: turns event frames about members into events, and
        makes the events stream end when it drops (to reconnect through another member)."""

    # Connection ------------------------------------------------------------------------

    @property
    def where(self) -> str:
        r = self.remote
        return r.socket_path if r.is_unix else r.address

    @property
    def client(self) -> pylxd.Client:
        if self._client is None:
            raise Unreachable(f"'{self.remote.name}' is not connected.")
        return self._client

    def attach(self, client: pylxd.Client, session: requests.Session) -> None:
        """Use ``client`` (and its ``session``) from now on."""
        self._client, self._session = client, session

    def close(self) -> None:
        """Release the session, the pool and the fast GET connection. Safe twice."""
        session, self._session, self._client = self._session, None, None
        if session is not None:
            session.close()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.fast.close()

    @property
    def extensions(self) -> frozenset[str]:
        return self.info.api_extensions if self.info else frozenset()

    def ref_of(self, name: str) -> InstanceRef:
        return InstanceRef(self.remote.name, name, self.remote.project)

    # Errors and calls --------------------------------------------------------------------

    def map_error(self, e: BaseException) -> BackendError:
        """Turn a requests/pylxd/OS error into words a user understands."""
        name = self.remote.name
        if isinstance(e, BackendError):
            return e
        if isinstance(e, (requests.exceptions.Timeout, asyncio.TimeoutError, TimeoutError)):
            return NotResponding(f"'{name}' ({self.where}) is not responding.")
        if isinstance(e, requests.exceptions.SSLError):
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
        if isinstance(e, requests.exceptions.ConnectionError):
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

    async def instance(self, name: str) -> dict[str, Any]:
        """``GET /1.0/instances/<name>``: the instance's JSON."""
        client = self.client
        return await self.call(lambda: client.api.instances[name].get().json()["metadata"])

    # Operations --------------------------------------------------------------------------

    def wait(self, response: requests.Response, timeout: float) -> dict[str, Any]:
        """(In a pool thread) wait for the async operation a 202 response started; raise on
        failure."""
        body = response.json()
        if body.get("type") != "async":
            return body.get("metadata") or {}
        op_id = convert.url_name(str(body.get("operation", "")))
        r = self.client.api.operations[op_id].wait.get(
            params={"timeout": int(timeout)}, timeout=timeout + self.timeout
        )
        meta = r.json()["metadata"]
        if meta.get("status") != "Success":
            raise OperationFailed(
                meta.get("err") or f"{meta.get('description', 'operation')}: {meta.get('status')}"
            )
        return meta

    def wait_quietly(self, op_id: str, timeout: float) -> None:
        """(In a pool thread) wait for an operation to end, whatever its outcome."""
        try:
            self.client.api.operations[op_id].wait.get(params={"timeout": int(timeout)},
                                                       timeout=timeout + self.timeout)
        except pylxd_exc.LXDAPIException:
            pass

    async def follow(self, op_id: str, report: Callable[[str], None], *,
                     timeout: float) -> dict[str, Any]:
        """Poll an operation with short waits (the event loop stays free), passing its
        progress on; returns its final metadata."""
        client = self.client
        deadline = time.monotonic() + timeout
        last = ""

        def _poll() -> dict[str, Any]:
            node = client.api.operations[op_id]
            try:
                return node.wait.get(params={"timeout": 1}, timeout=1 + self.timeout)\
                    .json()["metadata"]
            except pylxd_exc.LXDAPIException:
                # Incus answers a wait that timed out with an error ("context deadline
                # exceeded"), and a wait on a failed operation with its error: read it
                return node.get().json()["metadata"]

        while True:
            meta = await self.call(_poll)
            text = convert.progress_text(meta.get("metadata"))
            if text and text != last:
                last = text
                report(text)
            if meta.get("status") in DONE:
                return meta
            if time.monotonic() > deadline:
                raise OperationFailed(f"{meta.get('description') or 'The operation'} did not "
                                      f"finish within {int(timeout)} s.")

    async def update_instance(self, ref: InstanceRef,
                              change: Callable[[dict[str, Any]], Any]) -> Any:
        """Read the instance with its ETag, let ``change`` edit the writable fields (it may
        read ``expanded_*`` too, and may raise to abort), then PUT them back with
        ``If-Match``. When someone else changed the instance in between (412), read again
        and re-apply, so neither edit is lost. Returns what ``change`` returned."""
        client = self.client

        def _do() -> Any:
            for attempt in range(5):
                r = client.api.instances[ref.name].get()
                etag = r.headers.get("ETag", "")
                data = r.json()["metadata"]
                data["config"] = dict(data.get("config") or {})
                data["devices"] = {k: dict(v) for k, v in (data.get("devices") or {}).items()}
                result = change(data)
                body = {k: data[k] for k in _PUT_FIELDS if k in data}
                headers = {"If-Match": etag} if etag else {}
                try:
                    response = client.api.instances[ref.name].put(json=body, headers=headers)
                except pylxd_exc.LXDAPIException as e:
                    if getattr(e.response, "status_code", 0) == 412 and attempt < 4:
                        continue
                    raise
                self.wait(response, 120)
                return result
            raise Conflict(f"{ref} kept changing while it was being updated; try again.")

        return await self.call(_do, timeout=150)

    # Websockets --------------------------------------------------------------------------

    def websocket(self, path: str, *, ping_interval: float | None = None,
                  logger: Any = None) -> Any:
        """Connect a websocket to ``path`` on this remote (unix socket or pinned TLS);
        ``logger`` replaces websockets' own (one that never logs frames, for secrets)."""
        common: dict[str, Any] = {
            "open_timeout": self.timeout,
            "max_size": 2**24,
            "ping_interval": ping_interval,
            "ping_timeout": max(3.0, self.timeout),
            "close_timeout": min(5.0, self.timeout),  # a hung daemon never closes back
        }
        if logger is not None:
            common["logger"] = logger
        if self.remote.is_unix:
            return ws_unix_connect(self.remote.socket_path, uri=f"ws://lxd{path}", **common)
        check_credentials(self.remote)
        host = self.remote.address.split("://", 1)[1].rstrip("/")
        return ws_connect(f"wss://{host}{path}", ssl=ssl_context(self.remote), proxy=None,
                          **common)

    def operation_socket(self, op_id: str, secret: str, *,
                         logger: Any = None) -> Callable[[], Any]:
        """A function that opens the websocket ``secret`` of operation ``op_id``."""
        params = {"secret": secret}
        if self.remote.project != "default":
            params["project"] = self.remote.project
        path = f"/1.0/operations/{op_id}/websocket?" + urlencode(params)

        async def open_ws() -> Any:
            return await self.websocket(path, logger=logger)

        return open_ws

    async def websocket_operation(self, ref: InstanceRef, endpoint: str,
                                  body: dict[str, Any]) -> tuple[str, dict[str, str]]:
        """POST a console/exec request; return the operation id and its fds secrets."""
        client = self.client

        def _do() -> tuple[str, dict[str, str]]:
            data = getattr(client.api.instances[ref.name], endpoint).post(json=body).json()
            fds = ((data.get("metadata") or {}).get("metadata") or {}).get("fds") or {}
            if "0" not in fds or "control" not in fds:
                raise OperationFailed(f"'{self.remote.name}' gave no console websockets.")
            return convert.operation_id(data), fds

        return await self.call(_do)

    # Names and run states ----------------------------------------------------------------

    def saw_status(self, ref: InstanceRef, status: InstanceStatus) -> None:
        """Track run states: a start seen between two reads ends pending limits."""
        before = self.status.get(ref)
        self.status[ref] = status
        if status is InstanceStatus.RUNNING and before is not None \
                and before is not InstanceStatus.RUNNING and before is not InstanceStatus.FROZEN:
            self.pending.pop(ref, None)

    def forget(self, ref: InstanceRef) -> None:
        """``ref`` is gone (deleted or renamed): drop what is remembered of it."""
        for table in (self.previous, self.pending, self.status):
            table.pop(ref, None)
        self.names.discard(ref.name)

    async def names_now(self) -> set[str]:
        """The instance names on the server now (and remembered for ``check_name``)."""
        client = self.client
        urls = await self.call(lambda: client.api.instances.get().json()["metadata"] or [])
        self.names = {convert.url_name(u) for u in urls}
        return set(self.names)

    async def check_free(self, name: str) -> None:
        """Raise unless ``name`` is a valid instance name that is not taken."""
        problem = convert.name_problem(name)
        if problem:
            raise InvalidInput(f"Instance name '{name}': {problem}")
        if name in await self.names_now():
            raise Conflict(f"'{name}' is already taken on '{self.remote.name}'.")

    # Undoing a creation (create, import, clone, copy) ------------------------------------

    async def remove_if_made(self, name: str) -> None:
        """Delete instance ``name`` if it exists (a failed or abandoned creation)."""
        client = self.client

        def _do() -> None:
            try:
                data = client.api.instances[name].get().json()["metadata"]
            except pylxd_exc.NotFound:
                return
            if convert.status_of(data.get("status")) in (InstanceStatus.RUNNING,
                                                         InstanceStatus.FROZEN):
                r = client.api.instances[name].state.put(
                    json={"action": "stop", "force": True, "timeout": 30})
                try:
                    self.wait(r, 60)
                except OperationFailed:
                    pass
            try:
                self.wait(client.api.instances[name].delete(), 120)
            except pylxd_exc.NotFound:
                return

        await self.call(_do, timeout=200)
        self.names.discard(name)

    async def follow_creation(
            self, name: str, op_id: str, report: Callable[[str], None], *, failed: str,
            undo_on: tuple[type[BaseException], ...] = (asyncio.CancelledError, BackendError),
    ) -> dict[str, Any]:
        """Follow operation ``op_id``, which makes instance ``name``, to its end. When it
        fails, what it made is removed and OperationFailed says ``failed: <why>``; when
        following it ends in ``undo_on``, the operation is cancelled or outwaited first."""
        try:
            meta = await self.follow(op_id, report, timeout=3600)
        except undo_on:
            await asyncio.shield(self.undo_create(name, _done(op_id)))
            raise
        if meta.get("status") != "Success":
            await self.remove_if_made(name)
            raise OperationFailed(f"{failed}: {meta.get('err') or meta.get('status')}.")
        return meta

    async def undo_create(self, name: str, post: asyncio.Future,
                          later: list[asyncio.Future] = ()) -> None:  # type: ignore[assignment]
        """After a cancelled creation: cancel or outwait the operation (and a start still
        in flight), delete what exists."""
        try:
            op_id = await asyncio.wait_for(post, self.timeout * 2)
        except Exception:  # the POST failed: nothing was made
            return
        for fut in later:
            try:
                await asyncio.wait_for(fut, 90)
            except Exception:  # whatever it did, the instance goes
                pass
        client = self.client

        def _cancel() -> None:
            node = client.api.operations[op_id]
            try:
                meta = node.get().json()["metadata"]
            except pylxd_exc.NotFound:
                return  # finished and forgotten
            if meta.get("status") in DONE:
                return
            if meta.get("may_cancel"):
                try:
                    node.delete()
                except pylxd_exc.LXDAPIException:
                    pass  # finished meanwhile
            # LXD's "Creating instance" cannot be cancelled: wait for it to end
            for _ in range(120):
                try:
                    meta = node.wait.get(params={"timeout": 1},
                                         timeout=1 + self.timeout).json()["metadata"]
                except pylxd_exc.NotFound:
                    return
                except pylxd_exc.LXDAPIException as e:
                    if "deadline" not in str(e):
                        return
                    continue
                if meta.get("status") in DONE:
                    return

        try:
            await self.call(_cancel, timeout=200)
        finally:
            await self.remove_if_made(name)


def _done(value: str) -> asyncio.Future:
    """A future that has ``value`` already (an operation id for :meth:`Rest.undo_create`)."""
    fut: asyncio.Future = asyncio.get_running_loop().create_future()
    fut.set_result(value)
    return fut
