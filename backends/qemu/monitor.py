"""A running VM's QMP connection: attaching to its QEMU (a claimed monitor of
:mod:`.monitors`), its events, QMP commands with a time-out, a QEMU that stops answering or
exits. What QMP does and does not do: ``docs/protocols.md``, section "QMP".
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from qemu.qmp import QMPClient, Runstate
from qemu.qmp.error import QMPError

from ..errors import Conflict, NotFound, NotResponding, OperationFailed
from ..models import InstanceRef, InstanceStatus
from .definition import VMDefinition
from .kvm import KVMWatch
from .machines import Machines, process_stopped, runtime_root
from .monitors import MONITORS, Claim, claim

EVENT_ACTIONS = {
    "STOP": "instance-paused",
    "RESUME": "instance-resumed",
    "SHUTDOWN": "instance-shutdown",
    "RESET": "instance-restarted",
    "POWERDOWN": "instance-updated",
}
"""QMP events and the lifecycle actions they are reported as."""
IO_KEYS = {"read_bps": "bps_rd", "write_bps": "bps_wr", "read_iops": "iops_rd",
           "write_iops": "iops_wr"}
"""IO limits of the definition and their ``block_set_io_throttle`` fields."""


class Monitor:
    """The QMP connections of the running VMs under one directory, with their event pumps;
    what the VMs' QEMUs answer goes into :attr:`Machines.status` and ``why``."""

    def __init__(self, vms: Machines, kvm: KVMWatch) -> None:
        self.vms = vms
        self.kvm = kvm
        """Read when QEMU exits: an early exit after a KVM start blames KVM."""
        self.qmp: dict[str, QMPClient] = {}
        self.claims: dict[str, Claim] = {}
        """The QMP monitor each connected VM's connection holds (:mod:`.monitors`)."""
        self.listeners: dict[str, asyncio.Task[None]] = {}
        self.expect_exit: set[str] = set()
        self.qmp_timeout = 10.0
        """Seconds a QMP command may take (a SIGSTOPped QEMU never answers)."""
        self.silent: set[str] = set()
        """Running VMs whose QEMU stopped answering QMP."""

    async def adopt(self, name: str) -> None:
        """Attach to a running VM (pid alive + QMP), or clean its stale runtime files."""
        if name in self.qmp or name in self.vms.busy:
            return  # (attached, or being started by this corral: the start attaches)
        if self.vms.pid(name) is None:
            if self.vms.runtime_is_stale(name):
                self.vms.clear_runtime(name)
            self.vms.status[name] = InstanceStatus.STOPPED
            return
        tried: set[str] = set()
        while True:
            claimed = claim(self.vms.run_dir(name), tried)
            if claimed is None:
                self.vms.status[name] = InstanceStatus.UNKNOWN
                self.vms.why[name] = (
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
                if process_stopped(self.vms.pid(name)):  # no monitor will answer: say so now
                    self.vms.status[name] = InstanceStatus.UNKNOWN
                    self.vms.why[name] = "QEMU is stopped (SIGSTOP): it answers nothing"
                    return
        self.claims[name] = claimed
        self.qmp[name] = qmp
        self.vms.status[name] = (InstanceStatus.RUNNING if status.get("running")
                             else InstanceStatus.FROZEN)
        self.listeners[name] = asyncio.ensure_future(self._listen(name, qmp))

    async def notice_outside_starts(self) -> None:
        """Adopt VMs this corral thinks stopped whose QEMU runs now (started by another
        corral, or from a shell): one stat of a pid file per stopped VM (the runtime
        directory is checked once, not once per VM: this runs every two seconds)."""
        root = None
        for name, status in list(self.vms.status.items()):
            if status is not InstanceStatus.STOPPED or name in self.vms.busy or name in self.qmp:
                continue
            root = root or runtime_root()
            if not (root / name / "qemu.pid").exists() or self.vms.pid(name) is None:
                continue
            self.vms.status.pop(name, None)
            await self.adopt(name)
            if name in self.qmp:
                self.vms.why.pop(name, None)
                self.vms.emit("instance-started", self.vms.ref(name), "started outside this corral")

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
        ref = self.vms.ref(name)
        async for event in qmp.events:
            kind = event["event"]
            if kind == "STOP":
                self.vms.status[name] = InstanceStatus.FROZEN
            elif kind == "RESUME":
                self.vms.status[name] = InstanceStatus.RUNNING
            elif kind == "SHUTDOWN":
                self.vms.status[name] = InstanceStatus.STOPPING
            action = EVENT_ACTIONS.get(kind)
            if action:
                self.vms.emit(action, ref, kind)

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
            if self.vms.pid(name) is None:
                break
            await asyncio.sleep(0.05)
        self.vms.status[name] = InstanceStatus.STOPPED
        early = "" if expected else self.kvm.early_exit(name, time.monotonic())
        self.kvm.forget(name)
        self.vms.why[name] = early or ("" if expected else
                                   "QEMU exited (it was stopped or killed outside corral)")
        self.vms.cpu.pop(name, None)
        self.vms.clear_runtime(name)
        self.vms.emit("instance-stopped", self.vms.ref(name), self.vms.why[name])

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
            if not self.vms.exists(ref.name):
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
            self.vms.status[name] = InstanceStatus.UNKNOWN
            self.vms.why[name] = "QEMU does not answer (stopped with SIGSTOP, or hung)"
            self.vms.emit("instance-updated", self.vms.ref(name), self.vms.why[name])

    async def _answering_again(self, name: str, qmp: QMPClient) -> None:
        self.silent.discard(name)
        try:
            async with asyncio.timeout(self.qmp_timeout):
                status = await qmp.execute("query-status")
        except (QMPError, TimeoutError):
            self.not_answering(name)
            return
        self.vms.why.pop(name, None)
        self.vms.status[name] = (InstanceStatus.RUNNING if status.get("running")
                             else InstanceStatus.FROZEN)
        self.vms.emit("instance-updated", self.vms.ref(name), "QEMU answers again")

    async def check_silent(self) -> None:
        """Ask the VMs that stopped answering whether they answer again."""
        for name in list(self.silent):
            qmp = self.qmp.get(name)
            if qmp is not None:
                await self._answering_again(name, qmp)

    async def wait_stopped(self, ref: InstanceRef, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.vms.pid(ref.name) is None:
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
