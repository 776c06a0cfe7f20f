"""The views the ``:`` command switches between, declared once: name, aliases, what a
remote must offer to be listed in it, its columns, how its rows are read, and which
lifecycle events of the daemon change it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from backends.base import Backend
from backends.errors import BackendError
from backends.models import Capability, ConnectionState

from ..services.inventory import Inventory
from . import rows as r
from .rows import Row

Loader = Callable[[Backend, str], Awaitable[list[Row]]]


@dataclass(frozen=True)
class ViewSpec:
    name: str
    title: str
    aliases: tuple[str, ...]
    columns: tuple[tuple[str, str], ...]
    """(key, label); ``name`` and ``remote`` come first in every view."""
    needs: Capability | None = None
    """A remote is listed in this view when its backend has this ability (None: every
    remote; ``remotes`` and ``operations``)."""
    load: Loader | None = None
    """The rows of one remote (``parent``: the pool of the volumes view)."""
    events: tuple[str, ...] = ()
    """Lifecycle action prefixes that change this view (``profile-``); :data:`OPERATIONS`:
    every operation event."""
    hidden: bool = False
    """Reached from another view (volumes: enter on a pool), not offered by ``:``."""


async def _profiles(b: Backend, parent: str) -> list[Row]:
    return [r.from_resource(x) for x in await b.list_profiles()]


async def _networks(b: Backend, parent: str) -> list[Row]:
    return [r.from_resource(x) for x in await b.list_networks()]


async def _pools(b: Backend, parent: str) -> list[Row]:
    return [r.from_resource(x) for x in await b.list_storage_pools()]


async def _volumes(b: Backend, parent: str) -> list[Row]:
    if parent:
        return [r.from_resource(x) for x in await b.list_volumes(parent)]
    out: list[Row] = []
    for pool in await b.list_storage_pools():
        out += [r.from_resource(x) for x in await b.list_volumes(pool.name)]
    return out


async def _projects(b: Backend, parent: str) -> list[Row]:
    current = b.remote.project
    rows = []
    for x in await b.list_projects():
        row = r.from_resource(x)
        shown = "yes" if x.name == current else ""
        rows.append(Row(row.key, row.remote, row.name, (("shown", shown),) + row.cells,
                        kind=row.kind, obj=x))
    return rows


async def _images(b: Backend, parent: str) -> list[Row]:
    return [r.from_image(b.remote.name, i) for i in await b.list_images()]


async def _operations(b: Backend, parent: str) -> list[Row]:
    return [r.from_operation(b.remote.name, op) for op in await b.list_operations()]


# What a view shows that changes with no lifecycle event of its own kind (the daemons send
# none for it: LXD 5.0 and Incus 6.0 name only the object changed): the instances a
# profile, network or volume is used by, the volumes and space of a pool, what a project
# holds. The events of the change that causes it read the view again.
_USED_BY_INSTANCES = ("instance-created", "instance-deleted", "instance-renamed",
                      "instance-updated")
_VOLUMES_OF = ("instance-created", "instance-deleted", "instance-renamed", "image-created",
               "image-deleted")
_IN_PROJECTS = ("instance-created", "instance-deleted", "profile-created", "profile-deleted",
                "network-created", "network-deleted", "image-created", "image-deleted",
                "storage-volume-created", "storage-volume-deleted")
OPERATIONS = "operation"
"""What ``events`` holds for a view that follows the operation events."""

VIEWS: tuple[ViewSpec, ...] = (
    ViewSpec("instances", "Instances", ("in", "ins", "inst", "i", "ct", "vm"), ()),
    ViewSpec("profiles", "Profiles", ("pr", "prof", "profile"),
             (("used_by", "Used by"), ("devices", "Devices"), ("config", "Keys"),
              ("description", "Description")),
             Capability.PROFILES, _profiles, ("profile-", *_USED_BY_INSTANCES)),
    ViewSpec("networks", "Networks", ("net", "network", "nw"),
             (("type", "Type"), ("managed", "Managed"), ("ipv4", "IPv4"), ("ipv6", "IPv6"),
              ("nat", "NAT"), ("used_by", "Used by"), ("status", "Status"),
              ("description", "Description")),
             Capability.NETWORKS, _networks, ("network-", "profile-updated", *_USED_BY_INSTANCES)),
    ViewSpec("storage", "Storage pools", ("st", "sto", "pools", "pool"),
             (("driver", "Driver"), ("status", "Status"), ("used", "Used"),
              ("total", "Total"), ("used_by", "Used by"), ("description", "Description")),
             Capability.STORAGE, _pools, ("storage-pool-", "storage-volume-", *_VOLUMES_OF)),
    ViewSpec("volumes", "Volumes", ("vol", "volume"),
             (("pool", "Pool"), ("content", "Content"), ("size", "Size"),
              ("used_by", "Used by"), ("description", "Description")),
             Capability.STORAGE, _volumes, ("storage-volume-", *_VOLUMES_OF)),
    ViewSpec("projects", "Projects", ("proj", "project", "pj"),
             (("shown", "Shown"), ("features", "Features"), ("used_by", "Used by"),
              ("description", "Description")),
             Capability.PROJECTS, _projects, ("project-", *_IN_PROJECTS)),
    ViewSpec("images", "Images", ("im", "img", "image"),
             (("aliases", "Aliases"), ("fingerprint", "Fingerprint"), ("type", "Type"),
              ("size", "Size"), ("public", "Public"), ("cached", "Cached"),
              ("last_used", "Last used"), ("description", "Description")),
             Capability.IMAGES, _images, ("image-",)),
    ViewSpec("operations", "Operations", ("op", "ops", "operation"),
             (("status", "Status"), ("instances", "Instances"), ("progress", "Progress"),
              ("cancel", "Cancel"), ("error", "Error")), events=(OPERATIONS,)),
    ViewSpec("remotes", "Remotes", ("re", "rem", "remote"),
             (("kind", "Kind"), ("state", "State"), ("project", "Project"),
              ("address", "Address"), ("server", "Server"), ("message", "Message"))),
)
BY_NAME = {v.name: v for v in VIEWS}


def resolve(text: str) -> ViewSpec | None:
    """The view ``text`` names: a name, an alias or an unambiguous prefix of a name."""
    word = text.strip().lstrip(":").lower()
    if not word:
        return None
    for v in VIEWS:
        if word == v.name or word in v.aliases:
            return v
    starts = [v for v in VIEWS if v.name.startswith(word)]
    return starts[0] if len(starts) == 1 else None


def offered(inv: Inventory) -> list[ViewSpec]:
    """The views ``:`` offers: those some configured remote's kind can fill (a remote not
    connected yet counts by its backend once connected)."""
    caps: set[Capability] = set()
    for name in inv.backends:
        caps |= inv.declared_capabilities(name)
    return [v for v in VIEWS if not v.hidden and (v.needs is None or v.needs in caps)]


def remotes_for(inv: Inventory, spec: ViewSpec) -> list[str]:
    """The connected remotes whose backend can fill ``spec``."""
    return [name for name in inv.backends
            if inv.statuses[name].state is ConnectionState.CONNECTED
            and (spec.needs is None or spec.needs in inv.remote_capabilities(name))]


def remotes_views(inv: Inventory, remote: str) -> list[ViewSpec]:
    """The views ``remote`` fills from the daemon (what is worth reading ahead)."""
    caps = inv.declared_capabilities(remote)
    return [v for v in VIEWS if v.load is not None and v.needs in caps]


async def load_rows(inv: Inventory, spec: ViewSpec, remote: str, parent: str = ""
                    ) -> tuple[list[Row], str]:
    """The rows of one remote in ``spec``, and a problem in words ("" when none)."""
    backend = inv.backends.get(remote)
    if backend is None:
        return [], ""
    try:
        if spec.name == "operations":
            status = inv.statuses[remote]
            if Capability.OPERATIONS in inv.declared_capabilities(remote):
                rows = await _operations(backend, parent)
            else:
                rows = [r.from_operation(remote, op) for op in status.operations.values()]
            return rows + [r.from_operation(remote, op) for op in status.results], ""
        if spec.load is None:
            return [], ""
        return await spec.load(backend, parent), ""
    except BackendError as e:
        return [], f"{remote}: {e.message}"
