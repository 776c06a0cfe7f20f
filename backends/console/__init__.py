"""Consoles: the websocket session every console reaches the UI through, corral's console
server for local sources, and the VGA text reader."""

from .client import WebSocketSession, attach_local, ensure_server, local_session, server_alive

__all__ = ["WebSocketSession", "attach_local", "ensure_server", "local_session", "server_alive"]
