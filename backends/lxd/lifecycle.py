"""Connecting to an LXD/Incus remote, listing its instances, their usage figures, and the
lifecycle verbs (start, stop, restart, freeze, unfreeze, delete).

Listing uses ``recursion=1`` (cheap); usage figures come from ``/state`` per running
instance, afterwards (the lean keep-alive GET of :mod:`.fasthttp`); changes come from the
events websocket (:mod:`.events`). See ``docs/protocols.md``, section "LXD/Incus REST".
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

import pylxd
import requests
from pylxd import exceptions as pylxd_exc

from ..base import Backend
from ..errors import AuthError, Conflict, OperationFailed, StopTimedOut, Unreachable
from ..models import Instance, InstanceRef, InstanceState, InstanceStatus, ServerInfo
from . import convert
from .caps import cap_responses
from .fasthttp import HTTPStatusError
from .http_session import make_session
from .known import Known
from .ops import Ops
from .rest import Rest
from .tls import base_url, check_credentials

log = logging.getLogger(__name__)


class Lifecycle(Backend):
    """The core verbs of :class:`~backends.lxd.backend.LXDBackend`."""

    rest: Rest
    ops: Ops
    known: Known

    # Connection ------------------------------------------------------------------------

    async def connect(self) -> ServerInfo:
        rest = self.rest
        remote = self.remote
        check_credentials(remote)
        if remote.is_unix and not os.path.exists(remote.socket_path):
            raise Unreachable(f"No {rest.product} socket at {remote.socket_path}.")
        url = base_url(remote)
        t = self.timeout

        def _connect() -> tuple[pylxd.Client, requests.Session, dict[str, Any]]:
            session = cap_responses(make_session(remote))  # reads certificates: here
            try:
                return _client(session)
            except BaseException:
                session.close()
                raise

        def _client(session: requests.Session
                    ) -> tuple[pylxd.Client, requests.Session, dict[str, Any]]:
            endpoint = remote.socket_path if remote.is_unix else url
            project = remote.project if remote.project != "default" else None
            try:
                # pylxd's constructor does the GET /1.0 (one round trip).
                client = pylxd.Client(
                    endpoint=endpoint,
                    cert=(remote.client_cert, remote.client_key)
                    if remote.client_cert else None,
                    session=session,
                    timeout=(t, max(t, 30)),
                    project=project,
                )
            except pylxd_exc.ClientConnectionFailed as e:
                # pylxd wraps the requests error in a string: map the original instead.
                cause = e.__context__ or e.__cause__
                if isinstance(cause, requests.exceptions.RequestException):
                    raise rest.map_error(cause) from e
                raise
            meta = client.host_info
            convert.check_trusted(meta, remote)
            return client, session, meta

        client, session, meta = await rest.call(_connect)
        rest.attach(client, session)
        self.known.info = convert.server_info(meta)
        return self.known.info

    async def close(self) -> None:
        self.rest.close()

    # Listing ---------------------------------------------------------------------------

    async def list_instances(self) -> list[Instance]:
        rest = self.rest
        client = rest.client

        def _list() -> list[dict[str, Any]]:
            return client.api.instances.get(params={"recursion": 1}).json()["metadata"]

        items = await rest.call(_list)
        instances = []
        for d in items if isinstance(items, list) else ():
            try:
                instances.append(convert.to_instance(d, self.remote.name))
            except Exception as e:  # one bad entry hides nothing else
                log.warning("%s: skipped a malformed instance entry (%s: %s): %.200r",
                            self.remote.name, type(e).__name__, e, d)
        self.known.names = {i.name for i in instances}
        for inst in instances:
            self.known.saw_status(inst.ref, inst.status)
        return instances

    async def get_instance(self, ref: InstanceRef) -> Instance:
        inst = convert.to_instance(await self.rest.instance(ref.name), self.remote.name)
        self.known.saw_status(inst.ref, inst.status)
        return inst

    async def get_states(self, refs: list[InstanceRef]) -> dict[InstanceRef, InstanceState]:
        rest = self.rest
        fast = rest.fast

        def _one(ref: InstanceRef) -> tuple[InstanceRef, dict[str, Any] | None]:
            try:
                return ref, fast.get_json(f"instances/{ref.name}/state")
            except HTTPStatusError as e:
                if e.status in (404, 400):  # gone, or not running any more
                    return ref, None
                raise OperationFailed(str(e)) from e

        results = await asyncio.gather(
            *(rest.call(_one, ref) for ref in refs), return_exceptions=True
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
                self.known.previous.pop(ref, None)
                continue
            state = convert.to_state(data, sampled_at=now, previous=self.known.previous.get(ref))
            self.known.previous[ref] = state
            out[ref] = state
        return out

    # Lifecycle -------------------------------------------------------------------------

    async def _state(self, ref: InstanceRef, action: str, *, timeout: int = 30,
                     force: bool = False) -> None:
        rest = self.rest
        client = rest.client
        body: dict[str, Any] = {"action": action, "timeout": timeout, "force": force}
        wait = timeout + 30

        def _do() -> None:
            r = client.api.instances[ref.name].state.put(json=body)
            self.ops.wait(r, wait)

        await rest.call(_do, timeout=wait + self.timeout * 2)

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
        rest = self.rest
        current = await self.get_instance(ref)
        if current.status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN):
            if not force:
                raise Conflict(f"{ref} is running. Stop it first, or delete it with force.")
            await self._state(ref, "stop", force=True)
        client = rest.client

        def _do() -> None:
            self.ops.wait(client.api.instances[ref.name].delete(), 120)

        await rest.call(_do, timeout=150)
        self.known.forget(ref)
