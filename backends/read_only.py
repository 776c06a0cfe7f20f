"""Remotes configured read-only (``[remotes] read_only`` in corral's config): what they
still serve, and the guard that refuses every other verb below the UI.

The UI reads a read-only remote as any other and offers on it only the actions of
:data:`READ_ONLY_CAPABILITIES`. The backend object of such a remote refuses the rest itself
(:func:`guard`, run by ``Backend.__init__`` for every backend, however it is made): every
public verb that is not in :func:`allowed_verbs` raises :class:`ReadOnlyRemote` in words,
and so does a copy from any backend *to* a read-only remote (a verb with a ``target``
backend, such as ``copy_to``). A verb added to the contract later is refused on a
read-only remote until it is listed here as one that changes nothing.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping
from typing import Any, Callable

from .errors import Unsupported
from .models import Capability

READ_ONLY_CAPABILITIES = frozenset({
    Capability.EVENTS, Capability.METRICS, Capability.CONSOLE, Capability.VGA,
    Capability.SPICE, Capability.DISPLAY, Capability.EXPORT, Capability.IMAGES,
    Capability.OPERATIONS,
})
"""What a read-only remote still offers in the UI: watching and reading, nothing that
changes it (its images and operations are listed; deleting an image or cancelling an
operation is refused, see :data:`CHANGES`)."""

READS: frozenset[str] = frozenset({
    "connect", "close", "list_instances", "get_instance", "get_states", "watch",
    "instance_capabilities", "check_name", "create_sources", "create_options",
    "preview_source", "drop_preview", "get_limits", "list_snapshots", "snapshot_counts",
    "snapshot_settings", "spice_viewer_argv", "display_viewer_argv", "list_images",
    "list_nics", "list_operations", "list_profiles", "get_profile", "list_networks",
    "network_leases", "list_storage_pools", "list_volumes", "list_projects", "get_yaml",
    "list_files", "read_file", "list_members", "placements", "cluster_instances",
    "live_move_problem", "live_move_to_problem", "copy_problem", "object_copy_problem",
    "portable_vm",
    "owned_storage", "storage_offer",
    # backend-specific: the LXD file listing's parts, the QEMU import's first look
    "list_names", "stat_files", "plan_import",
})
"""The verbs that change nothing on the remote: the UI reads a read-only remote as any
other (the listing, usage, snapshot counts, limits and snapshots in the details, the
resource views' rows, a cluster's members)."""

CHANGES: frozenset[str] = frozenset({"delete_image", "cancel_operation"})
"""The verbs of :data:`READ_ONLY_CAPABILITIES` that change the remote."""


class ReadOnlyRemote(Unsupported):
    """The remote is read-only in corral's config, and the verb would change it."""

    title = "Read-only remote"


Methods = Mapping[Capability, tuple[str, ...]]
"""``backends.base.CAPABILITY_METHODS``: the verbs of each ability (handed in by the
Backend class, which imports this module)."""


def allowed_verbs(capability_methods: Methods) -> frozenset[str]:
    """The verbs a read-only remote serves: :data:`READS`, and what the UI offers on it,
    the verbs of :data:`READ_ONLY_CAPABILITIES` but :data:`CHANGES` (adding its consoles,
    screens and exports to a file)."""
    offered = {m for cap in READ_ONLY_CAPABILITIES for m in capability_methods.get(cap, ())}
    return READS | (offered - CHANGES)


def refusal(remote: str, verb: str) -> ReadOnlyRemote:
    return ReadOnlyRemote(
        f"{remote} is read-only in corral's config: '{verb.replace('_', ' ')}' would change "
        f"it, so corral refuses (take {remote} out of [remotes] read_only to allow it).")


_VERBS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def guarded_verbs(cls: type, contract: type, capability_methods: Methods
                  ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(every verb of ``cls`` a read-only remote refuses, every verb with a ``target``
    backend). A verb: a public method of ``contract`` (the Backend class, with its bases),
    or any public coroutine method of ``cls``."""
    if cls in _VERBS:
        return _VERBS[cls]
    allowed = allowed_verbs(capability_methods)
    public = {n for n in dir(contract) if not n.startswith("_")}
    refused, targeted = [], []
    for name in dir(cls):
        if name.startswith("_"):
            continue
        value = inspect.getattr_static(cls, name)
        if isinstance(value, (staticmethod, classmethod, property)) or not callable(value):
            continue
        if name not in public and not (inspect.iscoroutinefunction(value)
                                       or inspect.isasyncgenfunction(value)):
            continue
        if name not in allowed:
            refused.append(name)
        if "target" in inspect.signature(value).parameters:
            targeted.append(name)
    _VERBS[cls] = tuple(sorted(refused)), tuple(sorted(targeted))
    return _VERBS[cls]


def guard(backend: Any, contract: type, capability_methods: Methods) -> None:
    """Make ``backend`` refuse what its remote's configuration forbids: on a read-only
    remote every verb but :func:`allowed_verbs`; on any remote, a verb whose ``target`` is
    a backend of a read-only remote. Instance attributes shadow the class's methods, so
    this holds however the backend object is used."""
    refused, targeted = guarded_verbs(type(backend), contract, capability_methods)
    if backend.remote.read_only:
        for name in refused:
            setattr(backend, name, _refusing(getattr(backend, name), backend.remote.name))
    for name in targeted:
        if name not in refused or not backend.remote.read_only:
            setattr(backend, name, _checking_target(getattr(backend, name)))


def _refusing(method: Callable, remote: str) -> Callable:
    verb = method.__name__
    if inspect.isasyncgenfunction(method):
        @functools.wraps(method)
        async def refuse_stream(*_args: Any, **_kwargs: Any):
            raise refusal(remote, verb)
            yield  # pragma: no cover - makes this an async generator
        return refuse_stream
    if inspect.iscoroutinefunction(method):
        @functools.wraps(method)
        async def refuse(*_args: Any, **_kwargs: Any) -> Any:
            raise refusal(remote, verb)
        return refuse

    @functools.wraps(method)
    def refuse_now(*_args: Any, **_kwargs: Any) -> Any:
        raise refusal(remote, verb)
    return refuse_now


def _checking_target(method: Callable) -> Callable:
    signature = inspect.signature(method)
    verb = method.__name__

    def check(args: tuple, kwargs: dict) -> None:
        target = signature.bind_partial(*args, **kwargs).arguments.get("target")
        remote = getattr(target, "remote", None)
        if remote is not None and getattr(remote, "read_only", False):
            raise refusal(remote.name, verb)

    if inspect.iscoroutinefunction(method):
        @functools.wraps(method)
        async def checked(*args: Any, **kwargs: Any) -> Any:
            check(args, kwargs)
            return await method(*args, **kwargs)
        return checked

    @functools.wraps(method)
    def checked_now(*args: Any, **kwargs: Any) -> Any:
        check(args, kwargs)
        return method(*args, **kwargs)
    return checked_now
