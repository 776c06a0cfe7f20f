"""The operations of an LXD/Incus remote: the running (and recently finished) ones, and
cancelling one."""

from __future__ import annotations

from ..base import Backend
from ..errors import Conflict, NotFound, Unsupported
from ..models import Operation
from . import convert
from .ops import DONE
from .rest import Rest


class Operations(Backend):
    """The operation verbs of :class:`~backends.lxd.backend.LXDBackend`."""

    rest: Rest

    async def list_operations(self) -> list[Operation]:
        """Running and recently finished operations (the daemon keeps finished ones for a
        few seconds), running first, newest first."""
        meta = await self.rest.get("operations", recursion="1") or {}
        ops = []
        for items in (meta.values() if isinstance(meta, dict) else [meta]):
            for item in items or ():
                if isinstance(item, dict):
                    ops.append(convert.to_operation(item, self.remote.name))
        ops.sort(key=lambda o: (o.done, -o.created_at.timestamp() if o.created_at else 0))
        return ops

    async def cancel_operation(self, op_id: str) -> None:
        """Cancel a running operation.

        Raises:
            NotFound: no such operation (finished long ago).
            Conflict: it has already finished.
            Unsupported: the daemon does not allow cancelling it.
        """
        client = self.rest.client
        try:
            meta = await self.rest.call(lambda: client.api.operations[op_id].get()
                                        .json()["metadata"])
        except NotFound:
            raise NotFound(f"There is no operation {op_id[:8]} on '{self.remote.name}' "
                           f"(it may have finished).") from None
        desc = meta.get("description") or "The operation"
        if meta.get("status") in DONE:
            raise Conflict(f"{desc} ({op_id[:8]}) has already ended "
                           f"({str(meta.get('status')).lower()}).")
        if not meta.get("may_cancel"):
            raise Unsupported(f"{desc} ({op_id[:8]}) cannot be cancelled: "
                              f"{self.rest.product} does not allow it; wait for it to finish.")
        try:
            await self.rest.call(lambda: client.api.operations[op_id].delete())
        except NotFound:
            pass  # finished meanwhile
