"""The LXD/Incus backend: pylxd for REST (in a private thread pool), ``websockets`` for
``/1.0/events`` and the console/exec sockets.

One backend per remote, composed by concern: :mod:`.lifecycle` (connect, listing, usage
figures, start/stop/…/delete), :mod:`.events` (``watch``), :mod:`.create` (sources, options,
the launch), :mod:`.limits` (resource limits), :mod:`.snapshots`, :mod:`.consoles` (console,
exec shell, SPICE hand-off), :mod:`.backups` (export/import), :mod:`.transfer` (clone,
copy/move, rename, description), :mod:`.images`, :mod:`.guest` (password, NICs) and
:mod:`.operations`, and the objects beside instances: :mod:`.profiles`, :mod:`.networks`,
:mod:`.storage`, :mod:`.projects`, :mod:`.image_aliases`, :mod:`.yamledit` (shared parts in
:mod:`.objects`, pure conversions in :mod:`.resource_convert`).

They share four parts, each a class with its own state: ``self.rest`` (:class:`~.rest.Rest`:
the HTTP transport, the remote's thread pool, time-outs, errors in words), ``self.ops``
(:class:`~.ops.Ops`: waiting for, following and cancelling operations, undoing a
creation), ``self.sockets`` (:class:`~.sockets.Sockets`: websockets) and ``self.known``
(:class:`~.known.Known`: what the concerns remember between calls).
The pure parts (JSON -> models, texts, names) are in :mod:`.convert`.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Coroutine, TypeVar

from ..base import Backend
from ..models import Capability, Instance, InstanceStatus, InstanceType, Remote
from .backups import Backups
from .cluster import Clustering, ClusterState
from .consoles import Consoles
from .create import Create
from .events import Events
from .files import Files, SFTPChannels
from .guest import Guest
from .image_aliases import ImageAliases
from .images import Images
from .known import Known
from .lifecycle import Lifecycle
from .limits import Limits
from .networks import Networks
from .operations import Operations
from .ops import Ops
from .profiles import Profiles
from .projects import Projects
from .rest import Rest
from .snapshots import Snapshots
from .sockets import Sockets
from .storage import Storage
from .transfer import Transfer
from .yamledit import YamlEdit

__all__ = ["IncusBackend", "LXDBackend"]

WITHOUT_CLIENT = frozenset({"connect", "close", "list_instances", "get_instance",
                            "get_states", "list_members", "list_profiles", "list_networks",
                            "list_storage_pools", "list_volumes", "list_projects",
                            "list_images", "list_operations", "snapshot_counts"})
"""Verbs that need no pylxd client (the fast GET path): they are not held while it is built."""

B = TypeVar("B", bound=type)


def _held(verb: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Coroutine[Any, Any, Any]]:
    @functools.wraps(verb)
    async def held(self: LXDBackend, *args: Any, **kwargs: Any) -> Any:
        await self.rest.client_built()
        return await verb(self, *args, **kwargs)

    return held


def hold_until_client(cls: B) -> B:
    """Each verb of ``cls`` that is its own (a coroutine of this package, not a default of
    :class:`~backends.base.Backend`) and not in :data:`WITHOUT_CLIENT` waits, off the loop,
    for the pylxd client that is built in the background once connected
    (:meth:`.rest.Rest.build_client`): the concerns may then read the client's attributes on
    the loop, which would otherwise wait there for the build."""
    for name in dir(cls):
        verb = getattr(cls, name)
        if name.startswith("_") or name in WITHOUT_CLIENT \
                or not inspect.iscoroutinefunction(verb) \
                or not verb.__module__.startswith(__package__ or "backends.lxd"):
            continue
        setattr(cls, name, _held(verb))
    return cls



@hold_until_client
class LXDBackend(Clustering, Lifecycle, Events, Create, Limits, Snapshots, Consoles, Backups,
                 Transfer, Images, Guest, Operations, Profiles, Networks, Storage, Projects,
                 ImageAliases, YamlEdit, Files, Backend):
    """An LXD remote (also used for Incus, which speaks the same API)."""

    kind = "lxd"
    product = "LXD"
    capabilities = frozenset({
        Capability.START, Capability.STOP, Capability.FORCE_STOP, Capability.RESTART,
        Capability.FREEZE, Capability.UNFREEZE, Capability.DELETE, Capability.EVENTS,
        Capability.METRICS, Capability.CREATE, Capability.RESOURCES,
        Capability.SNAPSHOTS, Capability.SNAPSHOT_STATEFUL, Capability.SNAPSHOT_EXPIRY,
        Capability.SNAPSHOT_RENAME, Capability.SNAPSHOT_SCHEDULE,
        Capability.CONSOLE, Capability.EXEC, Capability.SPICE,
        Capability.EXPORT, Capability.IMPORT, Capability.CLONE, Capability.COPY_MOVE,
        Capability.RENAME, Capability.DESCRIPTION, Capability.PUBLISH, Capability.IMAGES,
        Capability.PASSWORD, Capability.NICS, Capability.OPERATIONS,
        Capability.PROFILES, Capability.NETWORKS, Capability.NETWORK_MANAGE,
        Capability.STORAGE, Capability.PROJECTS, Capability.IMAGE_ALIASES,
        Capability.YAML_EDIT,
        Capability.FILES,
        Capability.CLUSTER,
    })
    console_kinds = frozenset({"console"})
    """A VM's screen is SPICE graphics (``SPICE``: handed to remote-viewer), not VGA text."""
    backup_extension = ".tar.gz"

    def __init__(self, remote: Remote, *, timeout: float = 10.0) -> None:
        super().__init__(remote, timeout=timeout)
        self.rest = Rest(remote, timeout, self.product)
        self.known = Known(self.rest)
        self.ops = Ops(self.rest, self.known)
        self.sockets = Sockets(self.rest)
        self.cluster = ClusterState(remote.address)
        self.sftp = SFTPChannels()

    def instance_capabilities(self, instance: Instance) -> frozenset[Capability]:
        """A VM's screen (SPICE) is offered while it runs, so that ``v`` can explain that it
        is graphics and hand it to remote-viewer where a display exists; containers have
        no screen."""
        caps = super().instance_capabilities(instance)
        if instance.type is not InstanceType.VM or instance.status is InstanceStatus.STOPPED:
            caps -= {Capability.SPICE}
        if instance.type is InstanceType.VM and instance.status is not InstanceStatus.RUNNING:
            caps -= {Capability.FILES}  # a VM's files come through its running agent
        return caps


class IncusBackend(LXDBackend):
    """An Incus remote: the same API and the same code, named for what it is."""

    kind = "incus"
    product = "Incus"
