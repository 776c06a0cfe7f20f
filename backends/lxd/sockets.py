"""Websockets to an LXD/Incus remote: the events stream and the console/exec sockets of an
operation, over the unix socket or pinned TLS (the same pin as the HTTP session;
``docs/protocols.md``, section "TLS and pinning")."""

from __future__ import annotations

from typing import Any, Callable
from urllib.parse import urlencode

from websockets.asyncio.client import connect as ws_connect
from websockets.asyncio.client import unix_connect as ws_unix_connect

from ..errors import OperationFailed
from ..models import InstanceRef
from . import convert
from .rest import Rest
from .tls import check_credentials, ssl_context


class Sockets:
    """Opens websockets on one remote; its only state is the transport it reaches it by."""

    def __init__(self, rest: Rest) -> None:
        self.rest = rest

    def websocket(self, path: str, *, ping_interval: float | None = None,
                  logger: Any = None) -> Any:
        """Connect a websocket to ``path`` on this remote (unix socket or pinned TLS);
        ``logger`` replaces websockets' own (one that never logs frames, for secrets)."""
        common: dict[str, Any] = {
            "open_timeout": self.rest.timeout,
            "max_size": 2**24,
            "ping_interval": ping_interval,
            "ping_timeout": max(3.0, self.rest.timeout),
            "close_timeout": min(5.0, self.rest.timeout),  # a hung daemon never closes back
        }
        if logger is not None:
            common["logger"] = logger
        if self.rest.remote.is_unix:
            return ws_unix_connect(self.rest.remote.socket_path, uri=f"ws://lxd{path}", **common)
        check_credentials(self.rest.remote)
        host = self.rest.remote.address.split("://", 1)[1].rstrip("/")
        return ws_connect(f"wss://{host}{path}", ssl=ssl_context(self.rest.remote), proxy=None,
                          **common)

    def operation_socket(self, op_id: str, secret: str, *,
                         logger: Any = None) -> Callable[[], Any]:
        """A function that opens the websocket ``secret`` of operation ``op_id``."""
        params = {"secret": secret}
        if self.rest.remote.project != "default":
            params["project"] = self.rest.remote.project
        path = f"/1.0/operations/{op_id}/websocket?" + urlencode(params)

        async def open_ws() -> Any:
            return await self.websocket(path, logger=logger)

        return open_ws

    async def websocket_operation(self, ref: InstanceRef, endpoint: str,
                                  body: dict[str, Any]) -> tuple[str, dict[str, str]]:
        """POST a console/exec request; return the operation id and its fds secrets."""
        client = self.rest.client

        def _do() -> tuple[str, dict[str, str]]:
            data = getattr(client.api.instances[ref.name], endpoint).post(json=body).json()
            fds = ((data.get("metadata") or {}).get("metadata") or {}).get("fds") or {}
            if "0" not in fds or "control" not in fds:
                raise OperationFailed(f"'{self.rest.remote.name}' gave no console websockets.")
            return convert.operation_id(data), fds

        return await self.rest.call(_do)
