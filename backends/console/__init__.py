"""Consoles: the websocket session every console reaches the UI through, corral's console
server for local sources, and the VGA text reader.

The names below are loaded from ``client.py`` when first used (websockets takes ~15 ms to
import): a backend that only lists instances, as every one does at start-up, never pays."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import WebSocketSession, attach_local, ensure_server, local_session, server_alive

__all__ = ["WebSocketSession", "attach_local", "ensure_server", "local_session", "server_alive"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import client

        return getattr(client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
