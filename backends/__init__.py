"""corral's backends: one async interface over LXD/Incus remotes, local QEMU and LXC.

This package never imports Textual (``tests/unit/test_layering.py`` checks it). Backend
classes are resolved lazily from a registry so importing ``backends`` stays cheap.
"""

from __future__ import annotations

import importlib
import sys

from .base import Backend, prepare_class
from .errors import BackendError
from .models import FirstListing, Remote

__version__ = "0.1.0"

REGISTRY: dict[str, str] = {
    "lxd": "backends.lxd.backend:LXDBackend",
    "incus": "backends.lxd.backend:IncusBackend",
    "lxc": "backends.lxc.backend:LXCBackend",
    "qemu": "backends.qemu.backend:QEMUBackend",
    "libvirt": "backends.libvirt.backend:LibvirtBackend",
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
    if kind == "libvirt":
        from .libvirt import unavailable_reason

        reason = unavailable_reason()
        if reason:
            raise BackendError(f"libvirt remotes cannot be used here: {reason}.")
    return getattr(importlib.import_module(module_name), cls_name)


FIRST_LISTINGS: dict[str, str] = {
    "lxd": "backends.lxd.quick:first_listing",
    "incus": "backends.lxd.quick:first_listing",
    "qemu": "backends.qemu.quick:first_listing",
    "lxc": "backends.lxc.quick:first_listing",
}
"""Kinds whose instances can be listed without their backend object, in a thread, while the
UI is still importing: LXD/Incus with the standard library alone (the backend module,
with pylxd, is several times slower to import than the daemon is to answer), QEMU from
its definition files, LXC from one ``lxc-ls`` and its config files."""


def first_listing(remote: Remote, *, timeout: float = 10.0) -> FirstListing | None:
    """List ``remote``'s instances the quickest way there is, without a backend object
    (blocking: meant for a thread started before the UI). None when its kind has no such
    path, or when the remote needs its backend to be listed right (a cluster, whose
    offline members only the backend knows). Nothing it finds is reported: a failure
    raises whatever it met, and the backend's own connection then says what is wrong
    in a user's words."""
    entry = FIRST_LISTINGS.get(remote.kind)
    if entry is None:
        return None
    module_name, _, func = entry.partition(":")
    return getattr(importlib.import_module(module_name), func)(remote, timeout)


def loaded(kind: str) -> bool:
    """Whether the module of a kind's backend is imported already (true for unknown kinds:
    there is nothing to load)."""
    entry = REGISTRY.get(kind)
    return entry is None or entry.partition(":")[0] in sys.modules


def preload(kind: str) -> None:
    """Import the module of a kind's backend (blocking, tens of milliseconds for LXD: pylxd,
    websockets; meant for a worker thread, so that the first connection does not import it
    on the event loop). When another thread is importing it, this waits for that import to
    end (the module is in ``sys.modules`` from its start). Unknown kinds are left to
    :func:`backend_class` to refuse."""
    if kind in REGISTRY:
        prepare_class(backend_class(kind))


def get_backend(remote: Remote, *, timeout: float = 10.0, **options: object) -> Backend:
    """A new backend object serving ``remote`` (``options``: backend-specific settings)."""
    return backend_class(remote.kind)(remote, timeout=timeout, **options)


__all__ = ["Backend", "BackendError", "FIRST_LISTINGS", "FirstListing", "Remote", "REGISTRY",
           "backend_class", "first_listing", "get_backend", "loaded", "preload"]
