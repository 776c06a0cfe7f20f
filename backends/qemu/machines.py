"""What every QEMU concern shares: where a VM's files are, whether its QEMU runs, starting
that QEMU, and the one QMP connection per running VM with its event pump.

Layout: definitions and disks in ``<remote.address>/<name>/`` (``vm.json`` + qcow2 files);
runtime files (QMP socket, serial socket and log, pid file) in
``$XDG_RUNTIME_DIR/corral/qemu/<name>/``. A VM outlives corral; a new corral finds it
through its pid file and QMP socket. State follows QMP events (STOP, RESUME, SHUTDOWN,
RESET, POWERDOWN); a QEMU that dies shows as stopped, with the reason. What QMP does and
does not do: ``docs/protocols.md``, section "QMP".
"""

from __future__ import annotations

from backends.paths import UntrustedFile

import asyncio
import contextlib
import itertools
import os
import time
from datetime import datetime
from pathlib import Path

from qemu.qmp import QMPClient, Runstate
from qemu.qmp.error import QMPError

from ..errors import (
    AcceleratorUnusable,
    Conflict,
    NotFound,
    NotResponding,
    OperationFailed,
)
from ..models import (
    BackendEvent,
    EventKind,
    Instance,
    InstanceRef,
    InstanceStatus,
    InstanceType,
    Remote,
)
from ..paths import runtime_dir
from .definition import VMDefinition, command_line
from .kvm import KVMWatch, kvm_error
from .monitors import MONITORS, Claim, claim, runtime_files

EVENT_ACTIONS = {
    "STOP": "instance-paused",
    "RESUME": "instance-resumed",
    "SHUTDOWN": "instance-shutdown",
    "RESET": "instance-restarted",
    "POWERDOWN": "instance-updated",
}
"""QMP events and the lifecycle actions they are reported as."""
RUNTIME_FILES = ("qemu.pid", *runtime_files(), "serial.sock", "console-qmp.sock")
"""What a QEMU leaves in its runtime directory that is stale once it is gone (the serial
log stays: it is the console's history)."""
IO_KEYS = {"read_bps": "bps_rd", "write_bps": "bps_wr", "read_iops": "iops_rd",
           "write_iops": "iops_wr"}
"""IO limits of the definition and their ``block_set_io_throttle`` fields."""


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


def kvm_usable() -> bool:
    return os.access("/dev/kvm", os.R_OK | os.W_OK)


