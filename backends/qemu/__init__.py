"""Local QEMU VMs through QMP (no daemon).

The backend is imported on first use: the first listing (:mod:`.quick`) needs only the
VMs' files."""

from __future__ import annotations

from typing import Any

__all__ = ["QEMUBackend", "default_qemu_dir", "qemu_remote"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import backend

        return getattr(backend, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
