"""The VMs defined under one directory: where a VM's files are, its definition, whether its
QEMU runs (pid file), what corral is doing to it (``busy``) and what it knows of its state.

Layout: definitions and disks in ``<remote.address>/<name>/`` (``vm.json`` + qcow2 files);
runtime files (QMP sockets, serial socket and log, pid file) in
``$XDG_RUNTIME_DIR/corral/qemu/<name>/``. A VM outlives corral; a new corral finds it
through its pid file and QMP socket. Starting QEMU is :mod:`.launcher`'s, talking to it
:mod:`.monitor`'s (QMP events keep :attr:`Machines.status`); a QEMU that dies shows as
stopped, with the reason.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from datetime import datetime
from pathlib import Path

from ..errors import Conflict, NotFound, OperationFailed
from ..models import (
    BackendEvent,
    EventKind,
    Instance,
    InstanceRef,
    InstanceStatus,
    InstanceType,
    Remote,
)
from ..paths import UntrustedFile, runtime_dir
from .definition import VMDefinition
from .monitors import runtime_files

RUNTIME_FILES = ("qemu.pid", *runtime_files(), "serial.sock", "console-qmp.sock")
"""What a QEMU leaves in its runtime directory that is stale once it is gone (the serial
log stays: it is the console's history)."""
STALE_AFTER = 60.0
"""Seconds after which runtime files without a live QEMU are leftovers (a QEMU starts, and
writes its pid file, well within that even under TCG on a busy host)."""


def runtime_root() -> Path:
    """Private runtime directory of the VMs (see :func:`backends.paths.runtime_dir`)."""
    return runtime_dir("qemu")


def is_vm_process(argv: list[bytes], name: str, pidfile: Path) -> bool:
    """Whether a command line (``/proc/<pid>/cmdline`` split at NULs) is the QEMU corral
    started for the VM ``name``: a qemu-system binary with exactly this ``-name`` and this
    ``-pidfile`` (not a substring of some other command line: a VM named ``accel`` must
    not match every VM)."""
    if not argv or not os.path.basename(argv[0]).startswith(b"qemu-system"):
        return False
    pairs = dict(itertools.pairwise(argv))
    return (pairs.get(b"-name") == os.fsencode(name)
            and pairs.get(b"-pidfile") == os.fsencode(str(pidfile)))


def process_stopped(pid: int | None) -> bool:
    """Whether the process is stopped by a signal (SIGSTOP, SIGTSTP) or traced."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return pid is not None and state in ("T", "t")


class Machines:
    """The VMs defined under one directory: their files and pids, the guards on them, and
    what corral knows of their state (kept by :class:`~.monitor.Monitor` and
    :class:`~.launcher.Launcher`, read by the listing)."""

    def __init__(self, remote: Remote) -> None:
        self.remote = remote.name
        self.root = Path(remote.address)
        self.status: dict[str, InstanceStatus] = {}
        self.why: dict[str, str] = {}
        """Why a VM is stopped or unknown when corral did not expect it."""
        self.events: asyncio.Queue[BackendEvent] = asyncio.Queue()
        """Lifecycle events for :meth:`Backend.watch` (:meth:`emit`)."""
        self.cpu: dict[str, tuple[float, float]] = {}
        """Last CPU seconds and when they were read, for a percentage."""
        self.busy: dict[str, str] = {}
        """VMs being exported, imported, cloned or renamed: what is happening to them."""

    # Files -------------------------------------------------------------------------------

    def dir(self, name: str) -> Path:
        return self.root / name

    def run_dir(self, name: str) -> Path:
        return runtime_root() / name

    def runtime_is_stale(self, name: str) -> bool:
        """Whether the VM's runtime files are leftovers of a QEMU that is gone, which may
        be cleared: none was touched in :data:`STALE_AFTER` s. Fresher ones may be those of
        a QEMU another corral (or this one) is starting right now, whose pid file is not
        written yet: clearing them would orphan it."""
        run = self.run_dir(name)
        newest = 0.0
        for f in RUNTIME_FILES:
            try:
                newest = max(newest, (run / f).lstat().st_mtime)
            except OSError:
                continue
        return time.time() - newest > STALE_AFTER

    def clear_runtime(self, name: str) -> None:
        run = self.run_dir(name)
        for f in RUNTIME_FILES:
            (run / f).unlink(missing_ok=True)

    def pid(self, name: str) -> int | None:
        """The pid of the VM's QEMU, when it runs (the pid file names a live QEMU of it)."""
        try:
            pid = int((self.run_dir(name) / "qemu.pid").read_text().strip())
        except (OSError, ValueError):
            return None
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return None
        return pid if is_vm_process(argv, name, self.run_dir(name) / "qemu.pid") else None

    def ref(self, name: str) -> InstanceRef:
        return InstanceRef(self.remote, name)

    def names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / "vm.json").is_file())

    def exists(self, name: str) -> bool:
        return (self.dir(name) / "vm.json").is_file()

    def definition(self, name: str) -> VMDefinition:
        try:
            return VMDefinition.load(self.dir(name))
        except FileNotFoundError:
            raise NotFound(f"No QEMU VM named '{name}'.") from None
        except (ValueError, TypeError, KeyError) as e:
            raise OperationFailed(
                f"The definition of '{name}' ({self.dir(name) / 'vm.json'}) is damaged: {e}"
            ) from e

    def entry(self, name: str) -> Instance:
        """The VM as a listing shows it: a damaged definition is shown, with the problem,
        and hides nothing else."""
        try:
            return self.instance(name)
        except OperationFailed as e:
            return Instance(ref=self.ref(name), type=InstanceType.VM,
                            status=InstanceStatus.ERROR, description=e.message,
                            extra={"reason": e.message})

    async def read_instance(self, name: str) -> Instance:
        """:meth:`instance` in a thread: it reads and checks the VM's definition, which the
        event loop does not wait for."""
        return await asyncio.to_thread(self.instance, name)

    def instance(self, name: str) -> Instance:
        d = self.definition(name)
        status = self.status.get(name, InstanceStatus.STOPPED)
        created = None
        if d.created_at:
            try:
                created = datetime.fromisoformat(d.created_at)
            except ValueError:
                created = None
        if d.kernel:
            image = f"kernel {Path(d.kernel).name}"
        elif d.iso:
            image = f"installer {Path(d.iso).name}"
        elif d.boot == "network":
            image = "network boot (PXE)"
        else:
            image = "disk"
        return Instance(
            ref=self.ref(name), type=InstanceType.VM, status=status, image=image,
            description=d.description or self.why.get(name, ""), created_at=created,
            cpu_limit=str(d.cpus), memory_limit=d.memory_mib * 1024 * 1024,
            extra={"accel": d.accel, "firmware": d.firmware, "reason": self.why.get(name, ""),
                   "linked_to": d.linked_to},
        )

    def emit(self, action: str, ref: InstanceRef, message: str = "") -> None:
        """Report a lifecycle event to :meth:`Backend.watch`."""
        self.events.put_nowait(BackendEvent(EventKind.LIFECYCLE, self.remote, action=action,
                                            ref=ref, message=message))

    # Guards ------------------------------------------------------------------------------

    def clones_of(self, name: str) -> list[str]:
        """The linked clones made from ``name`` (their definitions' ``linked_to``)."""
        out = []
        for other in self.names():
            if other == name:
                continue
            try:
                if VMDefinition.load(self.dir(other)).linked_to == name:
                    out.append(other)
            except (OSError, ValueError, TypeError, UntrustedFile):
                continue  # (another VM's damaged or refused file: not this one's)
        return out

    def refuse_if_base(self, ref: InstanceRef, what: str) -> None:
        clones = self.clones_of(ref.name)
        if clones:
            raise Conflict(
                f"{ref} cannot be {what}: its disks are the base of the linked clone(s) "
                f"{', '.join(clones)}, which would be damaged. Delete those clones first "
                f"(a full clone of a linked clone, without snapshots, is independent).")

    def refuse_if_busy(self, ref: InstanceRef) -> None:
        if ref.name in self.busy:
            raise Conflict(f"{ref} is {self.busy[ref.name]}: wait until that is done.")

    def require_stopped(self, ref: InstanceRef, what: str) -> VMDefinition:
        d = self.definition(ref.name)
        self.refuse_if_busy(ref)
        if self.pid(ref.name) is not None:
            raise Conflict(f"{ref} is running: stop it first to {what} it.")
        return d
