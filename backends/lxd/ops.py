"""Waiting for LXD/Incus operations, following their progress, cancelling them, and undoing
a creation that failed or was abandoned (the operation cancelled or outwaited, the
instance deleted); also the ETag-safe instance update, which waits for its operation.

What an operation is and how LXD and Incus differ in answering a wait:
``docs/protocols.md``, section "LXD/Incus REST".
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Callable

from ..errors import BackendError, Conflict, OperationFailed
from ..models import InstanceRef, InstanceStatus
from . import convert
from .known import Known
from .lazy import pylxd_exc
from .rest import Rest

if TYPE_CHECKING:
    import requests

DONE = ("Success", "Failure", "Cancelled")
"""Statuses of an operation that has ended."""

_PUT_FIELDS = ("architecture", "config", "devices", "ephemeral", "profiles", "stateful",
               "description")


class Ops:
    """The operations of one remote: waits (in pool threads) and follows (on the event
    loop, through :meth:`Rest.call`)."""

    def __init__(self, rest: Rest, known: Known) -> None:
        self.rest = rest
        self.known = known
        """Names of a creation that is undone are forgotten there."""

    def wait(self, response: requests.Response, timeout: float) -> dict[str, Any]:
        """(In a pool thread) wait for the async operation a 202 response started; raise on
        failure."""
        body = response.json()
        if body.get("type") != "async":
            return body.get("metadata") or {}
        op_id = convert.url_name(str(body.get("operation", "")))
        r = self.rest.client.api.operations[op_id].wait.get(
            params={"timeout": int(timeout)}, timeout=timeout + self.rest.timeout
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
            self.rest.client.api.operations[op_id].wait.get(params={"timeout": int(timeout)},
                                                       timeout=timeout + self.rest.timeout)
        except pylxd_exc.LXDAPIException:
            pass

    async def follow(self, op_id: str, report: Callable[[str], None], *,
                     timeout: float) -> dict[str, Any]:
        """Poll an operation with short waits (the event loop stays free), passing its
        progress on; returns its final metadata."""
        client = self.rest.client
        deadline = time.monotonic() + timeout
        last = ""

        def _poll() -> dict[str, Any]:
            node = client.api.operations[op_id]
            try:
                return node.wait.get(params={"timeout": 1}, timeout=1 + self.rest.timeout)\
                    .json()["metadata"]
            except pylxd_exc.LXDAPIException:
                # Incus answers a wait that timed out with an error ("context deadline
                # exceeded"), and a wait on a failed operation with its error: read it
                return node.get().json()["metadata"]

        while True:
            meta = await self.rest.call(_poll)
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
        client = self.rest.client

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

        return await self.rest.call(_do, timeout=150)

    # Undoing a creation (create, import, clone, copy) ------------------------------------

    async def remove_if_made(self, name: str) -> None:
        """Delete instance ``name`` if it exists (a failed or abandoned creation)."""
        client = self.rest.client

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

        await self.rest.call(_do, timeout=200)
        self.known.names.discard(name)

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
            op_id = await asyncio.wait_for(post, self.rest.timeout * 2)
        except Exception:  # the POST failed: nothing was made
            return
        for fut in later:
            try:
                await asyncio.wait_for(fut, 90)
            except Exception:  # whatever it did, the instance goes
                pass
        client = self.rest.client

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
                                         timeout=1 + self.rest.timeout).json()["metadata"]
                except pylxd_exc.NotFound:
                    return
                except pylxd_exc.LXDAPIException as e:
                    if "deadline" not in str(e):
                        return
                    continue
                if meta.get("status") in DONE:
                    return

        try:
            await self.rest.call(_cancel, timeout=200)
        finally:
            await self.remove_if_made(name)


def _done(value: str) -> asyncio.Future:
    """A future that has ``value`` already (an operation id for :meth:`Ops.undo_create`)."""
    fut: asyncio.Future = asyncio.get_running_loop().create_future()
    fut.set_result(value)
    return fut
