"""Connecting to an LXD/Incus remote, listing its instances, their usage figures, and the
lifecycle verbs (start, stop, restart, freeze, unfreeze, delete).

Connecting (``GET /1.0``) and listing (``recursion=1``: cheap) go through the lean
keep-alive GET of :mod:`.fasthttp`, as do the usage figures (``/state`` per running
instance, afterwards); changes come from the events websocket (:mod:`.events`). None of
them needs pylxd: its client, for the verbs, is built in the background once connected
(:meth:`.rest.Rest.build_client`). See ``docs/protocols.md``, section "LXD/Incus REST".
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import TYPE_CHECKING, Any

from ..base import Backend
from ..errors import AuthError, Conflict, OperationFailed, StopTimedOut, Unreachable
from ..models import Instance, InstanceRef, InstanceState, InstanceStatus, ServerInfo
from . import convert, quick
from .caps import cap_responses
from .fasthttp import UNCHANGED, HTTPStatusError
from .known import Known
from .ops import Ops
from .rest import Rest
from .tls import base_url, check_credentials

if TYPE_CHECKING:
    import pylxd
    import requests


def pylxd_client(rest: Rest, timeout: float) -> tuple[pylxd.Client, requests.Session]:
    """The pylxd client of ``rest``'s remote on a pinned, capped session (blocking: it
    imports pylxd and requests, and pylxd's constructor does a ``GET /1.0``)."""
    import pylxd
    import requests

    from .http_session import make_session

    remote = rest.remote
    session = cap_responses(make_session(remote))  # reads certificates: here
    try:
        try:
            client = pylxd.Client(
                endpoint=remote.socket_path if remote.is_unix else base_url(remote),
                cert=(remote.client_cert, remote.client_key) if remote.client_cert else None,
                session=session,
                timeout=(timeout, max(timeout, 30)),
                project=remote.project if remote.project != "default" else None,
            )
        except pylxd.exceptions.ClientConnectionFailed as e:
            # pylxd wraps the requests error in a string: map the original instead.
            cause = e.__context__ or e.__cause__
            if isinstance(cause, requests.exceptions.RequestException):
                raise rest.map_error(cause) from e
            raise
        return client, session
    except BaseException:
        session.close()
        raise


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
        meta = quick.take_host(remote)  # read a moment ago by the first listing
        if meta is None:
            meta = await rest.call(rest.fast.get_json, "")
        if not isinstance(meta, dict):
            raise OperationFailed(f"'{remote.name}' answered GET /1.0 with no object.")
        convert.check_trusted(meta, remote)
        self.known.host = meta
        self.known.info = convert.server_info(meta)
        rest.build_client(lambda: pylxd_client(rest, self.timeout))
        return self.known.info

    async def close(self) -> None:
        self.rest.close()

    # Listing ---------------------------------------------------------------------------

    async def list_instances(self) -> list[Instance]:
        rest, known = self.rest, self.known
        rest.ensure_connected()
        if known.listing is None:
            known.listing = quick.take_listing(self.remote)  # made before the UI started
        digest, items = await rest.get_changed(known.listing[0] if known.listing else None,
                                               "instances", recursion="1")
        if items is UNCHANGED:
            assert known.listing is not None
            instances = list(known.listing[1])
        else:
            listed = convert.instances(items, self.remote.name)
            known.listing = digest, listed
            instances = list(listed)
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
