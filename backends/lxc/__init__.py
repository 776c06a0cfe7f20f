"""Local LXC containers through the lxc-* tools (no daemon).

The backend is imported on first use: the first listing (:mod:`.quick`) needs only
``lxc-ls`` and the containers' files."""

from __future__ import annotations

from typing import Any

__all__ = ["LXCBackend", "default_lxcpath", "lxc_remotes"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import backend

        return getattr(backend, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
