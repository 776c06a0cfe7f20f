"""LXD and Incus backend (one implementation; the differences are decided from the
server's ``environment.server`` and ``api_extensions``).

The backend classes are imported on first use: importing this package (for the first
listing of :mod:`.quick`, which needs neither pylxd nor requests) stays cheap."""

from __future__ import annotations

from typing import Any

__all__ = ["LXDBackend", "IncusBackend"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import backend

        return getattr(backend, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
