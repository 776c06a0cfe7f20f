"""Local QEMU VMs with no daemon: QEMU runs detached (``-daemonize``), corral talks QMP.

:class:`QEMUBackend` only composes; each concern lives in its own module and reaches the
shared plumbing through three parts, each with its own state: ``self.vms``
(:class:`~backends.qemu.machines.Machines`: the VMs' directories, definitions, pids, busy
marks and known states), ``self.launcher`` (:class:`~backends.qemu.launcher.Launcher`: the
accelerator, the command line, starting QEMU) and ``self.monitor``
(:class:`~backends.qemu.monitor.Monitor`: the QMP connections and their events):

- ``lifecycle.py``: connect, list, usage figures, start/stop/restart/pause/delete
- ``events.py``: ``watch`` (QMP events, VMs defined or removed outside corral)
- ``create.py``: ``create`` and the launch wizard's verbs
- ``limits.py``: vCPU hot-add, balloon, disk resize, IO throttling
- ``snapshots.py``: offline (``qemu-img``) and live (snapshot jobs) snapshots
- ``transfer.py``: export/import, clones, rename, description
- ``vm_import/``: OVA/OVF, VirtualBox and libvirt VMs made into corral VMs
- ``consoles.py``: serial console, VGA text screen and graphical screen

Beside them: ``definition.py`` (a VM's ``vm.json`` and its QEMU command line),
``images.py`` (``qemu-img`` subprocesses), ``archive.py`` (copies and tar archives in
worker threads).
"""

from __future__ import annotations

from ..base import Backend
from ..console.serial_log import SERIAL_LOG_MAX
from ..local import default_qemu_dir, qemu_remote
from ..models import Capability, Instance, Remote
from .consoles import Consoles
from .create import Create
from .events import Events
from .lifecycle import Lifecycle
from .limits import Limits
from .kvm import KVMWatch
from .launcher import Launcher, kvm_usable
from .machines import Machines, runtime_root
from .monitor import Monitor
from .snapshots import Snapshots
from .transfer import Transfer
from .vm_import import Importer

__all__ = ["QEMUBackend", "default_qemu_dir", "kvm_usable", "qemu_remote", "runtime_root"]


class QEMUBackend(Lifecycle, Events, Importer, Create, Limits, Snapshots, Transfer, Consoles, Backend):
    """The VMs defined under one directory."""

    kind = "qemu"
    capabilities = frozenset({
        Capability.START, Capability.STOP, Capability.FORCE_STOP, Capability.RESTART,
        Capability.FREEZE, Capability.UNFREEZE, Capability.DELETE, Capability.EVENTS,
        Capability.METRICS, Capability.CREATE, Capability.CONSOLE, Capability.VGA,
        Capability.RESOURCES, Capability.SNAPSHOTS, Capability.SNAPSHOT_STATEFUL,
        Capability.EXPORT, Capability.IMPORT, Capability.CLONE, Capability.LINKED_CLONE,
        Capability.RENAME, Capability.DESCRIPTION, Capability.DISPLAY,
    })
    console_kinds = frozenset({"console", "vga"})
    backup_extension = ".tar"
    """A plain tar: ``export_instance`` gzips only when the name ends with ``.gz`` or
    ``.tgz``."""

    def __init__(self, remote: Remote, *, timeout: float = 10.0,
                 default_accel: str = "auto", serial_log_max: int = SERIAL_LOG_MAX) -> None:
        super().__init__(remote, timeout=timeout)
        self.serial_log_max = serial_log_max
        """Bytes a VM's serial log may reach before it is trimmed (corral's console server
        and the metrics both trim it)."""
        self.vms = Machines(remote)
        kvm = KVMWatch(self.vms.root)
        self.monitor = Monitor(self.vms, kvm)
        self.launcher = Launcher(self.vms, self.monitor, kvm, default_accel)

    def instance_capabilities(self, instance: Instance) -> frozenset[Capability]:
        """No VGA text screen for UEFI VMs: OVMF draws graphics."""
        caps = super().instance_capabilities(instance)
        if instance.extra.get("firmware") == "uefi":
            caps -= {Capability.VGA}
        return caps
