"""The core verbs of the QEMU backend: connecting (adopting VMs that outlived an earlier
corral), listing, usage figures, and start, stop, restart, pause and delete."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from pathlib import Path

from .. import tool_version
from ..base import Backend
from ..console.orphans import end_servers
from ..console.serial_log import trim as trim_serial_log
from ..errors import (
    BackendError,
    Conflict,
    NotFound,
    NotResponding,
    OperationFailed,
    StopTimedOut,
    Unreachable,
)
from ..models import (
    Instance,
    InstanceRef,
    InstanceState,
    InstanceStatus,
    ServerInfo,
)
from .definition import QEMU
from .files import sweep
from .host_paths import open_boot_files
from .kvm import SILENT_BOOT, expects_serial_output
from .launcher import Launcher
from .machines import Machines, runtime_root
from .monitor import Monitor



BALLOON = "/machine/peripheral/balloon0"


async def _guest_used(monitor: Monitor, ref: InstanceRef) -> int | None:
    """What the guest says it uses (total - available, from the virtio balloon's
    statistics), or None while it reports nothing; asks QEMU to poll them (every 5 s)."""
    try:
        stats = await monitor.execute(ref, "qom-get", within=3, path=BALLOON,
                                      property="guest-stats")
    except OperationFailed:  # "guest hasn't updated any stats yet"
        stats = {}
    figures = stats.get("stats") or {}  # type: ignore[union-attr]
    total = int(figures.get("stat-total-memory", -1))
    free = int(figures.get("stat-available-memory", -1))
    if free < 0:
        free = int(figures.get("stat-free-memory", -1))
    if stats.get("last-update") and total > 0 and 0 <= free <= total:  # type: ignore[union-attr]
        return total - free
    await monitor.execute(ref, "qom-set", within=3, path=BALLOON,
                          property="guest-stats-polling-interval", value=5)
    return None


async def qemu_version(binary: str, timeout: float = 10.0) -> str:
    """The version QEMU's ``binary`` says it is (``7.2.9 (Debian 1:7.2+dfsg-7+deb12u16)``;
    asked once per process, usually by the first listing: :mod:`backends.tool_version`).

    Raises:
        NotResponding: it did not answer within ``timeout`` seconds.
    """
    try:
        return version_of(await tool_version.ask_async(binary, "--version", timeout=timeout))
    except TimeoutError:
        raise NotResponding(f"{binary} --version did not finish in time.") from None


def version_of(out: str) -> str:
    """The version in what ``qemu-system-x86_64 --version`` prints."""
    return out.split("\n")[0].replace("QEMU emulator version ", "")


class Lifecycle(Backend):
    """Connect, list, get, states, start, stop, restart, freeze, unfreeze, delete."""

    vms: Machines
    monitor: Monitor
    launcher: Launcher
    serial_log_max: int

    async def connect(self) -> ServerInfo:
        binary = shutil.which(QEMU)
        if binary is None:
            raise Unreachable(f"{QEMU} is not installed (package qemu-system-x86).")
        version = await qemu_version(binary, timeout=self.timeout * 3)
        self.vms.root.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(sweep, self.vms.root)  # what a killed corral left
        for name in self.vms.names():  # VMs that outlived an earlier corral
            await self.monitor.adopt(name)
        await asyncio.to_thread(self._end_orphan_servers)
        self.launcher.kvm.fallback.qemu_version = version
        return ServerInfo(server="qemu", version=version, auth="local")

    def _end_orphan_servers(self) -> None:
        """Console servers of VMs that are gone or not running: nobody can use them."""
        root = runtime_root()
        for run in root.iterdir() if root.is_dir() else ():
            if run.is_dir() and (not self.vms.exists(run.name)
                                 or self.vms.pid(run.name) is None):
                end_servers(run)

    async def close(self) -> None:
        await self.monitor.close()

    # Listing ---------------------------------------------------------------------------

    async def list_instances(self) -> list[Instance]:
        vms = self.vms
        names = await asyncio.to_thread(vms.names)  # (a directory walk)
        for name in names:
            if name not in vms.status:
                await self.monitor.adopt(name)
        # each definition is a file to read and check: off the event loop
        return await asyncio.to_thread(lambda: [vms.entry(name) for name in names])

    async def get_instance(self, ref: InstanceRef) -> Instance:
        if not self.vms.exists(ref.name):
            raise NotFound(f"No QEMU VM named '{ref.name}'.")
        if ref.name not in self.vms.status:
            await self.monitor.adopt(ref.name)
        return await self.vms.read_instance(ref.name)

    async def get_states(self, refs: list[InstanceRef]) -> dict[InstanceRef, InstanceState]:
        vms = self.vms
        out = {}
        tick = os.sysconf("SC_CLK_TCK")
        for ref in refs:
            pid = vms.pid(ref.name)
            qmp = self.monitor.qmp.get(ref.name)
            if pid is None or qmp is None:
                continue
            # the serial log grows while no console server trims it
            await asyncio.to_thread(trim_serial_log, str(vms.run_dir(ref.name) / "serial.log"),
                                    self.serial_log_max)
            try:
                fields_ = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf(
                    "SC_PAGE_SIZE")
            except OSError:
                continue
            cpu_s = (int(fields_[11]) + int(fields_[12])) / tick
            now = time.monotonic()
            prev = vms.cpu.get(ref.name)
            vms.cpu[ref.name] = (cpu_s, now)
            percent = (cpu_s - prev[0]) / (now - prev[1]) * 100 if prev and now > prev[1] else None
            memory, given = rss, True
            try:
                balloon = await self.monitor.execute(ref, "query-balloon", within=3)
                memory = int(balloon.get("actual", rss))  # type: ignore[union-attr]
                used = await _guest_used(self.monitor, ref)
                if used is not None:
                    memory, given = used, False
            except BackendError:
                pass
            d = vms.definition(ref.name)
            disk = sum((vms.dir(ref.name) / disk).stat().st_blocks * 512
                       for disk in d.disks if (vms.dir(ref.name) / disk).exists())
            out[ref] = InstanceState(cpu_usage_ns=int(cpu_s * 1e9), cpu_percent=percent,
                                     memory_usage=memory, memory_limit=d.memory_mib << 20,
                                     memory_is_allocation=given,
                                     disk_usage=disk or None, pid=pid, sampled_at=now)
        return out

    # Lifecycle -------------------------------------------------------------------------

    async def start(self, ref: InstanceRef) -> None:
        """Start the VM detached, then apply its saved balloon target and IO limits.

        Its ISO, kernel and initrd are opened and checked here, at every start, and QEMU
        reads them through those descriptors (:func:`.host_paths.open_boot_files`): a
        link swapped since the VM was defined cannot hand QEMU another file."""
        vms = self.vms
        d = vms.definition(ref.name)
        if vms.pid(ref.name) is not None:
            raise Conflict(f"{ref} is already running.")
        vms.refuse_if_busy(ref)
        vms.refuse_if_base(ref, "started")
        await asyncio.to_thread(end_servers, vms.run_dir(ref.name))  # of an earlier run
        with await asyncio.to_thread(open_boot_files, d, f"{ref} was not started") as boot:
            await self.launcher.launch(ref, boot.definition, boot.fds)
        if ref.name in self.launcher.kvm.started and expects_serial_output(d.kernel, d.cmdline):
            task = asyncio.ensure_future(self._watch_kvm_boot(ref, vms.pid(ref.name)))
            self._boot_watches.add(task)
            task.add_done_callback(self._boot_watches.discard)
        if d.memory_target_mib and d.memory_target_mib < d.memory_mib:
            await self.monitor.execute(ref, "balloon", value=d.memory_target_mib << 20)
        if d.disks and any(d.io_limits.values()):
            await self.monitor.apply_io_limits(ref, d)
        vms.emit("instance-started", ref)

    _boot_watches: set[asyncio.Task[None]] = set()

    async def _watch_kvm_boot(self, ref: InstanceRef, pid: int | None) -> None:
        """A kernel with its console on ttyS0 prints within a second under working KVM;
        silence for :data:`SILENT_BOOT` s means KVM is broken here (the guest hangs)."""
        vms, kvm = self.vms, self.launcher.kvm
        await asyncio.sleep(SILENT_BOOT)
        run = vms.run_dir(ref.name)
        printed = any((run / f).exists() and (run / f).stat().st_size
                      for f in ("serial.log", "serial.log.prev"))
        if printed or pid is None or vms.pid(ref.name) != pid or ref.name not in kvm.started:
            return
        _, auto = kvm.started[ref.name]
        vms.why[ref.name] = kvm.blame(
            f"The guest printed nothing on its serial console in {SILENT_BOOT:.0f} s under "
            f"KVM (it hangs)", auto).replace("Start the VM again",
                                             "Force-stop it and start it again")
        vms.emit("instance-updated", ref, vms.why[ref.name])

    async def stop(self, ref: InstanceRef, *, force: bool = False, timeout: int = 30) -> None:
        """``force``: QMP ``quit`` (SIGKILL when that fails or QEMU lingers); otherwise the
        ACPI power button, which the guest may ignore (see ``docs/protocols.md``, "QMP")."""
        vms, monitor = self.vms, self.monitor
        if force:
            monitor.expect_exit.add(ref.name)
            try:
                await monitor.execute(ref, "quit")
            except (OperationFailed, Conflict, NotResponding):
                pid = vms.pid(ref.name)
                if pid is None:
                    raise
                os.kill(pid, signal.SIGKILL)
            if not await monitor.wait_stopped(ref, 15):
                pid = vms.pid(ref.name)
                if pid:
                    os.kill(pid, signal.SIGKILL)
                await monitor.wait_stopped(ref, 5)
            return
        await monitor.execute(ref, "system_powerdown")
        monitor.expect_exit.add(ref.name)
        if not await monitor.wait_stopped(ref, timeout):
            monitor.expect_exit.discard(ref.name)
            raise StopTimedOut(f"{ref} did not power off within {timeout} s (the guest ignored "
                               f"the ACPI power button). It can be force-stopped.")

    async def restart(self, ref: InstanceRef, *, force: bool = False, timeout: int = 30) -> None:
        await self.monitor.execute(ref, "system_reset")

    async def freeze(self, ref: InstanceRef) -> None:
        await self.monitor.execute(ref, "stop")
        self.vms.status[ref.name] = InstanceStatus.FROZEN

    async def unfreeze(self, ref: InstanceRef) -> None:
        await self.monitor.execute(ref, "cont")
        self.vms.status[ref.name] = InstanceStatus.RUNNING

    async def delete(self, ref: InstanceRef, *, force: bool = False) -> None:
        """Delete a VM (``force``: stop it first if it runs). A VM whose disks back linked
        clones is refused even with ``force``, naming the clones."""
        vms = self.vms
        vms.definition(ref.name)
        vms.refuse_if_busy(ref)
        vms.refuse_if_base(ref, "deleted")
        if vms.pid(ref.name) is not None:
            if not force:
                raise Conflict(f"{ref} is running. Stop it first, or delete it with force.")
            await self.stop(ref, force=True)
        await asyncio.to_thread(end_servers, vms.run_dir(ref.name))  # its consoles end
        shutil.rmtree(vms.dir(ref.name))
        shutil.rmtree(vms.run_dir(ref.name), ignore_errors=True)
        for d in (vms.status, vms.why):
            d.pop(ref.name, None)
        vms.emit("instance-deleted", ref)