class Machines:
    """The VMs defined under one directory: their files, processes, QMP connections and
    what corral knows of their state."""

    def __init__(self, remote: Remote, default_accel: str = "auto") -> None:
        self.remote = remote.name
        self.root = Path(remote.address)
        self.default_accel = default_accel
        self.qmp: dict[str, QMPClient] = {}
        self.kvm = KVMWatch(self.root)
        self.claims: dict[str, Claim] = {}
        """The QMP monitor each connected VM's connection holds (:mod:`.monitors`)."""
        self.status: dict[str, InstanceStatus] = {}
        self.why: dict[str, str] = {}
        """Why a VM is stopped or unknown when corral did not expect it."""
        self.events: asyncio.Queue[BackendEvent] = asyncio.Queue()
        self.listeners: dict[str, asyncio.Task[None]] = {}
        self.cpu: dict[str, tuple[float, float]] = {}
        """Last CPU seconds and when they were read, for a percentage."""
        self.expect_exit: set[str] = set()
        self.qmp_timeout = 10.0
        """Seconds a QMP command may take (a SIGSTOPped QEMU never answers)."""
        self.silent: set[str] = set()
        """Running VMs whose QEMU stopped answering QMP."""
        self.busy: dict[str, str] = {}
        """VMs being exported, imported, cloned or renamed: what is happening to them."""

    # Files -------------------------------------------------------------------------------

    def dir(self, name: str) -> Path:
        return self.root / name

    def run_dir(self, name: str) -> Path:
        return runtime_root() / name

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

    # The QEMU process ----------------------------------------------------------------------

    def is_auto(self, d: VMDefinition) -> bool:
        return d.accel == "auto" and self.default_accel == "auto"

    def accel(self, d: VMDefinition) -> str:
        """The accelerator ``d`` starts with: 'auto' is KVM when /dev/kvm is usable and
        KVM was not found broken on this host (:mod:`.kvm`), else TCG."""
        accel = d.accel if d.accel != "auto" else self.default_accel
        if accel == "auto":
            accel = "kvm" if kvm_usable() and not self.kvm.fallback.reason() else "tcg"
        return accel

    def argv(self, d: VMDefinition) -> list[str]:
        return command_line(d, self.dir(d.name), self.run_dir(d.name), self.accel(d))

    async def launch(self, ref: InstanceRef, d: VMDefinition,
                     pass_fds: tuple[int, ...] = ()) -> None:
        """Start the VM's QEMU detached and attach to it (:meth:`adopt`); ``pass_fds``:
        descriptors QEMU inherits (the boot files ``d`` names as ``/dev/fd/N``).

        Raises:
            OperationFailed: QEMU refused (its last error line) or did not detach in 60 s.
        """
        run = self.run_dir(ref.name)
        run.mkdir(parents=True, exist_ok=True)
        os.chmod(run, 0o700)
        self.clear_runtime(ref.name)
        self.status.pop(ref.name, None)  # not "stopped": notice_outside_starts leaves it
        accel = self.accel(d)
        proc = await asyncio.create_subprocess_exec(
            *command_line(d, self.dir(d.name), run, accel), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True, pass_fds=pass_fds)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), 60)
        except asyncio.TimeoutError:
            proc.kill()
            raise OperationFailed(f"QEMU did not start {ref} within 60 s.") from None
        if proc.returncode != 0:
            message = err.decode(errors="replace").strip().splitlines()
            last = message[-1] if message else f"exit {proc.returncode}"
            if accel == "kvm" and kvm_error(err.decode(errors="replace")):
                auto = self.is_auto(d)
                raise AcceleratorUnusable(
                    self.kvm.blame(f"QEMU could not start {ref} with KVM ({last})", auto),
                    retry_slower=auto)
            raise OperationFailed(f"QEMU refused to start {ref}: {last}")
        if accel == "kvm":
            self.kvm.note_start(ref.name, time.monotonic(), self.is_auto(d))
        else:
            self.kvm.forget(ref.name)
        self.why.pop(ref.name, None)
        self.status.pop(ref.name, None)
        await self.adopt(ref.name)

    # QMP ---------------------------------------------------------------------------------

    async def adopt(self, name: str) -> None:
        """Attach to a running VM (pid alive + QMP), or clean its stale runtime files."""
        if name in self.qmp:
            return
        if self.pid(name) is None:
            if self.run_dir(name).exists():
                self.clear_runtime(name)
            self.status[name] = InstanceStatus.STOPPED
            return
        tried: set[str] = set()
        while True:
            claimed = claim(self.run_dir(name), tried)
            if claimed is None:
                self.status[name] = InstanceStatus.UNKNOWN
                self.why[name] = (
                    "QEMU runs but none of its free QMP monitors answers (stopped with "
                    "SIGSTOP, hung, or held by other QMP clients)" if tried else
                    f"no free QMP monitor: all {MONITORS} are in use by other corral "
                    f"sessions (or QEMU was started by an older corral)")
                return
            qmp = QMPClient(name)
            try:
                # a monitor another QMP client (not a corral) holds never greets us
                async with asyncio.timeout(min(1.5, self.qmp_timeout)):
                    await qmp.connect(str(claimed.socket))
                    status = await qmp.execute("query-status")
                break
            except (QMPError, OSError, TimeoutError):
                claimed.release()
                tried.add(claimed.socket.name)
                with contextlib.suppress(Exception):
                    await qmp.disconnect()
                if process_stopped(self.pid(name)):  # no monitor will answer: say so now
                    self.status[name] = InstanceStatus.UNKNOWN
                    self.why[name] = "QEMU is stopped (SIGSTOP): it answers nothing"
                    return
        self.claims[name] = claimed
        self.qmp[name] = qmp
        self.status[name] = (InstanceStatus.RUNNING if status.get("running")
                             else InstanceStatus.FROZEN)
        self.listeners[name] = asyncio.ensure_future(self._listen(name, qmp))

    async def notice_outside_starts(self) -> None:
        """Adopt VMs this corral thinks stopped whose QEMU runs now (started by another
        corral, or from a shell): one stat of a pid file per stopped VM (the runtime
        directory is checked once, not once per VM: this runs every two seconds)."""
        root = None
        for name, status in list(self.status.items()):
            if status is not InstanceStatus.STOPPED or name in self.busy or name in self.qmp:
                continue
            root = root or runtime_root()
            if not (root / name / "qemu.pid").exists() or self.pid(name) is None:
                continue
            self.status.pop(name, None)
            await self.adopt(name)
            if name in self.qmp:
                self.why.pop(name, None)
                self.emit("instance-started", self.ref(name), "started outside this corral")

    async def _listen(self, name: str, qmp: QMPClient) -> None:
        """Follow one VM: its QMP events, and the connection itself (it drops when QEMU
        exits or is killed; qemu.qmp's event stream does not end on its own then)."""
        events = asyncio.ensure_future(self._pump_events(name, qmp))
        try:
            while qmp.runstate is Runstate.RUNNING:
                await qmp.runstate_changed()
        except asyncio.CancelledError:
            events.cancel()
            raise
        events.cancel()
        if self.qmp.get(name) is qmp:
            await self.gone(name)

    async def _pump_events(self, name: str, qmp: QMPClient) -> None:
        ref = self.ref(name)
        async for event in qmp.events:
            kind = event["event"]
            if kind == "STOP":
                self.status[name] = InstanceStatus.FROZEN
            elif kind == "RESUME":
                self.status[name] = InstanceStatus.RUNNING
            elif kind == "SHUTDOWN":
                self.status[name] = InstanceStatus.STOPPING
            action = EVENT_ACTIONS.get(kind)
            if action:
                self.emit(action, ref, kind)

    async def gone(self, name: str) -> None:
        """The QMP connection ended: QEMU exited (or was killed)."""
        qmp = self.qmp.pop(name, None)
        if qmp is not None:
            try:
                await qmp.disconnect()
            except Exception:  # after quit it raises an empty error
                pass
        self._release(name)
        expected = name in self.expect_exit
        self.expect_exit.discard(name)
        self.silent.discard(name)
        for _ in range(20):  # give the process a moment to exit
            if self.pid(name) is None:
                break
            await asyncio.sleep(0.05)
        self.status[name] = InstanceStatus.STOPPED
        early = "" if expected else self.kvm.early_exit(name, time.monotonic())
        self.kvm.forget(name)
        self.why[name] = early or ("" if expected else
                                   "QEMU exited (it was stopped or killed outside corral)")
        self.cpu.pop(name, None)
        self.clear_runtime(name)
        self.emit("instance-stopped", self.ref(name), self.why[name])

    async def close(self) -> None:
        for task in self.listeners.values():
            task.cancel()
        self.listeners.clear()
        for qmp in list(self.qmp.values()):
            try:
                await qmp.disconnect()
            except Exception:
                pass
        self.qmp.clear()
        for name in list(self.claims):
            self._release(name)

    def _release(self, name: str) -> None:
        claimed = self.claims.pop(name, None)
        if claimed is not None:
            claimed.release()

    async def connection(self, ref: InstanceRef) -> QMPClient:
        if ref.name not in self.qmp:
            await self.adopt(ref.name)
        qmp = self.qmp.get(ref.name)
        if qmp is None:
            if not self.exists(ref.name):
                raise NotFound(f"No QEMU VM named '{ref.name}'.")
            raise Conflict(f"{ref} is not running.")
        return qmp

    async def execute(self, ref: InstanceRef, command: str, *, within: float = 0,
                      **arguments) -> object:
        """Run a QMP command on the running VM; its ``return`` value.

        Raises:
            NotFound: no such VM.  Conflict: it is not running.
            OperationFailed: QEMU refused the command.
            NotResponding: no answer within ``within`` (default :attr:`qmp_timeout`) s.
        """
        qmp = await self.connection(ref)
        limit = within or self.qmp_timeout
        try:
            async with asyncio.timeout(limit):
                answer = await qmp.execute(command, arguments or None)
        except QMPError as e:
            raise OperationFailed(f"QEMU refused {command} for {ref}: {e}") from e
        except TimeoutError:
            self.not_answering(ref.name)
            raise NotResponding(f"The QEMU of {ref} does not answer ({command}, "
                                f"{limit:g} s): it is stopped (SIGSTOP) or hung. "
                                f"It can be force-stopped.") from None
        if ref.name in self.silent:
            await self._answering_again(ref.name, qmp)
        return answer

    def not_answering(self, name: str) -> None:
        """QMP timed out: the VM shows as unknown, with the reason, until it answers."""
        if name not in self.silent:
            self.silent.add(name)
            self.status[name] = InstanceStatus.UNKNOWN
            self.why[name] = "QEMU does not answer (stopped with SIGSTOP, or hung)"
            self.emit("instance-updated", self.ref(name), self.why[name])

    async def _answering_again(self, name: str, qmp: QMPClient) -> None:
        self.silent.discard(name)
        try:
            async with asyncio.timeout(self.qmp_timeout):
                status = await qmp.execute("query-status")
        except (QMPError, TimeoutError):
            self.not_answering(name)
            return
        self.why.pop(name, None)
        self.status[name] = (InstanceStatus.RUNNING if status.get("running")
                             else InstanceStatus.FROZEN)
        self.emit("instance-updated", self.ref(name), "QEMU answers again")

    async def check_silent(self) -> None:
        """Ask the VMs that stopped answering whether they answer again."""
        for name in list(self.silent):
            qmp = self.qmp.get(name)
            if qmp is not None:
                await self._answering_again(name, qmp)

    async def wait_stopped(self, ref: InstanceRef, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.pid(ref.name) is None:
                if ref.name in self.qmp:
                    await self.gone(ref.name)
                return True
            await asyncio.sleep(0.1)
        return False

    async def apply_io_limits(self, ref: InstanceRef, d: VMDefinition) -> None:
        """Throttle the first disk as the definition says (all six fields are needed)."""
        args = {"id": "/machine/peripheral/vblk0/virtio-backend", "bps": 0, "iops": 0}
        for key, qmp_key in IO_KEYS.items():
            args[qmp_key] = int(d.io_limits.get(key, 0))
        await self.execute(ref, "block_set_io_throttle", **args)
