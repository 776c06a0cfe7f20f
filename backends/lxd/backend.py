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
from datetime import datetime, timezone
from typing import Any, AsyncIterator, Callable, TypeVar
from urllib.parse import quote, urlencode

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
    CreateOptions,
    CreateRequest,
    CreateSource,
    EventKind,
    Instance,
    InstanceRef,
    InstanceState,
    InstanceStatus,
    InstanceType,
    LimitField,
    Remote,
    ServerInfo,
    Snapshot,
)
from . import convert
from . import create as createmod
from . import limits as limitsmod
from .lifecycle import LifecycleMixin
from .fasthttp import FastGet, HTTPStatusError
from .tls import base_url, check_credentials, make_session, ssl_context

T = TypeVar("T")


class LXDBackend(LifecycleMixin, Backend):
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
            Capability.VGA,
            Capability.CREATE,
            Capability.RESOURCES,
        }
    )

    def instance_capabilities(self, instance: Instance) -> frozenset[Capability]:
        """A VM's screen (VGA) is offered so that ``v`` can explain that it is SPICE
        graphics (and hand it to remote-viewer where a display exists)."""
        caps = super().instance_capabilities(instance)
        if instance.type is not InstanceType.VM:
            caps -= {Capability.VGA}
        return caps

    def __init__(self, remote: Remote, *, timeout: float = 10.0) -> None:
        super().__init__(remote, timeout=timeout)
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix=f"lxd-{remote.name}")
        self._client: pylxd.Client | None = None
        self._session: requests.Session | None = None
        self.info: ServerInfo | None = None
        self._previous: dict[InstanceRef, InstanceState] = {}
        self._fast = FastGet(remote, timeout)
        self._names: set[str] = set()
        """Instance names of the last listing (for :meth:`check_name`)."""
        self._status: dict[InstanceRef, InstanceStatus] = {}
        self._pending: dict[InstanceRef, dict[str, tuple[str, str]]] = {}
        """Limits changed on a running instance that apply at its next start:
        ``{ref: {key: (value in effect, saved value)}}``."""
        self._config_live: dict[str, bool] | None | bool = False
        """``liveupdate`` per instance key from /1.0/metadata/configuration; None when the
        server has no such endpoint; False until asked."""
        self._pool_drivers: dict[str, str] = {}
        self._host_unsupported: dict[str, str] = {}
        """Limits this host refused for every instance (key -> the daemon's words)."""

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
            result = await asyncio.wait_for(future, timeout or self.timeout * 2)
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                # Python 3.11's wait_for drops a cancellation that races with the result
                # (gh-86296): honour it, so a cancelled caller never carries on.
                raise asyncio.CancelledError
            return result
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
        instances = [convert.to_instance(d, self.remote.name) for d in items]
        self._names = {i.name for i in instances}
        for inst in instances:
            self._saw_status(inst.ref, inst.status)
        return instances

    async def get_instance(self, ref: InstanceRef) -> Instance:
        client = self.client
        data = await self._call(lambda: client.api.instances[ref.name].get().json()["metadata"])
        inst = convert.to_instance(data, self.remote.name)
        self._saw_status(inst.ref, inst.status)
        return inst

    def _saw_status(self, ref: InstanceRef, status: InstanceStatus) -> None:
        """Track run states: a start seen between two reads ends pending limits."""
        before = self._status.get(ref)
        self._status[ref] = status
        if status is InstanceStatus.RUNNING and before is not None \
                and before is not InstanceStatus.RUNNING and before is not InstanceStatus.FROZEN:
            self._pending.pop(ref, None)

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

    def _websocket(self, path: str, *, ping_interval: float | None = None,
                   logger: Any = None) -> Any:
        """Connect a websocket to ``path`` on this remote (unix socket or pinned TLS);
        ``logger`` replaces websockets' own (one that never logs frames, for secrets)."""
        common: dict[str, Any] = {
            "open_timeout": self.timeout,
            "max_size": 2**24,
            "ping_interval": ping_interval,
            "ping_timeout": 20,
        }
        if logger is not None:
            common["logger"] = logger
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
                            if event.ref is not None and event.action in (
                                    "instance-started", "instance-restarted"):
                                self._pending.pop(event.ref, None)
                                self._status[event.ref] = InstanceStatus.RUNNING
                            yield event
                message = f"event stream of '{name}' closed"
            except (OSError, WebSocketException, InvalidHandshake, asyncio.TimeoutError,
                    TimeoutError, AuthError) as e:
                message = str(e) if isinstance(e, AuthError) else self._event_error(e)
            yield BackendEvent(EventKind.CONNECTION, name, action="disconnected", message=message)
            await asyncio.sleep(backoff.next())

    # Consoles --------------------------------------------------------------------------

    def _operation_socket(self, op_id: str, secret: str, *,
                          logger: Any = None) -> Callable[[], Any]:
        params = {"secret": secret}
        if self.remote.project != "default":
            params["project"] = self.remote.project
        path = f"/1.0/operations/{op_id}/websocket?" + urlencode(params)

        async def open_ws() -> Any:
            return await self._websocket(path, logger=logger)

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
        self._pending.pop(ref, None)
        self._status.pop(ref, None)
        self._names.discard(ref.name)

    # Snapshots -------------------------------------------------------------------------

    async def list_snapshots(self, ref: InstanceRef) -> list[Snapshot]:
        client = self.client
        items = await self._call(
            lambda: client.api.instances[ref.name].snapshots.get(
                params={"recursion": 1}).json()["metadata"] or []
        )
        return sorted((convert.to_snapshot(d, ref) for d in items),
                      key=lambda s: (s.created_at is None, s.created_at or 0, s.name))

    async def create_snapshot(self, ref: InstanceRef, name: str, *, stateful: bool = False,
                              expires_at: datetime | None = None) -> Snapshot:
        """Take a snapshot; ``expires_at`` (LXD ``expires_at``, extension
        ``snapshot_expiry_creation``) makes the daemon delete it at that time. A naive
        datetime is local time."""
        client = self.client
        body: dict[str, Any] = {"name": name, "stateful": stateful}
        if expires_at is not None:
            body["expires_at"] = _rfc3339(expires_at)

        def _do() -> None:
            r = client.api.instances[ref.name].snapshots.post(json=body)
            self._wait(r, 300)

        await self._call(_do, timeout=330)
        data = await self._call(
            lambda: client.api.instances[ref.name].snapshots[quote(name, safe="")]
            .get().json()["metadata"])
        return convert.to_snapshot(data, ref)

    async def rename_snapshot(self, snapshot: Snapshot, new_name: str) -> Snapshot:
        """``POST /1.0/instances/<n>/snapshots/<s> {"name": new}``."""
        client = self.client
        ref = snapshot.ref
        problem = _snapshot_name_problem(new_name)
        if problem:
            raise InvalidInput(problem)

        def _do() -> dict[str, Any]:
            node = client.api.instances[ref.name].snapshots
            self._wait(node[quote(snapshot.name, safe="")].post(json={"name": new_name}), 120)
            return node[new_name].get().json()["metadata"]

        return convert.to_snapshot(await self._call(_do, timeout=150), ref)

    async def snapshot_settings(self, ref: InstanceRef) -> dict[str, str]:
        """``snapshots.schedule``, ``snapshots.expiry``, ``snapshots.pattern`` as in effect
        (the expanded config: profiles included); empty when unset."""
        client = self.client
        data = await self._call(lambda: client.api.instances[ref.name].get().json()["metadata"])
        config = data.get("expanded_config") or data.get("config") or {}
        return {key: str(config.get(key) or "") for key in createmod.SNAPSHOT_KEYS}

    async def set_snapshot_settings(self, ref: InstanceRef, values: dict[str, str]) -> None:
        """Set any of the three keys on the instance ("" removes the instance's own value,
        so a profile's applies again). Everything is checked before anything is sent.

        Raises:
            InvalidInput: an unknown key or a malformed schedule/expiry/pattern.
        """
        checks = {"snapshots.schedule": createmod.check_schedule,
                  "snapshots.expiry": createmod.check_expiry,
                  "snapshots.pattern": createmod.check_pattern}
        clean: dict[str, str] = {}
        for key, value in values.items():
            if key not in checks:
                raise InvalidInput(f"Unknown snapshot setting '{key}' "
                                   f"(known: {', '.join(createmod.SNAPSHOT_KEYS)}).")
            clean[key] = checks[key](value or "")

        def change(data: dict[str, Any]) -> None:
            config = data["config"]
            for key, value in clean.items():
                if value:
                    config[key] = value
                else:
                    config.pop(key, None)

        await self._update_instance(ref, change)

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
            node = client.api.instances[ref.name].snapshots[quote(snapshot.name, safe="")]
            self._wait(node.delete(), 120)

        await self._call(_do, timeout=150)

    # Config updates (ETag-safe) ---------------------------------------------------------

    _PUT_FIELDS = ("architecture", "config", "devices", "ephemeral", "profiles", "stateful",
                   "description")

    async def _update_instance(self, ref: InstanceRef,
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
                body = {k: data[k] for k in self._PUT_FIELDS if k in data}
                headers = {"If-Match": etag} if etag else {}
                try:
                    response = client.api.instances[ref.name].put(json=body, headers=headers)
                except pylxd_exc.LXDAPIException as e:
                    if getattr(e.response, "status_code", 0) == 412 and attempt < 4:
                        continue
                    raise
                self._wait(response, 120)
                return result
            raise Conflict(f"{ref} kept changing while it was being updated; try again.")

        return await self._call(_do, timeout=150)

    # Creating ---------------------------------------------------------------------------

    async def create_sources(self) -> list[CreateSource]:
        """The remote's own images (one entry per image, its aliases as the label) and an
        empty VM (no disk content: network boot or an ISO attached later)."""
        client = self.client
        items = await self._call(
            lambda: client.api.images.get(params={"recursion": 1}).json()["metadata"] or [])
        sources: list[CreateSource] = []
        for img in items:
            fp = str(img.get("fingerprint") or "")
            aliases = [a.get("name") for a in img.get("aliases") or () if a.get("name")]
            props = img.get("properties") or {}
            description = str(props.get("description") or "")
            label = ", ".join(aliases) or description or fp[:12]
            size = img.get("size")
            detail = " · ".join(p for p in (
                description if description != label else "",
                str(img.get("architecture") or props.get("architecture") or ""),
                format_size_short(size) if isinstance(size, int) and size > 0 else "",
                fp[:12]) if p)
            itype = InstanceType.VM if img.get("type") == "virtual-machine" \
                else InstanceType.CONTAINER
            sources.append(CreateSource(kind="image", label=label, value=fp, type=itype,
                                        detail=detail))
        sources.sort(key=lambda s: (s.type is InstanceType.VM, s.label.lower()))
        sources.append(CreateSource(kind="empty-vm", label="Empty VM (network boot / ISO)",
                                    type=InstanceType.VM,
                                    detail="a virtual machine with an empty root disk"))
        return sources

    async def create_options(self) -> CreateOptions:
        client = self.client

        def _names(node: Any) -> list[str]:
            urls = node.get().json()["metadata"] or []
            return sorted(u.rstrip("/").split("/")[-1].split("?")[0] for u in urls)

        def _do() -> tuple[list[str], list[str], list[str], int]:
            profiles = _names(client.api.profiles)
            pools = _names(client.api.storage_pools)
            nets = client.api.networks.get(params={"recursion": 1}).json()["metadata"] or []
            networks = sorted(n["name"] for n in nets if n.get("managed")
                              and n.get("type") in ("bridge", "macvlan", "sriov", "ovn",
                                                    "physical"))
            cpus = 0
            try:
                res = client.api.resources.get().json()["metadata"] or {}
                cpus = int((res.get("cpu") or {}).get("total") or 0)
            except (pylxd_exc.LXDAPIException, ValueError, TypeError):
                pass  # restricted (or no resources API): unknown
            return profiles, pools, networks, cpus

        profiles, pools, networks, cpus = await self._call(_do)
        return CreateOptions(
            profiles=tuple(profiles),
            default_profiles=("default",) if "default" in profiles else (),
            storage_pools=tuple(pools),
            networks=tuple(networks),
            max_cpus=cpus,
            user_data=True,
            can_cancel=True,
            defaults={"cpus": "1", "memory": "512MiB", "disk": ""},
        )

    def check_name(self, name: str) -> str | None:
        """Why ``name`` cannot be used (LXD's rules, or taken in the last listing)."""
        problem = createmod.name_problem(name)
        if problem:
            return problem
        if name in self._names:
            return f"'{name}' is already taken on '{self.remote.name}'."
        return None

    async def _profiles_devices(self, profiles: tuple[str, ...]) -> dict[str, dict[str, Any]]:
        """The devices the chosen profiles give (later profiles override earlier)."""
        client = self.client
        names = profiles or ("default",)

        def _do() -> dict[str, dict[str, Any]]:
            devices: dict[str, dict[str, Any]] = {}
            for p in names:
                try:
                    data = client.api.profiles[p].get().json()["metadata"]
                except pylxd_exc.NotFound:
                    raise InvalidInput(f"There is no profile '{p}' on '{self.remote.name}'.")
                devices.update(data.get("devices") or {})
            return devices

        return await self._call(_do)

    async def create_instance(self, request: CreateRequest,
                              progress: Callable[[str], None] | None = None) -> Instance:
        """Create (and with ``request.start`` start) an instance.

        Cancelling the coroutine cancels the daemon's operation where it may be cancelled,
        waits for it otherwise, and deletes whatever was made before re-raising.

        Raises:
            InvalidInput: a bad name, user-data or value (nothing sent).
            Conflict: the name is taken.
            OperationFailed: the daemon refused or failed (nothing left behind); or the
                instance was created but did not start ("created, but could not start").
        """
        report = progress or (lambda text: None)
        name = request.name
        problem = createmod.name_problem(name)
        if problem:
            raise InvalidInput(f"Instance name '{name}': {problem}")
        if request.user_data:
            createmod.check_user_data(request.user_data)
        devices = await self._profiles_devices(tuple(request.profiles))
        root = next(((n, d) for n, d in sorted(devices.items())
                     if d.get("type") == "disk" and d.get("path") == "/"), None)
        nics = sorted(n for n, d in devices.items() if d.get("type") == "nic")
        body = createmod.create_body(request, root=root, nic_names=nics)
        client = self.client

        existing = await self._call(
            lambda: client.api.instances.get().json()["metadata"] or [])
        self._names = {u.rstrip("/").split("/")[-1].split("?")[0] for u in existing}
        if name in self._names:
            raise Conflict(f"'{name}' is already taken on '{self.remote.name}'.")

        what = "VM" if body["type"] == "virtual-machine" else "container"
        ref = InstanceRef(self.remote.name, name, self.remote.project)
        loop = asyncio.get_running_loop()
        report(f"creating {what} {name}")

        def _post() -> str:
            r = client.api.instances.post(json=body)
            data = r.json()
            meta = data.get("metadata") or {}
            return str(meta.get("id") or str(data.get("operation", "")).rstrip("/")
                       .split("/")[-1].split("?")[0])

        post = loop.run_in_executor(self._pool, _post)
        later: list[asyncio.Future] = []
        try:
            try:
                op_id = await asyncio.wait_for(asyncio.shield(post), self.timeout * 2)
            except asyncio.CancelledError:
                raise
            except BackendError:
                raise
            except Exception as e:  # noqa: BLE001
                err = self._map_error(e)
                if isinstance(err, Conflict):
                    raise err from e
                raise OperationFailed(f"Creating {what} '{name}' was refused: {err}") from e
            try:
                meta = await self._follow(op_id, report, timeout=1800)
            except BackendError:
                await self._undo_create(name, post, later)
                raise
            if meta.get("status") != "Success":
                error = meta.get("err") or meta.get("status") or "failed"
                await self._remove_if_made(name)
                raise OperationFailed(f"Creating {what} '{name}' failed: {error}")
            self._names.add(name)
            if request.start:
                report(f"starting {name}")

                def _start() -> None:
                    r = client.api.instances[name].state.put(
                        json={"action": "start", "timeout": 30, "force": False})
                    self._wait(r, 60)

                started = loop.run_in_executor(self._pool, _start)
                later.append(started)
                try:
                    try:
                        await asyncio.wait_for(asyncio.shield(started), 60 + self.timeout * 2)
                    except (BackendError, asyncio.CancelledError):
                        raise
                    except Exception as e:  # noqa: BLE001
                        raise self._map_error(e) from e
                except BackendError as e:
                    raise OperationFailed(
                        f"{what.capitalize()} '{name}' was created, but could not start: "
                        f"{e.message.rstrip('.')}. It is there, stopped.",
                        title="Created, not started") from e
            report("done")
            return await self.get_instance(ref)
        except asyncio.CancelledError:
            cleanup = asyncio.ensure_future(self._undo_create(name, post, later))
            try:
                await asyncio.shield(cleanup)
            except Exception:  # noqa: BLE001 - cancellation wins; cleanup logged nothing
                pass
            raise

    async def _follow(self, op_id: str, report: Callable[[str], None], *,
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
            meta = await self._call(_poll)
            text = createmod.progress_text(meta.get("metadata"))
            if text and text != last:
                last = text
                report(text)
            if meta.get("status") in ("Success", "Failure", "Cancelled"):
                return meta
            if time.monotonic() > deadline:
                raise OperationFailed(f"{meta.get('description') or 'The operation'} did not "
                                      f"finish within {int(timeout)} s.")

    async def _remove_if_made(self, name: str) -> None:
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
                    self._wait(r, 60)
                except OperationFailed:
                    pass
            try:
                self._wait(client.api.instances[name].delete(), 120)
            except pylxd_exc.NotFound:
                return

        await self._call(_do, timeout=200)
        self._names.discard(name)

    async def _undo_create(self, name: str, post: asyncio.Future,
                           later: list[asyncio.Future] = ()) -> None:  # type: ignore[assignment]
        """After a cancelled creation: cancel or outwait the operation (and a start still
        in flight), delete what exists."""
        try:
            op_id = await asyncio.wait_for(post, self.timeout * 2)
        except Exception:  # noqa: BLE001 - the POST failed: nothing was made
            return
        for fut in later:
            try:
                await asyncio.wait_for(fut, 90)
            except Exception:  # noqa: BLE001 - whatever it did, the instance goes
                pass
        client = self.client

        def _cancel() -> None:
            node = client.api.operations[op_id]
            try:
                meta = node.get().json()["metadata"]
            except pylxd_exc.NotFound:
                return  # finished and forgotten
            if meta.get("status") in ("Success", "Failure", "Cancelled"):
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
                if meta.get("status") in ("Success", "Failure", "Cancelled"):
                    return

        try:
            await self._call(_cancel, timeout=200)
        finally:
            await self._remove_if_made(name)

    # Limits -----------------------------------------------------------------------------

    async def _config_metadata(self) -> dict[str, bool] | None:
        """``liveupdate`` per instance key from ``GET /1.0/metadata/configuration`` (Incus;
        LXD 5.0.2 has no such endpoint: None, and the table in limits.py is used)."""
        if self._config_live is not False:
            return self._config_live  # type: ignore[return-value]
        if self.info is not None and "metadata_configuration" not in self.info.api_extensions:
            self._config_live = None
            return None
        client = self.client

        def _do() -> dict[str, bool] | None:
            try:
                meta = client.api.metadata.configuration.get().json()["metadata"]
            except (pylxd_exc.LXDAPIException, ValueError, KeyError):
                return None
            out: dict[str, bool] = {}
            sections = ((meta.get("configs") or {}).get("instance") or {})
            for section in sections.values():
                for entry in section.get("keys") or ():
                    for key, info in entry.items():
                        out[key] = str(info.get("liveupdate") or "").lower() == "yes"
            return out or None

        self._config_live = await self._call(_do)
        return self._config_live

    async def _pool_driver(self, pool: str) -> str:
        if pool not in self._pool_drivers:
            client = self.client
            try:
                data = await self._call(
                    lambda: client.api.storage_pools[pool].get().json()["metadata"])
                self._pool_drivers[pool] = str(data.get("driver") or "")
            except BackendError:
                return ""
        return self._pool_drivers[pool]

    async def _limit_context(self, ref: InstanceRef, data: dict[str, Any]) -> dict[str, Any]:
        """What deciding support needs: run state, type, metadata, root pool driver and
        whether the root disk reports usage (a dir pool with project quotas)."""
        status = convert.status_of(data.get("status"))
        self._saw_status(ref, status)
        vm = data.get("type") == "virtual-machine"
        live = await self._config_metadata()
        root = limitsmod.root_device(data)
        driver = await self._pool_driver(root[1].get("pool", "")) if root else ""
        quota = True
        if root and driver == "dir" and not vm:
            client = self.client
            try:
                state = await self._call(
                    lambda: client.api.instances[ref.name].state.get().json()["metadata"])
                quota = bool((state.get("disk") or {}).get(root[0]))
            except BackendError:
                quota = False
        return {"running": status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN),
                "vm": vm, "live": live, "root": root, "driver": driver, "quota": quota,
                "nic": limitsmod.nic_device(data)}

    def _unsupported(self, spec: limitsmod.Spec, ctx: dict[str, Any]) -> str:
        """Why this instance cannot have ``spec`` (empty: it can)."""
        if spec.containers_only and ctx["vm"]:
            return "containers only"
        if spec.key in self._host_unsupported:
            return self._host_unsupported[spec.key]
        if spec.where == "root" and ctx["root"] is None:
            return "no root disk device"
        if spec.where == "nic" and ctx["nic"] is None:
            return "no network interface"
        if spec.where == "nic" and ctx["nic"][1].get("nictype", "") in ("physical", "sriov",
                                                                      "ipvlan") \
                and not ctx["nic"][1].get("network"):
            return f"not for a {ctx['nic'][1]['nictype']} NIC"
        if spec.key == "disk" and ctx["driver"] == "dir" and not ctx["vm"] \
                and not ctx["quota"]:
            return ("the 'dir' storage pool here cannot limit a container's disk: its "
                    "filesystem has no project quotas, and LXD accepts a size but skips it "
                    "(its log: \"The backing filesystem doesn't support quotas, skipping set "
                    "quota\")")
        live = ctx["live"]
        if spec.where == "config" and live is not None and spec.name not in live:
            return f"{self.product} has no '{spec.name}' setting"
        return ""

    async def get_limits(self, ref: InstanceRef) -> list[LimitField]:
        client = self.client
        data = await self._call(lambda: client.api.instances[ref.name].get().json()["metadata"])
        ctx = await self._limit_context(ref, data)
        pending = self._pending.get(ref, {})
        exts = self.info.api_extensions if self.info else frozenset()
        fields = []
        for spec in limitsmod.SPECS:
            value = limitsmod.current_value(spec, data)
            why = self._unsupported(spec, ctx)
            if why:
                fields.append(LimitField(spec.key, spec.label, value, "unsupported", why))
                continue
            applies = limitsmod.applies(spec, vm=ctx["vm"], running=ctx["running"],
                                        value=value, extensions=exts, live_keys=ctx["live"])
            hint = spec.hint if ctx["running"] else f"{spec.hint}; applies at next start"
            waiting = ""
            if spec.key in pending:
                before, saved = pending[spec.key]
                if saved == value:
                    value, waiting = before, saved
            fields.append(LimitField(spec.key, spec.label, value, applies, hint, waiting))
        return fields

    async def set_limits(self, ref: InstanceRef, changes: dict[str, str]) -> dict[str, str]:
        """Check every change, then write them in one ETag-guarded PUT.

        Raises:
            InvalidInput: an unknown key or a malformed value (nothing changed).
            Unsupported: a key this instance cannot limit (nothing changed).
            OperationFailed: the daemon refused (it keeps the old values).
        """
        unknown = [k for k in changes if k not in limitsmod.BY_KEY]
        if unknown:
            raise InvalidInput(f"Unknown limit '{unknown[0]}' (known: "
                               f"{', '.join(limitsmod.BY_KEY)}).")
        clean = {k: limitsmod.normalise(limitsmod.BY_KEY[k], v) for k, v in changes.items()}
        exts = self.info.api_extensions if self.info else frozenset()
        outcome: dict[str, str] = {}
        effective: dict[str, str] = {}

        def change(data: dict[str, Any]) -> None:
            # runs in the pool thread with fresh data (again after a 412)
            outcome.clear()
            effective.clear()
            for key, value in clean.items():
                spec = limitsmod.BY_KEY[key]
                why = self._unsupported(spec, ctx)
                if why:
                    raise Unsupported(f"{spec.label} of {ref}: {why}.")
                old = limitsmod.current_value(spec, data)
                effective[key] = old
                if spec.key == "disk" and value and old:
                    before, after = limitsmod.size_bytes(old), limitsmod.size_bytes(value)
                    if before and after is not None and after < before:
                        raise InvalidInput(f"{spec.label}: it can only grow (now {old}).")
                if spec.where == "config":
                    if value:
                        data["config"][spec.name] = value
                    else:
                        data["config"].pop(spec.name, None)
                else:
                    found = ctx["root"] if spec.where == "root" else ctx["nic"]
                    dev_name = found[0]
                    # a device from a profile is copied into the instance (an override)
                    dev = data["devices"].get(dev_name) or dict(
                        (data.get("expanded_devices") or {}).get(dev_name) or found[1])
                    if value:
                        dev[spec.name] = value
                    else:
                        dev.pop(spec.name, None)
                    data["devices"][dev_name] = dev
                outcome[key] = limitsmod.applies(
                    spec, vm=ctx["vm"], running=ctx["running"], value=value or old,
                    extensions=exts, live_keys=ctx["live"])

        client = self.client
        data = await self._call(lambda: client.api.instances[ref.name].get().json()["metadata"])
        ctx = await self._limit_context(ref, data)
        try:
            await self._update_instance(ref, change)
        except OperationFailed as e:
            self._learn_unsupported(clean, e.message)
            raise OperationFailed(f"{self.product} refused the new limits of {ref}: "
                                  f"{e.message}") from e
        if ctx["running"]:
            waiting = self._pending.setdefault(ref, {})
            for key, applies in outcome.items():
                if applies != "restart":
                    continue
                before = waiting[key][0] if key in waiting else effective.get(key, "")
                if clean[key] == before:
                    waiting.pop(key, None)  # back to what is in effect
                else:
                    waiting[key] = (before, clean[key])
            if not waiting:
                self._pending.pop(ref, None)
        return outcome

    def _learn_unsupported(self, changes: dict[str, str], message: str) -> None:
        """Remember limits this host cannot apply at all (seen on the lab machines: no
        ``blkio.weight`` cgroup file, no ``act_police`` tc module)."""
        if "limits.disk.priority" in message and "cgroup controller is missing" in message:
            self._host_unsupported["disk_priority"] = (
                f"this host cannot: {message.split(': ', 1)[-1]}")
        if "ingress tc filter" in message and "net_egress" in changes:
            self._host_unsupported["net_egress"] = (
                "this host cannot police outgoing traffic (the kernel's tc police action "
                "is missing)")


def _rfc3339(when: datetime) -> str:
    if when.tzinfo is None:
        when = when.astimezone()  # naive: local time
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _snapshot_name_problem(name: str) -> str | None:
    if not name or not name.strip():
        return "A snapshot name is needed."
    if "/" in name or name != name.strip() or " " in name:
        return f"Snapshot name '{name}': no slashes or spaces."
    if len(name) > 255:
        return "Snapshot name: at most 255 characters."
    return None


def format_size_short(size: int) -> str:
    """Image sizes for the wizard: ``1.0 MiB``."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover

class IncusBackend(LXDBackend):
    """An Incus remote: the same API and the same code, named for what it is."""

    kind = "incus"
    product = "Incus"
