"""libvirt domains (``qemu:///system``, ``qemu+ssh://server/system``, …) as a corral remote.

:class:`LibvirtBackend` only composes; the concerns reach the daemon through ``self.lv``
(:class:`~backends.libvirt.connection.Connection`: the connection, its thread pool, the
event loop thread, errors in words):

- ``lifecycle.py``: connect, list, usage, start/shut down/force off/reboot/pause/delete
- ``events.py``: ``watch`` (domain lifecycle callbacks, the connection closing)
- ``consoles.py``: the serial console on a libvirt stream
- ``display.py``: the graphical screen (a VNC device), through corral's console server
- ``ssh_tunnel.py``: one SSH master per ``qemu+ssh://`` host (libvirt's transport, screens)
- ``portable.py``: a stopped domain as its XML and disk files (``portable_vm``)
- ``snapshots.py``: internal snapshots of qcow2 disks (list, take, revert, delete)
- ``limits.py``: vCPUs and memory, live (hot-add, balloon) or at the next start
- ``names.py``: rename (shut-off domains) and the description
- ``migrate.py``: moving a domain to another libvirt remote, live while it runs
- ``clone.py``: a shut-off domain copied, its disks copied by the daemon (pool volumes)
- ``nics.py``: NICs (networks, bridges, macvtap) and DHCP host entries for addresses
- ``networks.py``: the libvirt networks (``list_networks``)
- ``disks.py``: disks as pool volumes; deleting a domain with its own volumes
- ``export.py``: export to and import from a tar archive (``archived.py``: what it holds)
- ``create.py``: new domains (the launch wizard); ``domain_xml.py`` their XML and host facts

``uri.py`` says how a URI is opened so that no prompt ever blocks, ``convert.py`` turns
libvirt's numbers into corral's models.
"""

from __future__ import annotations

from ..base import Backend
from ..models import Capability, Remote
from .connection import Connection
from .clone import Clone
from .consoles import Consoles
from .create import Create
from .display import Display
from .disks import OwnedStorage
from .events import Events
from .export import Export
from .lifecycle import Lifecycle
from .limits import Limits
from .migrate import Migrate
from .names import Names
from .networks import Networks
from .nics import Nics
from .portable import Portable
from .snapshots import Snapshots
from .ssh_tunnel import destination
from .uri import is_remote


class LibvirtBackend(Lifecycle, Events, Consoles, Display, Portable, Snapshots, Limits, Names,
                     Clone, Nics, Networks, OwnedStorage, Migrate, Export, Create,
                     Backend):
    """The domains of one libvirt connection URI."""

    kind = "libvirt"
    capabilities = frozenset({
        Capability.START, Capability.STOP, Capability.FORCE_STOP, Capability.RESTART,
        Capability.FREEZE, Capability.UNFREEZE, Capability.DELETE, Capability.EVENTS,
        Capability.METRICS, Capability.CONSOLE, Capability.PORTABLE, Capability.SNAPSHOTS,
        Capability.SNAPSHOT_STATEFUL, Capability.RESOURCES, Capability.RENAME,
        Capability.DESCRIPTION, Capability.COPY_MOVE, Capability.DISPLAY,
        Capability.CLONE, Capability.NICS, Capability.DELETE_STORAGE, Capability.NETWORKS,
        Capability.EXPORT, Capability.IMPORT,
        Capability.CREATE,
    })
    console_kinds = frozenset({"console"})

    def __init__(self, remote: Remote, *, timeout: float = 10.0) -> None:
        super().__init__(remote, timeout=timeout)
        if is_remote(remote.address):  # its disks are on another machine: no convert; a
            # screen only through SSH (display.py, ssh_tunnel.py), not over TCP or TLS
            self.capabilities = type(self).capabilities - {Capability.PORTABLE} - (
                set() if destination(remote.address) else {Capability.DISPLAY})
        self.lv = Connection(remote, timeout)
        self._cpu: dict[str, tuple[int, float]] = {}
