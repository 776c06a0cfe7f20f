"""The LXD/Incus backend: pylxd for REST (in a private thread pool), ``websockets`` for
``/1.0/events``.

Notes that shape this module (shared PROTOCOLS.md):

* pylxd is synchronous and its ``Client()`` already does a GET, so every call, construction
  included, runs in this backend's own small thread pool. A hung remote then blocks only
  its own threads, never the event loop or another remote.
* The requests session is built here with ``trust_env = False``; otherwise
  ``REQUESTS_CA_BUNDLE`` replaces the pinned certificate.
* Listing uses ``recursion=1`` (cheap); usage figures come from ``/state`` per running
  instance, afterwards; changes come from the events websocket.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import ssl
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, AsyncIterator, Callable, TypeVar
from urllib.parse import urlencode

import pylxd
import requests
from pylxd import exceptions as pylxd_exc
from websockets.asyncio.client import connect as ws_connect
from websockets.asyncio.client import unix_connect as ws_unix_connect
from websockets.exceptions import InvalidHandshake, InvalidStatus, WebSocketException

from ..base import Backend
from ..console import WebSocketSession
from ..retry import Backoff
from ..errors import (
    AuthError,
    BackendError,
    Conflict,
    InvalidInput,
    NotFound,
    NotResponding,
    OperationFailed,
    StopTimedOut,
    Unreachable,
    Unsupported,
)
from ..models import (
    BackendEvent,
    Capability,
    EventKind,
    Instance,
    InstanceRef,
    InstanceState,
    InstanceStatus,
    InstanceType,
    Remote,
    ServerInfo,
    Snapshot,
)
from . import convert
from .fasthttp import FastGet, HTTPStatusError
from .tls import base_url, check_credentials, make_session, ssl_context

T = TypeVar("T")


class LXDBackend(Backend):
    """An LXD remote (also used for Incus, which speaks the same API)."""

    kind = "lxd"
    product = "LXD"
    capabilities = frozenset(
        {
            Capability.START,
            Capability.STOP,
            Capability.FORCE_STOP,
            Capability.RESTART,
            Capability.FREEZE,
            Capability.UNFREEZE,
            Capability.DELETE,
            Capability.EVENTS,
            Capability.METRICS,
            Capability.SNAPSHOTS,
            Capability.CONSOLE,
            Capability.EXEC,
        }
    )

    def __init__(self, remote: Remote, *, timeout: float = 10.0) -> None:
        super().__init__(remote, timeout=timeout)
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix=f"lxd-{remote.name}")
        self._client: pylxd.Client | None = None
        self._session: requests.Session | None = None
        self.info: ServerInfo | None = None
        self._previous: dict[InstanceRef, InstanceState] = {}
        self._fast = FastGet(remote, timeout)

    # Plumbing ------------------------------------------------------------------------

    @property
    def _where(self) -> str:
        r = self.remote
        return r.socket_path if r.is_unix else r.address

    def _map_error(self, e: BaseException) -> BackendError:
        """Turn a requests/pylxd/OS error into words a user understands."""
        name = self.remote.name
        if isinstance(e, BackendError):
            return e
        if isinstance(e, (requests.exceptions.Timeout, asyncio.TimeoutError, TimeoutError)):
            return NotResponding(f"'{name}' ({self._where}) is not responding.")
        if isinstance(e, requests.exceptions.SSLError):
            text = str(e)
            if "Fingerprints did not match" in text or "certificate verify failed" in text:
                pinned = self.remote.server_cert or "the system CA store"
                return AuthError(
                    f"The server certificate of '{name}' ({self._where}) does not match the "
                    f"pinned certificate in {pinned}. Nothing was sent to it. If the server "
                    f"was reinstalled, remove and re-add the remote with the CLI."
                )
            return AuthError(f"TLS with '{name}' ({self._where}) failed: {text}")
        if isinstance(e, requests.exceptions.ConnectionError):
            text = str(e)
            if self.remote.is_unix and not os.path.exists(self.remote.socket_path):
                return Unreachable(f"No {self.product} socket at {self.remote.socket_path}.")
            if "refused" in text.lower():
                return Unreachable(
                    f"'{name}' ({self._where}) refused the connection. Is the daemon running?"
                )
            if "Permission denied" in text:
                return Unreachable(
                    f"No permission to use {self._where}. Add yourself to the daemon's group."
                )
            return Unreachable(f"Cannot reach '{name}' ({self._where}).")
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
                f"The server certificate of '{name}' ({self._where}) does not match the "
                f"pinned certificate in {self.remote.server_cert or 'the system CA store'}."
            )
        if isinstance(e, OSError):
            return Unreachable(f"Cannot reach '{name}' ({self._where}): {e.strerror or e}")
        return OperationFailed(f"{type(e).__name__}: {e}")

    async def _call(self, fn: Callable[..., T], *args: Any, timeout: float | None = None,
                    **kwargs: Any) -> T:
        """Run a blocking call in this remote's pool; map its errors."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))
        try:
            return await asyncio.wait_for(future, timeout or self.timeout * 2)
        except BackendError:
            raise
        except Exception as e:  # noqa: BLE001 - mapped at the edge on purpose
            raise self._map_error(e) from e

    @property
    def client(self) -> pylxd.Client:
        if self._client is None:
            raise Unreachable(f"'{self.remote.name}' is not connected.")
        return self._client

    # Connection ------------------------------------------------------------------------

    async def connect(self) -> ServerInfo:
        check_credentials(self.remote)
        if self.remote.is_unix and not os.path.exists(self.remote.socket_path):
            raise Unreachable(f"No {self.product} socket at {self.remote.socket_path}.")
        session = make_session(self.remote)
        url = base_url(self.remote)
        t = self.timeout

        def _connect() -> tuple[pylxd.Client, dict[str, Any]]:
            endpoint = self.remote.socket_path if self.remote.is_unix else url
            project = self.remote.project if self.remote.project != "default" else None
            try:
                # pylxd's constructor does the GET /1.0 (one round trip).
                client = pylxd.Client(
                    endpoint=endpoint,
                    cert=(self.remote.client_cert, self.remote.client_key)
                    if self.remote.client_cert else None,
                    session=session,
                    timeout=(t, max(t, 30)),
                    project=project,
                )
            except pylxd_exc.ClientConnectionFailed as e:
                # pylxd wraps the requests error in a string: map the original instead.
                cause = e.__context__ or e.__cause__
                if isinstance(cause, requests.exceptions.RequestException):
                    raise self._map_error(cause) from e
                raise
            meta = client.host_info
            if meta.get("auth") != "trusted":
                raise AuthError(
                    f"'{self.remote.name}' does not trust this client's certificate "
                    f"({self.remote.client_cert}). Add it with `lxc config trust add` or "
                    f"re-add the remote with a trust token."
                )
            return client, meta

        client, meta = await self._call(_connect)
        self._client = client
        self._session = session
        env = meta.get("environment") or {}
        self.info = ServerInfo(
            server=str(env.get("server") or "lxd"),
            version=str(env.get("server_version") or ""),
            api_extensions=frozenset(meta.get("api_extensions") or ()),
            auth=str(meta.get("auth") or ""),
            server_name=str(env.get("server_name") or ""),
        )
        return self.info

    async def close(self) -> None:
        session, self._session, self._client = self._session, None, None
        if session is not None:
            session.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._fast.close()

    # Listing ---------------------------------------------------------------------------

    async def list_instances(self) -> list[Instance]:
        client = self.client

        def _list() -> list[dict[str, Any]]:
            return client.api.instances.get(params={"recursion": 1}).json()["metadata"]

        items = await self._call(_list)
        return [convert.to_instance(d, self.remote.name) for d in items]

    async def get_instance(self, ref: InstanceRef) -> Instance:
        client = self.client
        data = await self._call(lambda: client.api.instances[ref.name].get().json()["metadata"])
        return convert.to_instance(data, self.remote.name)

    async def get_states(self, refs: list[InstanceRef]) -> dict[InstanceRef, InstanceState]:
        fast = self._fast

        def _one(ref: InstanceRef) -> tuple[InstanceRef, dict[str, Any] | None]:
            try:
                return ref, fast.get_json(f"instances/{ref.name}/state")
            except HTTPStatusError as e:
                if e.status in (404, 400):  # gone, or not running any more
                    return ref, None
                raise OperationFailed(str(e)) from e

        results = await asyncio.gather(
            *(self._call(_one, ref) for ref in refs), return_exceptions=True
        )
        out: dict[InstanceRef, InstanceState] = {}
        now = time.monotonic()
        for item in results:
            if isinstance(item, BaseException):
                if isinstance(item, (Unreachable, AuthError)):
                    raise item
                continue
            ref, data = item
            if not data or convert.status_of(data.get("status")) is not InstanceStatus.RUNNING:
                self._previous.pop(ref, None)
                continue
            state = convert.to_state(data, sampled_at=now, previous=self._previous.get(ref))
            self._previous[ref] = state
            out[ref] = state
        return out

    async def snapshot_counts(self, refs: list[InstanceRef]) -> dict[InstanceRef, int]:
        client = self.client

        def _one(ref: InstanceRef) -> int:
            return len(client.api.instances[ref.name].snapshots.get().json()["metadata"] or ())

        results = await asyncio.gather(*(self._call(_one, r) for r in refs),
                                       return_exceptions=True)
        return {r: n for r, n in zip(refs, results) if isinstance(n, int)}

    # Events ----------------------------------------------------------------------------

    def _events_path(self) -> str:
        params = {"type": "lifecycle,operation"}
        if self.remote.project != "default":
            params["project"] = self.remote.project
        return "/1.0/events?" + urlencode(params)

    def _open_events(self) -> Any:
        return self._websocket(self._events_path(), ping_interval=20)

    def _websocket(self, path: str, *, ping_interval: float | None = None) -> Any:
        """Connect a websocket to ``path`` on this remote (unix socket or pinned TLS)."""
        common: dict[str, Any] = {
            "open_timeout": self.timeout,
            "max_size": 2**24,
            "ping_interval": ping_interval,
            "ping_timeout": 20,
        }
        if self.remote.is_unix:
            return ws_unix_connect(self.remote.socket_path, uri=f"ws://lxd{path}", **common)
        check_credentials(self.remote)
        host = self.remote.address.split("://", 1)[1].rstrip("/")
        return ws_connect(f"wss://{host}{path}", ssl=ssl_context(self.remote), proxy=None,
                          **common)

    def _event_error(self, e: BaseException) -> str:
        if isinstance(e, InvalidStatus):
            return f"event stream refused by '{self.remote.name}' (HTTP {e.response.status_code})"
        if isinstance(e, (asyncio.TimeoutError, TimeoutError)):
            return f"'{self.remote.name}' is not responding"
        if isinstance(e, FileNotFoundError):
            return f"no {self.product} socket at {self.remote.socket_path}"
        if isinstance(e, ConnectionRefusedError):
            return f"'{self.remote.name}' refused the connection (daemon down?)"
        if isinstance(e, OSError) and "CERTIFICATE_VERIFY_FAILED" in str(e):
            return f"server certificate of '{self.remote.name}' does not match the pinned one"
        return f"lost connection to '{self.remote.name}'"

    async def watch(self) -> AsyncIterator[BackendEvent]:
        backoff = Backoff()
        name = self.remote.name
        while True:
            try:
                async with self._open_events() as ws:
                    backoff.reset()
                    yield BackendEvent(EventKind.CONNECTION, name, action="connected")
                    async for frame in ws:
                        try:
                            data = json.loads(frame)
                        except ValueError:
                            continue
                        event = convert.to_event(data, name)
                        if event is not None:
                            yield event
                message = f"event stream of '{name}' closed"
            except (OSError, WebSocketException, InvalidHandshake, asyncio.TimeoutError,
                    TimeoutError, AuthError) as e:
                message = str(e) if isinstance(e, AuthError) else self._event_error(e)
            yield BackendEvent(EventKind.CONNECTION, name, action="disconnected", message=message)
            await asyncio.sleep(backoff.next())

    # Consoles --------------------------------------------------------------------------

    def _operation_socket(self, op_id: str, secret: str) -> Callable[[], Any]:
        params = {"secret": secret}
        if self.remote.project != "default":
            params["project"] = self.remote.project
        path = f"/1.0/operations/{op_id}/websocket?" + urlencode(params)

        async def open_ws() -> Any:
            return await self._websocket(path)

        return open_ws

    async def _websocket_operation(self, ref: InstanceRef, endpoint: str,
                                   body: dict[str, Any]) -> tuple[str, dict[str, str]]:
        """POST a console/exec request; return the operation id and its fds secrets."""
        client = self.client

        def _do() -> tuple[str, dict[str, str]]:
            r = getattr(client.api.instances[ref.name], endpoint).post(json=body)
            data = r.json()
            meta = data.get("metadata") or {}
            op_id = meta.get("id") or str(data.get("operation", "")).rstrip("/").split("/")[-1]
            fds = (meta.get("metadata") or {}).get("fds") or {}
            if "0" not in fds or "control" not in fds:
                raise OperationFailed(f"'{self.remote.name}' gave no console websockets.")
            return op_id, fds

        return await self._call(_do)

    async def _require_running(self, ref: InstanceRef, what: str) -> Instance:
        inst = await self.get_instance(ref)
        if inst.status is InstanceStatus.FROZEN:
            raise Conflict(f"{ref} is frozen: resume it to use its {what}.")
        if inst.status is not InstanceStatus.RUNNING:
            raise Conflict(f"{ref} is {inst.status.value}: start it to use its {what}.")
        return inst

    async def open_console(self, ref: InstanceRef, *, width: int = 80, height: int = 24,
                           kind: str = "console") -> WebSocketSession:
        """The instance's console over LXD's console websockets: a container's
        /dev/console (its console log shown first), a VM's first serial port.

        ``kind="vga"`` is SPICE graphics on LXD/Incus VMs, which a terminal cannot draw:
        refused with that explanation (see :meth:`spice_viewer_command`).
        """
        inst = await self._require_running(ref, "console")
        if kind == "vga":
            if not inst.type is InstanceType.VM:
                raise Unsupported("Containers have no VGA screen; use the console.")
            raise Unsupported(
                f"The screen of {ref} is SPICE graphics, which a terminal cannot show. "
                f"Use its serial console here, or `{self.product} console {ref.name} "
                f"--type=vga` on a machine with a display.")
        if kind != "console":
            raise InvalidInput(f"Unknown console type '{kind}'.")
        op_id, fds = await self._websocket_operation(
            ref, "console", {"width": width, "height": height, "type": "console"})
        client = self.client

        async def prefill() -> bytes:
            if inst.type is InstanceType.VM and self.product != "incus":
                return b""  # LXD keeps a console log for containers only

            def _log() -> bytes:
                r = client.api.instances[ref.name].console.get()
                return r.content[-256 * 1024:]

            return await self._call(_log)

        return WebSocketSession(
            f"{ref} console", self._operation_socket(op_id, fds["0"]),
            open_control=self._operation_socket(op_id, fds["control"]), prefill=prefill,
            lost=f"the connection to '{self.remote.name}' was lost")

    async def open_shell(self, ref: InstanceRef, command: list[str] | None = None, *,
                         width: int = 80, height: int = 24) -> WebSocketSession:
        """An interactive command (default: bash if the image has it, else sh) on a pty in
        the instance, over LXD's exec websockets."""
        await self._require_running(ref, "shell")
        argv = command or ["/bin/sh", "-c",
                           "if command -v bash >/dev/null 2>&1; then exec bash -l; "
                           "else exec sh -l; fi"]
        body = {"command": argv, "wait-for-websocket": True, "interactive": True,
                "environment": {"TERM": "xterm-256color", "HOME": "/root",
                                "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
                                        "/sbin:/bin"},
                "width": width, "height": height}
        op_id, fds = await self._websocket_operation(ref, "exec", body)
        program = os.path.basename(argv[0]) if command else "the shell"
        client = self.client

        async def ended() -> str | None:
            # after the command's output ends (an empty text frame) and the client closed
            # its websockets, the operation completes with the exit code
            def _wait() -> str | None:
                r = client.api.operations[op_id].wait.get(params={"timeout": 5}, timeout=10)
                meta = r.json().get("metadata") or {}
                code = (meta.get("metadata") or {}).get("return")
                if code is None:
                    return meta.get("err") or None
                return f"{program} exited ({code})"

            return await self._call(_wait)

        return WebSocketSession(
            f"{ref} shell", self._operation_socket(op_id, fds["0"]),
            open_control=self._operation_socket(op_id, fds["control"]), ended=ended,
            lost=f"the connection to '{self.remote.name}' was lost")

    # Actions ---------------------------------------------------------------------------

    def _wait(self, response: requests.Response, timeout: float) -> dict[str, Any]:
        """Wait for the async operation a 202 response started; raise on failure."""
        body = response.json()
        if body.get("type") != "async":
            return body.get("metadata") or {}
        op_id = str(body.get("operation", "")).rstrip("/").split("/")[-1].split("?")[0]
        r = self.client.api.operations[op_id].wait.get(
            params={"timeout": int(timeout)}, timeout=timeout + self.timeout
        )
        meta = r.json()["metadata"]
        if meta.get("status") != "Success":
            raise OperationFailed(
                meta.get("err") or f"{meta.get('description', 'operation')}: {meta.get('status')}"
            )
        return meta

    async def _state(self, ref: InstanceRef, action: str, *, timeout: int = 30,
                     force: bool = False) -> None:
        client = self.client
        body: dict[str, Any] = {"action": action, "timeout": timeout, "force": force}
        wait = timeout + 30

        def _do() -> None:
            r = client.api.instances[ref.name].state.put(json=body)
            self._wait(r, wait)

        await self._call(_do, timeout=wait + self.timeout * 2)

    async def start(self, ref: InstanceRef) -> None:
        await self._state(ref, "start")

    async def _shut_down(self, ref: InstanceRef, action: str, *, force: bool,
                         timeout: int) -> None:
        """stop/restart: a graceful attempt that fails while the instance still runs is a
        timeout the UI can answer with force."""
        try:
            await self._state(ref, action, timeout=timeout, force=force)
        except OperationFailed as e:
            if force:
                raise
            current = await self.get_instance(ref)
            if current.status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN):
                verb = "force-stopped" if action == "stop" else "restarted by force"
                raise StopTimedOut(
                    f"{ref} did not shut down within {timeout} s ({e}). It can be {verb}."
                ) from e
            raise

    async def stop(self, ref: InstanceRef, *, force: bool = False, timeout: int = 30) -> None:
        await self._shut_down(ref, "stop", force=force, timeout=timeout)

    async def restart(self, ref: InstanceRef, *, force: bool = False, timeout: int = 30) -> None:
        await self._shut_down(ref, "restart", force=force, timeout=timeout)

    async def freeze(self, ref: InstanceRef) -> None:
        await self._state(ref, "freeze")

    async def unfreeze(self, ref: InstanceRef) -> None:
        await self._state(ref, "unfreeze")

    async def delete(self, ref: InstanceRef, *, force: bool = False) -> None:
        current = await self.get_instance(ref)
        if current.status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN):
            if not force:
                raise Conflict(f"{ref} is running. Stop it first, or delete it with force.")
            await self._state(ref, "stop", force=True)
        client = self.client

        def _do() -> None:
            self._wait(client.api.instances[ref.name].delete(), 120)

        await self._call(_do, timeout=150)
        self._previous.pop(ref, None)

    # Snapshots -------------------------------------------------------------------------

    async def list_snapshots(self, ref: InstanceRef) -> list[Snapshot]:
        client = self.client
        items = await self._call(
            lambda: client.api.instances[ref.name].snapshots.get(
                params={"recursion": 1}).json()["metadata"] or []
        )
        return sorted((convert.to_snapshot(d, ref) for d in items),
                      key=lambda s: (s.created_at is None, s.created_at or 0, s.name))

    async def create_snapshot(self, ref: InstanceRef, name: str, *,
                              stateful: bool = False) -> Snapshot:
        client = self.client

        def _do() -> None:
            r = client.api.instances[ref.name].snapshots.post(
                json={"name": name, "stateful": stateful})
            self._wait(r, 300)

        await self._call(_do, timeout=330)
        data = await self._call(
            lambda: client.api.instances[ref.name].snapshots[name].get().json()["metadata"])
        return convert.to_snapshot(data, ref)

    async def restore_snapshot(self, snapshot: Snapshot) -> None:
        client = self.client
        ref = snapshot.ref

        def _do() -> None:
            # what `lxc restore` sends: the other fields are ignored when restoring
            body = {"restore": snapshot.name, "stateful": snapshot.stateful}
            self._wait(client.api.instances[ref.name].put(json=body), 300)

        await self._call(_do, timeout=330)

    async def delete_snapshot(self, snapshot: Snapshot) -> None:
        client = self.client
        ref = snapshot.ref

        def _do() -> None:
            self._wait(client.api.instances[ref.name].snapshots[snapshot.name].delete(), 120)

        await self._call(_do, timeout=150)


class IncusBackend(LXDBackend):
    """An Incus remote: the same API and the same code, named for what it is."""

    kind = "incus"
    product = "Incus"
