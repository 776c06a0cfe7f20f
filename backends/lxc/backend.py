"""Local LXC containers (no daemon) through the ``lxc-*`` tools, run as asyncio subprocesses.

One backend per lxcpath, composed by concern: :mod:`.lifecycle` (connect, listing, usage
figures, start/stop/…/delete), :mod:`.events` (``watch``: lxc-monitor and the lxcpath's
mtime), :mod:`.create` (templates, image tarballs, the launch wizard), :mod:`.limits`
(cgroup limits), :mod:`.snapshots`, :mod:`.networks` (the host's bridges, read-only), :mod:`.transfer` (clone, rename, description,
export/import; the archive check in :mod:`.archive`) and :mod:`.consoles` (console and
attach shell). They share one :class:`~.tools.LXCTools` (``self.lxc``): the lxcpath, its
tools and its containers' configs.
"""

from __future__ import annotations

from ..base import Backend
from ..local import default_lxcpath, lxc_remotes
from ..models import Capability, Remote
from .consoles import Consoles
from .create import Create
from .events import Events
from .files import Files
from .lifecycle import Lifecycle
from .limits import Limits
from .networks import Networks
from .snapshots import Snapshots
from .tools import LXCTools
from .transfer import Transfer

__all__ = ["LXCBackend", "default_lxcpath", "lxc_remotes"]


class LXCBackend(Lifecycle, Events, Create, Limits, Snapshots, Transfer, Consoles, Networks,
                 Files, Backend):
    """Containers of one lxcpath."""

    kind = "lxc"
    capabilities = frozenset({
        Capability.START, Capability.STOP, Capability.FORCE_STOP, Capability.RESTART,
        Capability.FREEZE, Capability.UNFREEZE, Capability.DELETE, Capability.EVENTS,
        Capability.METRICS, Capability.SNAPSHOTS, Capability.CREATE, Capability.RESOURCES,
        Capability.CONSOLE, Capability.EXEC, Capability.EXPORT, Capability.IMPORT,
        Capability.CLONE, Capability.LINKED_CLONE, Capability.RENAME, Capability.DESCRIPTION,
        Capability.NETWORKS,
        Capability.FILES,
    })
    console_kinds = frozenset({"console"})
    backup_extension = ".tar.gz"

    def __init__(self, remote: Remote, *, timeout: float = 10.0) -> None:
        super().__init__(remote, timeout=timeout)
        self.lxc = LXCTools(remote, timeout)
