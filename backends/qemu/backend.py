"""Local QEMU VMs with no daemon: QEMU runs detached (``-daemonize``), corral talks QMP.

Layout: definitions and disks in ``<remote.address>/<name>/`` (``vm.json`` + qcow2 files);
runtime files (QMP socket, serial socket and log, pid file) in
``$XDG_RUNTIME_DIR/corral/qemu/<name>/``. A VM outlives corral; a new corral finds it
through its pid file and QMP socket. State follows QMP events (STOP, RESUME, SHUTDOWN,
RESET, POWERDOWN); a QEMU that dies shows as stopped, with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import AsyncIterator, Callable

from qemu.qmp import QMPClient, Runstate
from qemu.qmp.error import QMPError

from ..base import Backend
from ..errors import (
    BackendError,
    Conflict,
    InvalidInput,
    NotFound,
    OperationFailed,
    StopTimedOut,
    Unreachable,
    Unsupported,
)
from ..models import (
    BackendEvent,
    Capability,
    CreateOptions,
    CreateRequest,
    CreateSource,
    EventKind,
    Instance,
    InstanceRef,
    InstanceState,
    InstanceStatus,
    InstanceType,
    LimitField,
    Remote,
    ServerInfo,
    Snapshot,
)
from ..console import WebSocketSession, attach_local
from ..console.vga import SPECIAL_CHORDS
from ..paths import runtime_dir
from .definition import DISK_RE, MAC_RE, VMDefinition, check_name, new_mac, qcow2_backing
from .transfer import DamagedArchive, copy_file, in_thread, read_archive, write_archive

QEMU = "qemu-system-x86_64"
_EVENT_ACTIONS = {
    "STOP": "instance-paused",
    "RESUME": "instance-resumed",
    "SHUTDOWN": "instance-shutdown",
    "RESET": "instance-restarted",
    "POWERDOWN": "instance-updated",
}


def default_qemu_dir() -> str:
    data = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return os.path.join(data, "corral", "qemu")


def runtime_root() -> Path:
    """Private runtime directory of the VMs (see :func:`backends.paths.runtime_dir`)."""
    return runtime_dir("qemu")


def kvm_usable() -> bool:
    return os.access("/dev/kvm", os.R_OK | os.W_OK)


def qemu_remote(path: str | None = None) -> Remote:
    path = os.path.abspath(os.path.expanduser(path or default_qemu_dir()))
    return Remote(name="qemu", kind="qemu", address=path, source="local QEMU",
                  addresses=(path,))


class QEMUBackend(Backend):
    """The VMs defined under one directory."""

    kind = "qemu"
    capabilities = frozenset({
        Capability.START, Capability.STOP, Capability.FORCE_STOP, Capability.RESTART,
        Capability.FREEZE, Capability.UNFREEZE, Capability.DELETE, Capability.EVENTS,
        Capability.METRICS, Capability.CREATE, Capability.CONSOLE, Capability.VGA,
        Capability.RESOURCES, Capability.SNAPSHOTS,
    })

    def __init__(self, remote: Remote, *, timeout: float = 10.0,
                 default_accel: str = "auto") -> None:
        super().__init__(remote, timeout=timeout)
        self.root = Path(remote.address)
        self.default_accel = default_accel
        self._qmp: dict[str, QMPClient] = {}
        self._status: dict[str, InstanceStatus] = {}
        self._why: dict[str, str] = {}
        self._events: asyncio.Queue[BackendEvent] = asyncio.Queue()
        self._listeners: dict[str, asyncio.Task[None]] = {}
        self._cpu: dict[str, tuple[float, float]] = {}
        self._expect_exit: set[str] = set()
        self._busy: dict[str, str] = {}
        """VMs being exported, imported, cloned or renamed: what is happening to them."""

    # Paths -----------------------------------------------------------------------------

    def _dir(self, name: str) -> Path:
        return self.root / name

    def _run_dir(self, name: str) -> Path:
        return runtime_root() / name

    def _pid(self, name: str) -> int | None:
        try:
            pid = int((self._run_dir(name) / "qemu.pid").read_text().strip())
        except (OSError, ValueError):
            return None
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        return pid if b"qemu-system" in cmdline and name.encode() in cmdline else None

    def _ref(self, name: str) -> InstanceRef:
        return InstanceRef(self.remote.name, name)

    def _names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / "vm.json").is_file())

    def _definition(self, name: str) -> VMDefinition:
        try:
            return VMDefinition.load(self._dir(name))
        except FileNotFoundError:
            raise NotFound(f"No QEMU VM named '{name}'.") from None
        except (ValueError, TypeError, KeyError) as e:
            raise OperationFailed(
                f"The definition of '{name}' ({self._dir(name) / 'vm.json'}) is damaged: {e}"
            ) from e

    # Connection ------------------------------------------------------------------------

    async def connect(self) -> ServerInfo:
        if shutil.which(QEMU) is None:
            raise Unreachable(f"{QEMU} is not installed (package qemu-system-x86).")
        proc = await asyncio.create_subprocess_exec(QEMU, "--version",
                                                    stdout=asyncio.subprocess.PIPE)
        out, _ = await proc.communicate()
        self.root.mkdir(parents=True, exist_ok=True)
        for name in self._names():  # VMs that outlived an earlier corral
            await self._adopt(name)
        version = out.decode().split("\n")[0].replace("QEMU emulator version ", "")
        return ServerInfo(server="qemu", version=version, auth="local")

    async def _adopt(self, name: str) -> None:
        """Attach to a running VM (pid alive + QMP), or clean its stale runtime files."""
        if name in self._qmp:
            return
        if self._pid(name) is None:
            run = self._run_dir(name)
            if run.exists():
                for f in ("qemu.pid", "qmp.sock", "serial.sock", "console-qmp.sock"):
                    (run / f).unlink(missing_ok=True)
            self._status[name] = InstanceStatus.STOPPED
            return
        qmp = QMPClient(name)
        try:
            await asyncio.wait_for(qmp.connect(str(self._run_dir(name) / "qmp.sock")), 5)
            status = await qmp.execute("query-status")
        except (QMPError, OSError, asyncio.TimeoutError) as e:
            self._status[name] = InstanceStatus.UNKNOWN
            self._why[name] = f"QEMU runs but its QMP socket does not answer ({e or 'timeout'})"
            return
        self._qmp[name] = qmp
        self._status[name] = (InstanceStatus.RUNNING if status.get("running")
                              else InstanceStatus.FROZEN)
        self._listeners[name] = asyncio.ensure_future(self._listen(name, qmp))

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
        if self._qmp.get(name) is qmp:
            await self._gone(name)

    async def _pump_events(self, name: str, qmp: QMPClient) -> None:
        ref = self._ref(name)
        async for event in qmp.events:
            kind = event["event"]
            if kind == "STOP":
                self._status[name] = InstanceStatus.FROZEN
            elif kind == "RESUME":
                self._status[name] = InstanceStatus.RUNNING
            elif kind == "SHUTDOWN":
                self._status[name] = InstanceStatus.STOPPING
            action = _EVENT_ACTIONS.get(kind)
            if action:
                self._events.put_nowait(BackendEvent(EventKind.LIFECYCLE, self.remote.name,
                                                     action=action, ref=ref, message=kind))

    async def _gone(self, name: str) -> None:
        """The QMP connection ended: QEMU exited (or was killed)."""
        qmp = self._qmp.pop(name, None)
        if qmp is not None:
            try:
                await qmp.disconnect()
            except Exception:  # noqa: BLE001 - after quit it raises an empty error
                pass
        expected = name in self._expect_exit
        self._expect_exit.discard(name)
        for _ in range(20):  # give the process a moment to exit
            if self._pid(name) is None:
                break
            await asyncio.sleep(0.05)
        self._status[name] = InstanceStatus.STOPPED
        self._why[name] = "" if expected else "QEMU exited (it was stopped or killed outside corral)"
        self._cpu.pop(name, None)
        run = self._run_dir(name)
        for f in ("qemu.pid", "qmp.sock", "serial.sock", "console-qmp.sock"):
            (run / f).unlink(missing_ok=True)
        self._events.put_nowait(BackendEvent(EventKind.LIFECYCLE, self.remote.name,
                                             action="instance-stopped", ref=self._ref(name),
                                             message=self._why[name]))

    async def close(self) -> None:
        for task in self._listeners.values():
            task.cancel()
        self._listeners.clear()
        for qmp in list(self._qmp.values()):
            try:
                await qmp.disconnect()
            except Exception:  # noqa: BLE001
                pass
        self._qmp.clear()

    # Listing ---------------------------------------------------------------------------

    def _instance(self, name: str) -> Instance:
        d = self._definition(name)
        status = self._status.get(name, InstanceStatus.STOPPED)
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
            ref=self._ref(name), type=InstanceType.VM, status=status, image=image,
            description=d.description or self._why.get(name, ""), created_at=created,
            cpu_limit=str(d.cpus), memory_limit=d.memory_mib * 1024 * 1024,
            extra={"accel": d.accel, "firmware": d.firmware, "reason": self._why.get(name, ""),
                   "linked_to": d.linked_to},
        )

    async def list_instances(self) -> list[Instance]:
        names = self._names()
        out = []
        for name in names:
            try:
                if name not in self._status:
                    await self._adopt(name)
                out.append(self._instance(name))
            except OperationFailed as e:
                # a damaged definition is shown, with the problem, and hides nothing else
                out.append(Instance(ref=self._ref(name), type=InstanceType.VM,
                                    status=InstanceStatus.ERROR, description=e.message,
                                    extra={"reason": e.message}))
        return out

    async def get_instance(self, ref: InstanceRef) -> Instance:
        if not (self._dir(ref.name) / "vm.json").is_file():
            raise NotFound(f"No QEMU VM named '{ref.name}'.")
        if ref.name not in self._status:
            await self._adopt(ref.name)
        return self._instance(ref.name)

    async def get_states(self, refs: list[InstanceRef]) -> dict[InstanceRef, InstanceState]:
        out = {}
        tick = os.sysconf("SC_CLK_TCK")
        for ref in refs:
            pid = self._pid(ref.name)
            qmp = self._qmp.get(ref.name)
            if pid is None or qmp is None:
                continue
            try:
                fields_ = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf(
                    "SC_PAGE_SIZE")
            except OSError:
                continue
            cpu_s = (int(fields_[11]) + int(fields_[12])) / tick
            now = time.monotonic()
            prev = self._cpu.get(ref.name)
            self._cpu[ref.name] = (cpu_s, now)
            percent = (cpu_s - prev[0]) / (now - prev[1]) * 100 if prev and now > prev[1] else None
            memory = rss
            try:
                balloon = await qmp.execute("query-balloon")
                memory = int(balloon.get("actual", rss))
            except QMPError:
                pass
            d = self._definition(ref.name)
            disk = sum((self._dir(ref.name) / disk).stat().st_blocks * 512
                       for disk in d.disks if (self._dir(ref.name) / disk).exists())
            out[ref] = InstanceState(cpu_usage_ns=int(cpu_s * 1e9), cpu_percent=percent,
                                     memory_usage=memory, memory_limit=d.memory_mib << 20,
                                     disk_usage=disk or None, pid=pid, sampled_at=now)
        return out

    # Events ----------------------------------------------------------------------------

    async def watch(self) -> AsyncIterator[BackendEvent]:
        yield BackendEvent(EventKind.CONNECTION, self.remote.name, action="connected")
        last = None
        while True:
            try:
                event = await asyncio.wait_for(self._events.get(), 2.0)
            except asyncio.TimeoutError:
                # VMs defined or removed outside corral change the directory (one stat)
                try:
                    mtime = self.root.stat().st_mtime_ns
                except OSError:
                    mtime = None
                if last is not None and mtime != last:
                    yield BackendEvent(EventKind.LIFECYCLE, self.remote.name,
                                       action="remote-changed")
                last = mtime
                continue
            yield event

    # Live resources --------------------------------------------------------------------

    _IO_KEYS = {"read_bps": "bps_rd", "write_bps": "bps_wr", "read_iops": "iops_rd",
                "write_iops": "iops_wr"}

    async def _virtual_size(self, ref: InstanceRef) -> int | None:
        d = self._definition(ref.name)
        if not d.disks:
            return None
        import json

        info = json.loads(await self._qemu_img("info", "-U", "--output=json",
                                               str(self._dir(ref.name) / d.disks[0])))
        return int(info.get("virtual-size") or 0) or None

    async def get_limits(self, ref: InstanceRef) -> list[LimitField]:
        """The VM's limits. While it runs, values are what QEMU has now (vCPUs, RAM, IO
        throttling of the first disk); a value saved in the definition that differs (a
        restart-only change, or a definition edited meanwhile) is shown as ``pending``."""
        d = self._definition(ref.name)
        running = self._pid(ref.name) is not None
        live = "live" if running else "restart"
        cpus, ram_mib = d.cpus, d.memory_mib
        io_now: dict[str, int] | None = None
        if running:
            try:
                cpus = len(await self._execute(ref, "query-cpus-fast"))  # type: ignore[arg-type]
            except BackendError:
                pass
            try:
                summary = await self._execute(ref, "query-memory-size-summary")
                ram_mib = int(summary["base-memory"]) >> 20  # type: ignore[index]
            except (BackendError, KeyError, TypeError, ValueError):
                pass
            if d.disks:
                io_now = await self._running_io_limits(ref)

        def pending(now: object, saved: object, text: str) -> str:
            return text if running and now != saved else ""

        size = await self._virtual_size(ref)
        fields_ = [
            LimitField("cpus", "vCPUs", str(cpus), live if cpus < d.max_cpus else "restart",
                       f"hot-add up to {d.max_cpus} while running; fewer needs a restart",
                       pending=pending(cpus, d.cpus, str(d.cpus))),
            LimitField("memory", "Memory (balloon)",
                       f"{d.memory_target_mib or d.memory_mib}MiB", live,
                       f"balloon target up to {d.memory_mib}MiB; the guest needs its "
                       f"virtio-balloon driver"),
            LimitField("memory_max", "Memory (max)", f"{ram_mib}MiB", "restart",
                       "the VM's RAM; takes effect at next start",
                       pending=pending(ram_mib, d.memory_mib, f"{d.memory_mib}MiB")),
        ]
        if size is not None:
            fields_.append(LimitField("disk", "Disk size", str(size), live,
                                      "grow only; the guest then grows its partition"))
            for key, label in (("read_bps", "Read bytes/s"), ("write_bps", "Write bytes/s"),
                               ("read_iops", "Read IOPS"), ("write_iops", "Write IOPS")):
                saved = int(d.io_limits.get(key, 0))
                now = saved if io_now is None else io_now.get(key, 0)
                fields_.append(LimitField(
                    key, label, str(now) if now else "", live, "0 or empty: no limit",
                    pending=pending(now, saved, str(saved))))
        else:
            fields_.append(LimitField("disk", "Disk size", "", "unsupported", "no disk"))
        return fields_

    async def _running_io_limits(self, ref: InstanceRef) -> dict[str, int] | None:
        """The IO throttling QEMU applies to the first disk now (None: not found)."""
        try:
            blocks = await self._execute(ref, "query-block")
        except BackendError:
            return None
        for block in blocks or ():  # type: ignore[union-attr]
            if block.get("device") == "drive0" or block.get("qdev", "").startswith(
                    "/machine/peripheral/vblk0"):
                inserted = block.get("inserted") or {}
                return {key: int(inserted.get(qmp_key) or 0)
                        for key, qmp_key in self._IO_KEYS.items()}
        return None

    async def set_limits(self, ref: InstanceRef, changes: dict[str, str]) -> dict[str, str]:
        """Apply what QEMU can change live (balloon, vCPU hot-add, block_resize, IO
        throttling) and save everything to the definition; the rest applies at next start.
        Everything is validated before anything is changed."""
        from ..units import size_or_none as parse_size

        d = self._definition(ref.name)
        running = self._pid(ref.name) is not None
        plan: dict[str, int] = {}
        for key, raw in changes.items():
            raw = raw.strip()
            if key == "cpus":
                if not raw.isdigit() or not 1 <= int(raw) <= d.max_cpus:
                    raise InvalidInput(f"vCPUs must be from 1 to {d.max_cpus}.")
                plan[key] = int(raw)
            elif key in ("memory", "memory_max"):
                n = parse_size(raw if raw[-1:].isalpha() else raw + "MiB")
                if n is None or n < 32 << 20:
                    raise InvalidInput(f"Memory '{raw}' is not a size of at least 32MiB.")
                plan[key] = n >> 20
                if key == "memory" and plan[key] > d.memory_mib:
                    raise InvalidInput(f"The balloon can give at most {d.memory_mib}MiB; "
                                       f"raise 'Memory (max)' (needs a restart) first.")
            elif key == "disk":
                n = parse_size(raw)
                size = await self._virtual_size(ref)
                if size is None:
                    raise InvalidInput(f"{ref} has no disk to resize.")
                if n is None or n < size:
                    raise InvalidInput(f"Disks only grow: give a size above {size} bytes.")
                plan[key] = n
            elif key in self._IO_KEYS:
                if raw and not raw.isdigit():
                    raise InvalidInput(f"{key} must be a whole number (0 or empty: no limit).")
                if not d.disks:
                    raise InvalidInput(f"{ref} has no disk to throttle.")
                plan[key] = int(raw or 0)
            else:
                raise InvalidInput(f"Unknown resource '{key}'.")
        result: dict[str, str] = {}
        if "cpus" in plan:
            target = plan["cpus"]
            if running:
                current = len(await self._execute(ref, "query-cpus-fast"))  # type: ignore
                if target > current:
                    slots = [s for s in await self._execute(ref, "query-hotpluggable-cpus")
                             if "qom-path" not in s]  # type: ignore[union-attr]
                    for i, slot in enumerate(slots[: target - current]):
                        await self._execute(ref, "device_add", driver=slot["type"],
                                            id=f"cpu-hot{current + i}", **slot["props"])
                    result["cpus"] = "live"
                else:
                    result["cpus"] = "restart"
            else:
                result["cpus"] = "restart"
            d.cpus = target
        if "memory_max" in plan:
            d.memory_mib = plan["memory_max"]
            d.memory_target_mib = min(d.memory_target_mib, d.memory_mib)
            result["memory_max"] = "restart"
        if "memory" in plan:
            d.memory_target_mib = plan["memory"]
            if running:
                await self._execute(ref, "balloon", value=plan["memory"] << 20)
            result["memory"] = "live" if running else "restart"
        if "disk" in plan:
            if running:
                await self._execute(ref, "block_resize", **{"node-name": "disk0",
                                                            "size": plan["disk"]})
            else:
                await self._qemu_img("resize", str(self._dir(ref.name) / d.disks[0]),
                                     str(plan["disk"]))
            result["disk"] = "live" if running else "restart"
        io = {k: v for k, v in plan.items() if k in self._IO_KEYS}
        if io:
            d.io_limits.update(io)
            if running:
                await self._apply_io_limits(ref, d)
            result.update({k: "live" if running else "restart" for k in io})
        d.save(self._dir(ref.name))
        return result

    async def _apply_io_limits(self, ref: InstanceRef, d: VMDefinition) -> None:
        args = {"id": "/machine/peripheral/vblk0/virtio-backend", "bps": 0, "iops": 0}
        for key, qmp_key in self._IO_KEYS.items():
            args[qmp_key] = int(d.io_limits.get(key, 0))
        await self._execute(ref, "block_set_io_throttle", **args)

    # Snapshots -------------------------------------------------------------------------

    def _disk_paths(self, ref: InstanceRef) -> list[str]:
        d = self._definition(ref.name)
        if not d.disks:
            raise InvalidInput(f"{ref} has no disk: there is nothing to snapshot.")
        return [str(self._dir(ref.name) / disk) for disk in d.disks]

    async def list_snapshots(self, ref: InstanceRef) -> list[Snapshot]:
        import json

        d = self._definition(ref.name)
        if not d.disks:
            return []
        info = json.loads(await self._qemu_img("info", "-U", "--output=json",
                                               self._disk_paths(ref)[0]))
        out = []
        for snap in info.get("snapshots") or ():
            created = datetime.fromtimestamp(int(snap.get("date-sec", 0)), timezone.utc)
            out.append(Snapshot(ref=ref, name=snap["name"], created_at=created,
                                stateful=int(snap.get("vm-state-size") or 0) > 0,
                                size=int(snap.get("vm-state-size") or 0) or None))
        return out

    async def snapshot_counts(self, refs: list[InstanceRef]) -> dict[InstanceRef, int]:
        out = {}
        for ref in refs:
            try:
                out[ref] = len(await self.list_snapshots(ref))
            except BackendError:
                continue
        return out

    async def _job(self, ref: InstanceRef, command: str, tag: str, *, vmstate: bool) -> None:
        """Run a snapshot job (QEMU >= 6.0) and wait for it to conclude."""
        d = self._definition(ref.name)
        nodes = [f"disk{i}" for i in range(len(d.disks))]
        job = f"corral-{command}-{int(time.time() * 1000)}"
        args: dict[str, object] = {"job-id": job, "tag": tag, "devices": nodes}
        if vmstate:
            args["vmstate"] = "disk0"
        await self._execute(ref, command, **args)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            jobs = {j["id"]: j for j in await self._execute(ref, "query-jobs")}  # type: ignore
            state = jobs.get(job)
            if state is None or state["status"] == "concluded":
                break
            await asyncio.sleep(0.1)
        error = (state or {}).get("error")
        if state is not None:
            await self._execute(ref, "job-dismiss", id=job)
        if error:
            raise OperationFailed(f"{command} of {ref} failed: {error}")

    async def create_snapshot(self, ref: InstanceRef, name: str, *,
                              stateful: bool = True) -> Snapshot:
        """Running VMs: a live snapshot with the VM state (snapshot-save job); stopped VMs:
        a disk snapshot with ``qemu-img snapshot``."""
        if not name or any(c.isspace() for c in name):
            raise InvalidInput("A snapshot name is needed, without spaces.")
        disks = self._disk_paths(ref)
        if name in {s.name for s in await self.list_snapshots(ref)}:
            raise InvalidInput(f"{ref} already has a snapshot named '{name}'.")
        if self._pid(ref.name) is not None:
            await self._job(ref, "snapshot-save", name, vmstate=True)
        else:
            for disk in disks:
                await self._qemu_img("snapshot", "-c", name, disk)
        return next(s for s in await self.list_snapshots(ref) if s.name == name)

    async def restore_snapshot(self, snapshot: Snapshot) -> None:
        ref = snapshot.ref
        disks = self._disk_paths(ref)
        if self._pid(ref.name) is not None:
            if not snapshot.stateful:
                raise Conflict(f"'{snapshot.name}' has no VM state: stop {ref} to restore it.")
            await self._job(ref, "snapshot-load", snapshot.name, vmstate=True)
        else:
            self._refuse_if_busy(ref)
            self._refuse_if_base(ref, "restored to a snapshot")
            for disk in disks:
                await self._qemu_img("snapshot", "-a", snapshot.name, disk)

    async def delete_snapshot(self, snapshot: Snapshot) -> None:
        ref = snapshot.ref
        disks = self._disk_paths(ref)
        if self._pid(ref.name) is not None:
            await self._job(ref, "snapshot-delete", snapshot.name, vmstate=False)
        else:
            for disk in disks:
                await self._qemu_img("snapshot", "-d", snapshot.name, disk)

    # Consoles --------------------------------------------------------------------------

    async def open_console(self, ref: InstanceRef, *, width: int = 80, height: int = 24,
                           kind: str = "console") -> WebSocketSession:
        """The VM's first serial port (``kind="console"``, ttyS0 in the guest) or its VGA
        text screen (``kind="vga"``: firmware, boot loader, text installers), served by
        corral's console server (:mod:`backends.console.server`). Detach and re-attach
        freely: QEMU and the server keep running; what the guest printed meanwhile is
        shown on attach (serial: the chardev's log; VGA: the current screen)."""
        d = self._definition(ref.name)
        if self._pid(ref.name) is None:
            raise Conflict(f"{ref} is not running: start it to use its console.")
        run = self._run_dir(ref.name)
        if kind == "console":
            return await attach_local(
                f"{ref} serial", str(run / "serial.ws"),
                ["--unix", str(run / "serial.sock"), "--log", str(run / "serial.log")],
                width=width, height=height, resizable=False)
        if kind != "vga":
            raise InvalidInput(f"Unknown console type '{kind}'.")
        if d.firmware == "uefi":
            raise Unsupported(f"{ref} boots UEFI, which draws graphics, not VGA text: "
                              f"use its serial console.")
        if not (run / "console-qmp.sock").exists():
            raise Unsupported(f"{ref} was started by an older corral without a console "
                              f"monitor: restart it to see its VGA text screen.")
        return await attach_local(
            f"{ref} VGA", str(run / "vga.ws"), ["--vga-qmp", str(run / "console-qmp.sock")],
            special_keys=tuple(SPECIAL_CHORDS), resizable=False)

    def instance_capabilities(self, instance: Instance) -> frozenset[Capability]:
        caps = super().instance_capabilities(instance)
        if instance.extra.get("firmware") == "uefi":
            caps -= {Capability.VGA}
        return caps

    # Create ----------------------------------------------------------------------------

    async def create(self, name: str, *, cpus: int = 1, memory_mib: int = 512,
                     disk_gib: float = 0, image: str = "", overlay: bool = True,
                     iso: str = "", kernel: str = "", initrd: str = "", cmdline: str = "",
                     network_boot: bool = False, accel: str = "auto",
                     firmware: str = "bios", description: str = "", network: str = "user",
                     progress: Callable[[str], None] | None = None) -> Instance:
        """Define a VM (and make its disks). Nothing is left behind on failure (also when
        cancelled: a running ``qemu-img`` is killed and the VM's directory removed).

        ``disk_gib`` may be fractional; the disk gets exactly that many bytes (rounded up to
        a 512-byte sector by qemu-img). ``network`` is ``user`` (QEMU's NAT) or ``none``.

        Raises:
            InvalidInput: bad name or sizes, name taken, missing files, unknown accel.
        """
        say = progress or (lambda _text: None)
        check_name(name)
        if (self._dir(name)).exists():
            raise InvalidInput(f"A VM named '{name}' already exists.")
        if not 1 <= cpus <= (os.cpu_count() or 1) * 4:
            raise InvalidInput(f"CPUs must be from 1 to {(os.cpu_count() or 1) * 4}.")
        if memory_mib < 32:
            raise InvalidInput("Memory must be at least 32 MiB.")
        if accel not in ("auto", "kvm", "tcg"):
            raise InvalidInput("Accelerator must be kvm, tcg or auto.")
        if firmware not in ("bios", "uefi"):
            raise InvalidInput("Firmware must be bios or uefi.")
        for label, path in (("image", image), ("ISO", iso), ("kernel", kernel),
                            ("initrd", initrd)):
            if path and not os.path.isfile(path):
                raise InvalidInput(f"The {label} {path} does not exist.")
        if initrd and not kernel:
            raise InvalidInput("An initrd needs a kernel.")
        if network not in ("user", "none"):
            raise InvalidInput(f"Network '{network}' is not possible: QEMU VMs here use user "
                               f"networking ('user') or no NIC ('none').")
        if network_boot and network == "none":
            raise InvalidInput("Network boot needs a NIC: choose user networking.")
        if disk_gib < 0:
            raise InvalidInput("The disk size cannot be negative.")
        disk_bytes = int(round(disk_gib * 1024**3))
        if image and disk_bytes:
            say("reading image…")
            image_size = await self._image_size(image)
            if disk_bytes < image_size:
                raise InvalidInput(f"The disk must be at least as large as the image "
                                   f"({image_size} bytes); disks only grow.")
        directory = self._dir(name)
        directory.mkdir(parents=True)
        try:
            disks = []
            if image:
                target = directory / "disk0.qcow2"
                say("creating overlay disk…" if overlay else "copying disk image…")
                if overlay:
                    await self._qemu_img("create", "-f", "qcow2", "-F",
                                         await self._image_format(image), "-b",
                                         os.path.abspath(image), str(target))
                else:
                    await self._qemu_img("convert", "-O", "qcow2", image, str(target))
                if disk_bytes:
                    say("resizing disk…")
                    await self._qemu_img("resize", str(target), str(disk_bytes))
                disks.append(target.name)
            elif disk_bytes:
                target = directory / "disk0.qcow2"
                say("creating disk…")
                await self._qemu_img("create", "-f", "qcow2", str(target), str(disk_bytes))
                disks.append(target.name)
            boot = ("kernel" if kernel else "cdrom" if iso else
                    "network" if network_boot else "disk")
            if boot == "disk" and not disks:
                raise InvalidInput("Nothing to boot: give an image, a disk size with an ISO, "
                                   "a kernel, or choose network boot.")
            definition = VMDefinition(
                name=name, cpus=cpus, max_cpus=max(cpus, min(8, (os.cpu_count() or 1) * 2)),
                memory_mib=memory_mib, accel=accel, firmware=firmware, disks=disks,
                iso=os.path.abspath(iso) if iso else "",
                kernel=os.path.abspath(kernel) if kernel else "",
                initrd=os.path.abspath(initrd) if initrd else "", cmdline=cmdline, boot=boot,
                network=network, description=description, created_at=datetime.now(timezone.utc).isoformat())
            if firmware == "uefi":
                vars_src = Path("/usr/share/OVMF/OVMF_VARS_4M.fd")
                if not vars_src.exists():
                    raise InvalidInput("UEFI needs OVMF (package ovmf).")
                shutil.copyfile(vars_src, directory / "OVMF_VARS.fd")
            say("saving definition…")
            definition.save(directory)
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        self._status[name] = InstanceStatus.STOPPED
        return self._instance(name)

    # The launch wizard (SupportsCreate) ----------------------------------------------

    _CREATE_OPTIONS = ("initrd", "cmdline", "firmware", "accel", "overlay", "description")

    async def create_sources(self) -> list[CreateSource]:
        vm = InstanceType.VM
        return [
            CreateSource("disk-image", "Disk image (qcow2/raw) — overlay or copy", type=vm,
                         needs_path=True,
                         detail="a qcow2 overlay backed by the image (option overlay=yes), "
                                "or a qcow2 copy (overlay=no); a disk size grows it"),
            CreateSource("iso", "Installer ISO + empty disk", type=vm, needs_path=True,
                         detail="boots the ISO from a CD drive; the disk is new and empty"),
            CreateSource("kernel", "Kernel + initrd + command line", type=vm, needs_path=True,
                         detail="direct kernel boot (options initrd, cmdline); disk only if "
                                "a size is given"),
            CreateSource("pxe", "Empty VM, network boot (PXE)", type=vm,
                         detail="boots from the network through its NIC; the disk is new "
                                "and empty"),
        ]

    async def create_options(self) -> CreateOptions:
        """Networks: QEMU user networking or no NIC. Host bridges are not offered: the
        definition has no bridged NIC (that would need a tap device or qemu-bridge-helper).
        """
        return CreateOptions(
            networks=("user", "none"), max_cpus=os.cpu_count() or 1, user_data=False,
            can_cancel=False,
            defaults={"cpus": "1", "memory": "512MiB", "disk": "10GiB"})

    def check_name(self, name: str) -> str | None:
        try:
            check_name(name)
        except InvalidInput as e:
            return e.message
        if self._dir(name).exists():
            return f"A VM named '{name}' already exists."
        return None

    async def create_instance(self, request: CreateRequest,
                              progress: Callable[[str], None] | None = None) -> Instance:
        """Create a VM from a :class:`CreateRequest` through :meth:`create`, then start it
        when ``request.start``.

        Sources: ``disk-image`` (path in ``value``; option ``overlay`` yes/no, default yes),
        ``iso`` and ``pxe`` (a new empty disk: ``request.disk``, else 10GiB; 0 = none),
        ``kernel`` (options ``initrd``, ``cmdline``; a disk only when ``request.disk``).
        Memory must be a whole number of MiB. Options ``firmware`` (bios/uefi), ``accel``
        (auto/kvm/tcg) and ``description`` apply to all.

        If the VM was defined but does not start, it stays defined and
        :class:`OperationFailed` says "created, but could not start: …".

        Raises:
            InvalidInput: a value refused (nothing created).
            Conflict: the name is taken.
            OperationFailed: qemu-img failed (nothing left), or the start failed (see above).
        """
        say = progress or (lambda _text: None)
        name = request.name
        check_name(name)
        if self._dir(name).exists():
            raise Conflict(f"A VM named '{name}' already exists.")
        source = request.source
        options = dict(request.options)
        unknown = sorted(set(options) - set(self._CREATE_OPTIONS))
        if unknown:
            raise InvalidInput(f"Unknown option(s) for a QEMU VM: {', '.join(unknown)} (known: "
                               f"{', '.join(self._CREATE_OPTIONS)}).")
        if request.profiles:
            raise InvalidInput("QEMU VMs have no profiles.")
        if request.storage_pool:
            raise InvalidInput("QEMU VMs have no storage pools: disks live in the VM's "
                               "directory.")
        if request.user_data:
            raise InvalidInput("QEMU VMs here take no cloud-init user-data.")
        cpus = 1 if request.cpus is None else request.cpus
        memory_mib = 512
        if request.memory is not None:
            if request.memory % (1 << 20):
                raise InvalidInput("Memory must be a whole number of MiB.")
            memory_mib = request.memory >> 20
        disk = request.disk
        if disk is None and source.kind in ("iso", "pxe"):
            disk = 10 * 1024**3
        if disk is not None and disk % 512:
            raise InvalidInput("The disk size must be a multiple of 512 bytes.")
        overlay = options.get("overlay", "yes").strip().lower()
        if overlay not in ("yes", "no"):
            raise InvalidInput("overlay is 'yes' (a qcow2 overlay) or 'no' (a copy).")
        kwargs: dict[str, object] = {}
        path = os.path.expanduser(source.value.strip()) if source.value else ""
        if source.kind == "disk-image":
            if not path:
                raise InvalidInput("Give the path of a disk image.")
            kwargs.update(image=path, overlay=overlay == "yes")
        elif source.kind == "iso":
            if not path:
                raise InvalidInput("Give the path of an ISO.")
            kwargs.update(iso=path)
        elif source.kind == "kernel":
            if not path:
                raise InvalidInput("Give the path of a kernel.")
            initrd = options.get("initrd", "").strip()
            kwargs.update(kernel=path, initrd=os.path.expanduser(initrd) if initrd else "",
                          cmdline=options.get("cmdline", ""))
        elif source.kind == "pxe":
            kwargs.update(network_boot=True)
        else:
            raise InvalidInput(f"A QEMU VM cannot be made from a '{source.kind}' source.")
        if source.kind != "kernel" and (options.get("initrd") or options.get("cmdline")):
            raise InvalidInput("initrd and cmdline go with a kernel source only.")
        say("checking…")
        inst = await self.create(
            name, cpus=cpus, memory_mib=memory_mib, disk_gib=(disk or 0) / 1024**3,
            accel=options.get("accel", "auto").strip() or "auto",
            firmware=options.get("firmware", "bios").strip() or "bios",
            description=options.get("description", ""),
            network=request.network or "user", progress=say, **kwargs)  # type: ignore[arg-type]
        self._events.put_nowait(BackendEvent(EventKind.LIFECYCLE, self.remote.name,
                                             action="instance-created", ref=inst.ref))
        if request.start:
            say("starting…")
            try:
                await self.start(inst.ref)
            except BackendError as e:
                raise OperationFailed(f"{inst.ref} was created, but could not start: "
                                      f"{e.message}") from e
            inst = self._instance(name)
        return inst

    async def _qemu_img(self, *args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            "qemu-img", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            out, err = await proc.communicate()
        except asyncio.CancelledError:
            if proc.returncode is None:  # cancelled: do not leave it writing a disk
                proc.kill()
                await asyncio.shield(proc.wait())
            raise
        if proc.returncode != 0:
            raise OperationFailed(f"qemu-img {args[0]} failed: {err.decode().strip()}")
        return out.decode()

    async def _image_info(self, path: str) -> dict:
        import json

        try:
            return json.loads(await self._qemu_img("info", "-U", "--output=json", path))
        except OperationFailed as e:
            raise InvalidInput(f"{path} is not a disk image QEMU can read: {e.message}") from e

    async def _image_format(self, path: str) -> str:
        return (await self._image_info(path)).get("format", "raw")

    async def _image_size(self, path: str) -> int:
        return int((await self._image_info(path)).get("virtual-size") or 0)

    # Lifecycle -------------------------------------------------------------------------

    def _accel(self, d: VMDefinition) -> str:
        accel = d.accel if d.accel != "auto" else self.default_accel
        if accel == "auto":
            accel = "kvm" if kvm_usable() else "tcg"
        return accel

    def _argv(self, d: VMDefinition) -> list[str]:
        run = self._run_dir(d.name)
        directory = self._dir(d.name)
        accel = self._accel(d)
        argv = [
            QEMU, "-name", d.name, "-machine", "q35", "-accel", accel,
            "-cpu", "host" if accel == "kvm" else "max",
            "-smp", f"{d.cpus},maxcpus={max(d.cpus, d.max_cpus)}", "-m", f"{d.memory_mib}M",
            "-nodefaults", "-display", "none", "-vga", "std",
            "-chardev", f"socket,id=ser0,path={run}/serial.sock,server=on,wait=off,"
                        f"logfile={run}/serial.log,logappend=on",
            "-serial", "chardev:ser0",
            "-qmp", f"unix:{run}/qmp.sock,server=on,wait=off",
            # a second monitor, for the VGA console server (QMP takes one client each)
            "-qmp", f"unix:{run}/console-qmp.sock,server=on,wait=off",
            "-device", "virtio-balloon-pci,id=balloon0",
            "-pidfile", str(run / "qemu.pid"), "-daemonize",
        ]
        if d.firmware == "uefi":
            argv += ["-drive", "if=pflash,format=raw,readonly=on,"
                               "file=/usr/share/OVMF/OVMF_CODE_4M.fd",
                     "-drive", f"if=pflash,format=raw,file={directory}/OVMF_VARS.fd"]
        for i, disk in enumerate(d.disks):
            argv += ["-drive", f"if=none,id=drive{i},node-name=disk{i},format=qcow2,"
                               f"file={directory / disk}",
                     "-device", f"virtio-blk-pci,drive=drive{i},id=vblk{i}"
                     + (",bootindex=1" if i == 0 and d.boot == "disk" else "")]
        if d.iso:
            argv += ["-drive", f"if=none,id=cd0,media=cdrom,readonly=on,file={d.iso}",
                     "-device", "ide-cd,drive=cd0" + (",bootindex=0" if d.boot == "cdrom"
                                                      else "")]
        if d.network == "user":
            argv += ["-netdev", "user,id=net0",
                     "-device", "virtio-net-pci,netdev=net0"
                     + (f",mac={d.mac}" if MAC_RE.match(d.mac) else "")
                     + (",bootindex=0" if d.boot == "network" else "")]
        if d.kernel:
            argv += ["-kernel", d.kernel]
            if d.initrd:
                argv += ["-initrd", d.initrd]
            if d.cmdline:
                argv += ["-append", d.cmdline]
        return argv

    async def start(self, ref: InstanceRef) -> None:
        d = self._definition(ref.name)
        if self._pid(ref.name) is not None:
            raise Conflict(f"{ref} is already running.")
        self._refuse_if_busy(ref)
        self._refuse_if_base(ref, "started")
        run = self._run_dir(ref.name)
        run.mkdir(parents=True, exist_ok=True)
        os.chmod(run, 0o700)
        for f in ("qemu.pid", "qmp.sock", "serial.sock", "console-qmp.sock"):
            (run / f).unlink(missing_ok=True)
        proc = await asyncio.create_subprocess_exec(
            *self._argv(d), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), 60)
        except asyncio.TimeoutError:
            proc.kill()
            raise OperationFailed(f"QEMU did not start {ref} within 60 s.") from None
        if proc.returncode != 0:
            message = err.decode(errors="replace").strip().splitlines()
            raise OperationFailed(f"QEMU refused to start {ref}: "
                                  f"{message[-1] if message else 'exit ' + str(proc.returncode)}")
        self._why.pop(ref.name, None)
        self._status.pop(ref.name, None)
        await self._adopt(ref.name)
        if d.memory_target_mib and d.memory_target_mib < d.memory_mib:
            await self._execute(ref, "balloon", value=d.memory_target_mib << 20)
        if d.disks and any(d.io_limits.values()):
            await self._apply_io_limits(ref, d)
        self._events.put_nowait(BackendEvent(EventKind.LIFECYCLE, self.remote.name,
                                             action="instance-started", ref=ref))

    async def _qmp_for(self, ref: InstanceRef) -> QMPClient:
        if ref.name not in self._qmp:
            await self._adopt(ref.name)
        qmp = self._qmp.get(ref.name)
        if qmp is None:
            if not (self._dir(ref.name) / "vm.json").is_file():
                raise NotFound(f"No QEMU VM named '{ref.name}'.")
            raise Conflict(f"{ref} is not running.")
        return qmp

    async def _execute(self, ref: InstanceRef, command: str, **arguments) -> object:
        qmp = await self._qmp_for(ref)
        try:
            return await qmp.execute(command, arguments or None)
        except QMPError as e:
            raise OperationFailed(f"QEMU refused {command} for {ref}: {e}") from e

    async def _wait_stopped(self, ref: InstanceRef, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._pid(ref.name) is None:
                if ref.name in self._qmp:
                    await self._gone(ref.name)
                return True
            await asyncio.sleep(0.1)
        return False

    async def stop(self, ref: InstanceRef, *, force: bool = False, timeout: int = 30) -> None:
        if force:
            self._expect_exit.add(ref.name)
            try:
                await self._execute(ref, "quit")
            except (OperationFailed, Conflict):
                pid = self._pid(ref.name)
                if pid is None:
                    raise
                os.kill(pid, signal.SIGKILL)
            if not await self._wait_stopped(ref, 15):
                pid = self._pid(ref.name)
                if pid:
                    os.kill(pid, signal.SIGKILL)
                await self._wait_stopped(ref, 5)
            return
        await self._execute(ref, "system_powerdown")
        self._expect_exit.add(ref.name)
        if not await self._wait_stopped(ref, timeout):
            self._expect_exit.discard(ref.name)
            raise StopTimedOut(f"{ref} did not power off within {timeout} s (the guest ignored "
                               f"the ACPI power button). It can be force-stopped.")

    async def restart(self, ref: InstanceRef, *, force: bool = False, timeout: int = 30) -> None:
        await self._execute(ref, "system_reset")

    async def freeze(self, ref: InstanceRef) -> None:
        await self._execute(ref, "stop")
        self._status[ref.name] = InstanceStatus.FROZEN

    async def unfreeze(self, ref: InstanceRef) -> None:
        await self._execute(ref, "cont")
        self._status[ref.name] = InstanceStatus.RUNNING

    async def delete(self, ref: InstanceRef, *, force: bool = False) -> None:
        """Delete a VM (``force``: stop it first if it runs). A VM whose disks back linked
        clones is refused even with ``force``, naming the clones."""
        self._definition(ref.name)
        self._refuse_if_busy(ref)
        self._refuse_if_base(ref, "deleted")
        if self._pid(ref.name) is not None:
            if not force:
                raise Conflict(f"{ref} is running. Stop it first, or delete it with force.")
            await self.stop(ref, force=True)
        shutil.rmtree(self._dir(ref.name))
        shutil.rmtree(self._run_dir(ref.name), ignore_errors=True)
        for d in (self._status, self._why):
            d.pop(ref.name, None)
        self._events.put_nowait(BackendEvent(EventKind.LIFECYCLE, self.remote.name,
                                             action="instance-deleted", ref=ref))

    # Export, import, clone, rename, description --------------------------------------

    def _clones_of(self, name: str) -> list[str]:
        """The linked clones made from ``name`` (their definitions' ``linked_to``)."""
        out = []
        for other in self._names():
            if other == name:
                continue
            try:
                if VMDefinition.load(self._dir(other)).linked_to == name:
                    out.append(other)
            except (OSError, ValueError, TypeError):
                continue
        return out

    def _refuse_if_base(self, ref: InstanceRef, what: str) -> None:
        clones = self._clones_of(ref.name)
        if clones:
            raise Conflict(
                f"{ref} cannot be {what}: its disks are the base of the linked clone(s) "
                f"{', '.join(clones)}, which would be damaged. Delete those clones first "
                f"(a full clone of a linked clone, without snapshots, is independent).")

    def _refuse_if_busy(self, ref: InstanceRef) -> None:
        if ref.name in self._busy:
            raise Conflict(f"{ref} is {self._busy[ref.name]}: wait until that is done.")

    def _require_stopped(self, ref: InstanceRef, what: str) -> VMDefinition:
        d = self._definition(ref.name)
        self._refuse_if_busy(ref)
        if self._pid(ref.name) is not None:
            raise Conflict(f"{ref} is running: stop it first to {what} it.")
        return d

    async def _convert(self, src: str, dst: str, label: str,
                       say: Callable[[str], None]) -> None:
        """``qemu-img convert`` to a new qcow2 (flattens backing files, drops internal
        snapshots), reporting ``label N%``; killed when cancelled."""
        proc = await asyncio.create_subprocess_exec(
            "qemu-img", "convert", "-p", "-O", "qcow2", src, dst,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)

        async def pump() -> None:
            assert proc.stdout is not None
            buf = b""
            last = -1
            while chunk := await proc.stdout.read(512):
                *lines, buf = re.split(rb"[\r\n]", buf + chunk)
                for line in lines:
                    m = re.search(rb"\(([\d.]+)/100%\)", line)
                    if m and int(float(m[1])) != last:
                        last = int(float(m[1]))
                        say(f"{label} {last}%")

        try:
            assert proc.stderr is not None
            _, err = await asyncio.gather(pump(), proc.stderr.read())
            await proc.wait()
        except asyncio.CancelledError:
            if proc.returncode is None:
                proc.kill()
                await asyncio.shield(proc.wait())
            raise
        if proc.returncode != 0:
            raise OperationFailed(f"qemu-img convert of {src} failed: "
                                  f"{err.decode(errors='replace').strip()}")

    async def export_instance(self, ref: InstanceRef, path: str, *, with_snapshots: bool = True,
                              progress: Callable[[str], None] | None = None) -> int:
        """Write a stopped VM to a new tar archive at ``path`` (gzip-compressed when it
        ends with ``.gz`` or ``.tgz``): ``vm.json``, ``disk<N>.qcow2`` and, for UEFI VMs,
        ``OVMF_VARS.fd``. Returns the archive's size in bytes.

        Disks are stored as they are (qcow2 internal snapshots included) when
        ``with_snapshots``; otherwise each is rewritten by ``qemu-img convert`` (current
        state only). A disk that is a qcow2 overlay (a linked clone, or a VM made as an
        overlay of an image) is always flattened, since its backing file is not in the
        archive; if it also has snapshots, ``with_snapshots`` is refused. Kernel, initrd
        and ISO paths are kept as references: those files are not in the archive.

        The archive is written to ``path + ".part"`` and renamed when complete; on failure
        or cancellation nothing is left.

        Raises:
            Conflict: the VM is running (or busy).
            InvalidInput: ``path`` exists, its directory does not, or see above.
            OperationFailed: writing failed (disk full, ...).
        """
        say = progress or (lambda _text: None)
        path = os.path.abspath(os.path.expanduser(path))
        d = self._require_stopped(ref, "export")
        if os.path.lexists(path):
            raise InvalidInput(f"{path} exists already: choose a new file name.")
        parent = os.path.dirname(path)
        if not os.path.isdir(parent):
            raise InvalidInput(f"The directory {parent} does not exist.")
        part = path + ".part"
        if os.path.lexists(part):
            raise InvalidInput(f"{part} exists: an earlier export was interrupted, or one is "
                               f"running. Remove it first.")
        directory = self._dir(ref.name)
        self._busy[ref.name] = "being exported"
        tmp = ""
        try:
            plan: list[tuple[str, str, bool]] = []
            for i, disk in enumerate(d.disks):
                src = str(directory / disk)
                info = await self._image_info(src)
                backing = info.get("backing-filename")
                if with_snapshots and backing and info.get("snapshots"):
                    raise InvalidInput(
                        f"{disk} of {ref} is a qcow2 overlay of {backing} and has internal "
                        f"snapshots: an archive cannot keep both. Export it without "
                        f"snapshots (its current state, flattened).")
                convert = (not with_snapshots or bool(backing)
                           or info.get("format") != "qcow2")
                plan.append((f"disk{i}.qcow2", src, convert))
            tmp = tempfile.mkdtemp(prefix=".corral-export-", dir=parent)
            members: list[tuple[str, str | bytes]] = []
            for arcname, src, convert in plan:
                if convert:
                    out = os.path.join(tmp, arcname)
                    await self._convert(src, out, f"converting {arcname}", say)
                    src = out
                members.append((arcname, src))
            exported = dataclasses.replace(d, disks=[m[0] for m in members], linked_to="")
            members.insert(0, ("vm.json", (json.dumps(dataclasses.asdict(exported), indent=2)
                                           + "\n").encode()))
            if d.firmware == "uefi" and (directory / "OVMF_VARS.fd").is_file():
                members.append(("OVMF_VARS.fd", str(directory / "OVMF_VARS.fd")))
            compress = path.endswith((".gz", ".tgz"))
            try:
                await in_thread(write_archive, part, members, compress, progress=say)
            except OSError as e:
                raise OperationFailed(f"Writing {part} failed: {e.strerror or e}") from e
            try:
                os.link(part, path)  # never replaces a file that appeared meanwhile
            except FileExistsError:
                raise InvalidInput(f"{path} appeared during the export; the export was "
                                   f"not kept.") from None
            except OSError:
                os.rename(part, path)  # a file system without hard links
            else:
                os.unlink(part)
            say("exported")
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(part)
            raise
        finally:
            self._busy.pop(ref.name, None)
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)
        return os.path.getsize(path)

    @staticmethod
    def _archived_definition(data: bytes, path: str) -> VMDefinition:
        """The ``vm.json`` of an archive, checked: only the fields and values a VM here
        can have (its disks named ``disk<N>.qcow2``, inside the VM's directory)."""
        try:
            raw = json.loads(data)
            if not isinstance(raw, dict):
                raise ValueError("not an object")
            known = {f.name: f for f in dataclasses.fields(VMDefinition)}
            d = VMDefinition(**{k: v for k, v in raw.items() if k in known})
            for name, f in known.items():
                value = getattr(d, name)
                expected = {"int": int, "str": str}.get(str(f.type))
                if expected and (not isinstance(value, expected) or isinstance(value, bool)):
                    raise ValueError(f"{name} is not a{'n' if expected is int else ''} "
                                     f"{expected.__name__}")
            if not isinstance(d.disks, list) or not all(
                    isinstance(x, str) and DISK_RE.match(x) for x in d.disks):
                raise ValueError("disks must be named disk<N>.qcow2")
            if len(set(d.disks)) != len(d.disks):
                raise ValueError("a disk is listed twice")
            if not isinstance(d.io_limits, dict):
                raise ValueError("io_limits is not an object")
            if d.firmware not in ("bios", "uefi") or d.accel not in ("auto", "kvm", "tcg"):
                raise ValueError("unknown firmware or accelerator")
            if d.network not in ("user", "none") or d.cpus < 1 or d.memory_mib < 32:
                raise ValueError("unknown network, or too few CPUs or too little memory")
        except (ValueError, TypeError) as e:
            raise InvalidInput(f"{path} is not a corral QEMU export: its vm.json is not "
                               f"usable ({e}).") from e
        return d

    async def import_instance(self, path: str, name: str, *, storage_pool: str = "",
                              progress: Callable[[str], None] | None = None) -> Instance:
        """Create the VM ``name`` from an archive written by :meth:`export_instance`.

        Every member is checked before use: only ``vm.json``, ``disk<N>.qcow2`` and
        ``OVMF_VARS.fd`` plain files (no paths, links or directories), the disks exactly
        those ``vm.json`` names, each a qcow2 without a backing file that passes
        ``qemu-img check``. The VM keeps the archive's settings and MAC; its name becomes
        ``name``. Nothing is left on failure or cancellation.

        Raises:
            InvalidInput: bad name, ``storage_pool`` given, missing file, or the archive
                is damaged or not a corral QEMU export.
            Conflict: the name is taken.
        """
        say = progress or (lambda _text: None)
        if storage_pool:
            raise InvalidInput("QEMU VMs have no storage pools: disks live in the VM's "
                               "directory.")
        check_name(name)
        path = os.path.abspath(os.path.expanduser(path))
        if not os.path.isfile(path):
            raise InvalidInput(f"{path} does not exist or is not a file.")
        self.root.mkdir(parents=True, exist_ok=True)
        directory = self._dir(name)
        try:
            directory.mkdir()  # claims the name; listed once vm.json is written, last
        except FileExistsError:
            raise Conflict(f"A VM named '{name}' already exists.") from None
        self._busy[name] = "being imported"
        try:
            def allowed(member: str) -> bool:
                return member in ("vm.json", "OVMF_VARS.fd") or bool(DISK_RE.match(member))

            try:
                kept = await in_thread(read_archive, path, directory, allowed, {"vm.json"},
                                       progress=say)
            except DamagedArchive as e:
                raise InvalidInput(f"{path} is not a corral QEMU export: {e}.") from None
            except OSError as e:
                raise OperationFailed(f"Importing {path} failed: {e.strerror or e}") from e
            assert isinstance(kept, dict)
            if "vm.json" not in kept:
                raise InvalidInput(f"{path} is not a corral QEMU export: it has no vm.json.")
            d = self._archived_definition(kept["vm.json"], path)
            present = sorted(p.name for p in directory.iterdir() if DISK_RE.match(p.name))
            if sorted(d.disks) != present:
                raise InvalidInput(f"{path} is incomplete or inconsistent: its vm.json names "
                                   f"the disks {', '.join(d.disks) or 'none'}, the archive "
                                   f"holds {', '.join(present) or 'none'}.")
            has_vars = (directory / "OVMF_VARS.fd").exists()
            if (d.firmware == "uefi") != has_vars:
                raise InvalidInput(f"{path} is inconsistent: a {d.firmware} VM "
                                   f"{'without' if not has_vars else 'with'} UEFI variables.")
            for disk in d.disks:
                say(f"checking {disk}…")
                target = str(directory / disk)
                try:
                    info = json.loads(await self._qemu_img("info", "--output=json", target))
                except (OperationFailed, ValueError) as e:
                    raise InvalidInput(f"{path} holds a damaged {disk}: {e}") from e
                data_file = ((info.get("format-specific") or {}).get("data") or {}).get(
                    "data-file")
                if info.get("format") != "qcow2" or info.get("backing-filename") or data_file:
                    raise InvalidInput(f"{path} holds a {disk} that is not a self-contained "
                                       f"qcow2 (it refers to other files); refused.")
                try:
                    await self._qemu_img("check", "-q", target)
                except OperationFailed as e:
                    raise InvalidInput(f"{path} holds a damaged {disk}: {e.message}") from e
            d.name, d.linked_to = name, ""
            d.save(directory)
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        finally:
            self._busy.pop(name, None)
        self._status[name] = InstanceStatus.STOPPED
        self._why.pop(name, None)
        self._events.put_nowait(BackendEvent(EventKind.LIFECYCLE, self.remote.name,
                                             action="instance-created", ref=self._ref(name)))
        return self._instance(name)

    async def clone_instance(self, ref: InstanceRef, new_name: str, *, linked: bool = False,
                             with_snapshots: bool = True,
                             progress: Callable[[str], None] | None = None) -> Instance:
        """Copy a stopped VM to ``new_name``, with a new MAC address and its own copy of the
        UEFI variables.

        Full clone (``linked=False``): each disk is copied byte for byte, internal snapshots
        included, when ``with_snapshots``; otherwise ``qemu-img convert`` writes the current
        state only (and flattens a backing file: the copy is then independent). A copy of a
        linked clone made with snapshots stays backed by the same base.

        Linked clone (``linked=True``): each disk is a new qcow2 overlay whose backing file
        is the source's disk; ``with_snapshots`` does not apply (the snapshots stay with
        the source; the clone starts from its current state). The clone's definition
        records the source (``linked_to``), and from then on the source is protected, since
        any change to its disks would damage the clone: it cannot be started, have a
        snapshot restored or be deleted (:class:`Conflict` naming the clones, even with
        ``force``) while a linked clone exists. Renaming it rebases its clones.

        Raises:
            Conflict: the VM is running or busy, or ``new_name`` is taken.
            InvalidInput: bad name.
            OperationFailed: qemu-img failed (nothing is left).
        """
        say = progress or (lambda _text: None)
        d = self._require_stopped(ref, "clone")
        check_name(new_name)
        source_dir, directory = self._dir(ref.name), self._dir(new_name)
        try:
            directory.mkdir()
        except FileExistsError:
            raise Conflict(f"A VM named '{new_name}' already exists.") from None
        self._busy[ref.name] = "being cloned"
        self._busy[new_name] = "being created"
        try:
            new = dataclasses.replace(d, name=new_name, mac=new_mac(), linked_to="",
                                      io_limits=dict(d.io_limits), disks=list(d.disks),
                                      created_at=datetime.now(timezone.utc).isoformat())
            for disk in d.disks:
                src, dst = str(source_dir / disk), str(directory / disk)
                if linked:
                    say(f"creating overlay {disk}…")
                    await self._qemu_img("create", "-f", "qcow2", "-F", "qcow2", "-b", src,
                                         dst)
                    new.linked_to = ref.name
                elif with_snapshots:
                    await in_thread(copy_file, src, dst, f"copying {disk}", progress=say)
                    backing = qcow2_backing(Path(src))
                    if backing and not backing.startswith("json:"):
                        # a relative backing path would now point elsewhere: make it absolute
                        fmt = (await self._image_info(src)).get("backing-filename-format")
                        await self._qemu_img("rebase", "-u", *(["-F", fmt] if fmt else []),
                                             "-b", backing, dst)
                        new.linked_to = d.linked_to
                else:
                    await self._convert(src, dst, f"copying {disk}", say)
            if d.firmware == "uefi" and (source_dir / "OVMF_VARS.fd").is_file():
                await asyncio.to_thread(shutil.copyfile, source_dir / "OVMF_VARS.fd",
                                        directory / "OVMF_VARS.fd")
            new.save(directory)
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        finally:
            self._busy.pop(ref.name, None)
            self._busy.pop(new_name, None)
        self._status[new_name] = InstanceStatus.STOPPED
        self._why.pop(new_name, None)
        say("cloned")
        self._events.put_nowait(BackendEvent(EventKind.LIFECYCLE, self.remote.name,
                                             action="instance-created",
                                             ref=self._ref(new_name)))
        return self._instance(new_name)

    async def rename_instance(self, ref: InstanceRef, new_name: str) -> Instance:
        """Rename a stopped VM: its directory moves and its definition takes the new name.
        VMs whose disks are overlays of its disks (linked clones, or VMs created as an
        overlay of one of its disks) are rebased (``qemu-img rebase -u``) onto the new
        paths; they must be stopped. On failure everything is put back.

        Raises:
            Conflict: the VM or one of its overlays is running, or ``new_name`` is taken.
            InvalidInput: bad name.
        """
        d = self._require_stopped(ref, "rename")
        check_name(new_name)
        if new_name == ref.name:
            return self._instance(ref.name)
        old_dir, new_dir = self._dir(ref.name), self._dir(new_name)
        if new_dir.exists():
            raise Conflict(f"A VM named '{new_name}' already exists.")
        prefix = str(old_dir) + os.sep
        dependants: list[tuple[str, Path, str]] = []  # (vm, disk path, old backing)
        for other in self._names():
            if other == ref.name:
                continue
            try:
                od = VMDefinition.load(self._dir(other))
            except (OSError, ValueError, TypeError):
                continue
            for disk in od.disks:
                backing = qcow2_backing(self._dir(other) / disk)
                if backing and backing.startswith(prefix):
                    if self._pid(other) is not None or other in self._busy:
                        raise Conflict(f"{other} is an overlay of {ref}'s disks and is "
                                       f"running or busy: stop it first (its backing file "
                                       f"moves).")
                    dependants.append((other, self._dir(other) / disk, backing))
        self._busy[ref.name] = "being renamed"
        done: list[tuple[Path, str]] = []
        relinked: list[str] = []
        try:
            os.rename(old_dir, new_dir)
            try:
                for other, disk, backing in dependants:
                    await self._qemu_img("rebase", "-u", "-F", "qcow2", "-b",
                                         str(new_dir) + os.sep + backing[len(prefix):],
                                         str(disk))
                    done.append((disk, backing))
                for other in {o for o, _, _ in dependants}:
                    od = VMDefinition.load(self._dir(other))
                    if od.linked_to == ref.name:
                        od.linked_to = new_name
                        od.save(self._dir(other))
                        relinked.append(other)
                d.name = new_name
                d.save(new_dir)
            except BaseException:
                for disk, backing in reversed(done):
                    with contextlib.suppress(BaseException):
                        await self._qemu_img("rebase", "-u", "-F", "qcow2", "-b", backing,
                                             str(disk))
                for other in relinked:
                    with contextlib.suppress(Exception):
                        od = VMDefinition.load(self._dir(other))
                        od.linked_to = ref.name
                        od.save(self._dir(other))
                os.rename(new_dir, old_dir)
                raise
        finally:
            self._busy.pop(ref.name, None)
        old_run, new_run = self._run_dir(ref.name), self._run_dir(new_name)
        if old_run.exists():  # serial log history goes along
            if new_run.exists():
                shutil.rmtree(new_run, ignore_errors=True)
            with contextlib.suppress(OSError):
                os.rename(old_run, new_run)
        for table in (self._status, self._why):
            if ref.name in table:
                table[new_name] = table.pop(ref.name)
        self._status.setdefault(new_name, InstanceStatus.STOPPED)
        new_ref = self._ref(new_name)
        self._events.put_nowait(BackendEvent(EventKind.LIFECYCLE, self.remote.name,
                                             action="instance-renamed", ref=new_ref,
                                             message=f"renamed from {ref.name}"))
        return self._instance(new_name)

    async def set_description(self, ref: InstanceRef, text: str) -> None:
        """Save the VM's description in its definition (running or not)."""
        d = self._definition(ref.name)
        d.description = text
        d.save(self._dir(ref.name))
        self._events.put_nowait(BackendEvent(EventKind.LIFECYCLE, self.remote.name,
                                             action="instance-updated", ref=ref))
