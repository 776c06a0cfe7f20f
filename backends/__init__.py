"""corral's backends: one async interface over LXD/Incus remotes, local QEMU and LXC.

This package never imports Textual (``tests/unit/test_layering.py`` checks it). Backend
classes are resolved lazily from a registry so importing ``backends`` stays cheap.
"""

from __future__ import annotations

import importlib

from .base import Backend
from .errors import BackendError
from .models import Remote

__version__ = "0.1.0"

REGISTRY: dict[str, str] = {
    "lxd": "backends.lxd:LXDBackend",
    "incus": "backends.lxd:IncusBackend",
    "lxc": "backends.lxc:LXCBackend",
    "qemu": "backends.qemu:QEMUBackend",
}


def backend_class(kind: str) -> type[Backend]:
    """The backend class for a remote kind.

    Raises:
        BackendError: no backend of that kind exists.
    """
    try:
        module_name, _, cls_name = REGISTRY[kind].partition(":")
    except KeyError:
        raise BackendError(f"No backend for remotes of kind '{kind}'.") from None
    return getattr(importlib.import_module(module_name), cls_name)


def get_backend(remote: Remote, *, timeout: float = 10.0, **options: object) -> Backend:
    """A new backend object serving ``remote`` (``options``: backend-specific settings)."""
    return backend_class(remote.kind)(remote, timeout=timeout, **options)


__all__ = ["Backend", "BackendError", "Remote", "REGISTRY", "backend_class", "get_backend"]
