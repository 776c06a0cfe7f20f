"""Connect, list, usage and the lifecycle verbs of a libvirt remote.

Listings are one round trip (``getAllDomainStats`` with the state, balloon and vCPU
groups, every domain at once) and one small call per domain for its description (libvirt
has no bulk read of it); usage figures of the rows shown are another
(``domainListGetStats`` with the CPU, balloon, block and interface groups: the disk
files' size and the NICs' bytes in the same round trip). A graceful stop presses the
ACPI power button (``shutdownFlags``) and waits for the domain's own "stopped" event
within the time-out, then says :class:`~backends.errors.StopTimedOut` (the UI offers force:
``destroy``). Deleting undefines the domain and keeps its disks.
"""

from __future__ import annotations

import asyncio

import libvirt

from ..base import Backend
from ..errors import Conflict, NotFound, StopTimedOut
from ..models import Instance, InstanceRef, InstanceState, InstanceStatus, ServerInfo
from . import convert
from .connection import CLOSED, Connection
from .display import description_and_vnc

LIST_STATS = (libvirt.VIR_DOMAIN_STATS_STATE | libvirt.VIR_DOMAIN_STATS_BALLOON
              | libvirt.VIR_DOMAIN_STATS_VCPU)
USAGE_STATS = (libvirt.VIR_DOMAIN_STATS_CPU_TOTAL | libvirt.VIR_DOMAIN_STATS_BALLOON
               | libvirt.VIR_DOMAIN_STATS_BLOCK | libvirt.VIR_DOMAIN_STATS_INTERFACE)
UNDEFINE = (libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE
            | libvirt.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA
            | libvirt.VIR_DOMAIN_UNDEFINE_CHECKPOINTS_METADATA
            | libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)


class Lifecycle(Backend):
    """The core verbs of :class:`~backends.libvirt.backend.LibvirtBackend`."""

    lv: Connection
    _cpu: dict[str, tuple[int, float]]

    async def connect(self) -> ServerInfo:
        conn = await self.lv.open()

        def identify() -> ServerInfo:
            version = conn.getLibVersion()
            hypervisor = conn.getVersion()
            return ServerInfo(server="libvirt", version=_dotted(version),
                              server_name=conn.getHostname(), auth="trusted",
                              note=f"{conn.getType()} {_dotted(hypervisor)}")

        return await self.lv.call(identify, what="identifying the server")

    async def close(self) -> None:
        await self.lv.close()

    # -- reading -------------------------------------------------------------------------
    async def list_instances(self) -> list[Instance]:
        conn = await self.lv.live()
        name = self.remote.name

        def listing() -> list[Instance]:
            return [convert.instance(name, dom.name(), dom.UUIDString(), stats,
                                     *description_and_vnc(dom))
                    for dom, stats in conn.getAllDomainStats(LIST_STATS, 0)]

        return await self.lv.call(listing, what="listing domains")

    async def get_instance(self, ref: InstanceRef) -> Instance:
        conn = await self.lv.live()

        def one() -> Instance:
            dom = conn.lookupByName(ref.name)
            [(_, stats)] = conn.domainListGetStats([dom], LIST_STATS, 0)
            return convert.instance(ref.remote, dom.name(), dom.UUIDString(), stats,
                                    *description_and_vnc(dom),
                                    persistent=_persistent(dom),
                                    snapshot_count=_snapshots(dom))

        try:
            return await self.lv.call(one, what=f"reading {ref.name}")
        except NotFound:
            raise NotFound(f"{ref} does not exist (any more)") from None

    async def get_states(self, refs: list[InstanceRef]) -> dict[InstanceRef, InstanceState]:
        if not refs:
            return {}
        conn = await self.lv.live()
        names = {ref.name: ref for ref in refs}

        def sample() -> dict[str, dict]:
            doms = []
            for dom in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
                if dom.name() in names:
                    doms.append(dom)
            if not doms:
                return {}
            return {dom.name(): stats for dom, stats in
                    conn.domainListGetStats(doms, USAGE_STATS | libvirt.VIR_DOMAIN_STATS_STATE)}

        found = await self.lv.call(sample, what="reading usage")
        out = {}
        for dom_name, stats in found.items():
            if convert.status_of(int(stats.get("state.state", 0))) is not InstanceStatus.RUNNING:
                continue
            out[names[dom_name]] = state = convert.usage(stats, self._cpu.get(dom_name))
            self._cpu[dom_name] = (state.cpu_usage_ns, state.sampled_at)
        return out

    # -- verbs ---------------------------------------------------------------------------
    async def start(self, ref: InstanceRef) -> None:
        dom = await self.lv.domain(ref)
        if await self.lv.status(dom) is InstanceStatus.FROZEN:
            raise Conflict(f"{ref} is paused: resume it instead")
        await self.lv.call(dom.create, what=f"starting {ref.name}", within=max(self.timeout, 60))

    async def stop(self, ref: InstanceRef, *, force: bool = False, timeout: int = 30) -> None:
        dom = await self.lv.domain(ref)
        if force:
            if await self.lv.status(dom) is not InstanceStatus.STOPPED:
                await self.lv.call(dom.destroy, what=f"forcing {ref.name} off", within=60)
            return
        queue = self.lv.subscribe()
        try:
            status = await self.lv.status(dom)
            if status is InstanceStatus.STOPPED:
                return
            if status is InstanceStatus.FROZEN:
                raise Conflict(f"{ref} is paused: a paused guest cannot shut down. Resume "
                               "it first, or force it off.")
            await self.lv.call(dom.shutdownFlags, libvirt.VIR_DOMAIN_SHUTDOWN_ACPI_POWER_BTN,
                               what=f"shutting {ref.name} down")
            if not await self._stopped_within(dom, ref, queue, timeout):
                raise StopTimedOut(f"{ref} did not shut down within {timeout} s (the guest "
                                   "ignored the ACPI power button). It can be forced off.")
        finally:
            self.lv.unsubscribe(queue)

    async def _stopped_within(self, dom: libvirt.virDomain, ref: InstanceRef,
                              queue: asyncio.Queue, timeout: float) -> bool:
        """Whether the domain stopped within ``timeout`` s: its lifecycle events, and its
        state read once more at the end (an event missed while the connection dropped)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (left := deadline - loop.time()) > 0:
            try:
                item = await asyncio.wait_for(queue.get(), left)
            except asyncio.TimeoutError:
                break
            if item is CLOSED:
                break
            if getattr(item, "ref", None) == ref and item.action == "instance-stopped":
                return True
        return await self.lv.status(dom) is InstanceStatus.STOPPED

    async def restart(self, ref: InstanceRef, *, force: bool = False, timeout: int = 30) -> None:
        dom = await self.lv.domain(ref)
        if await self.lv.status(dom) is not InstanceStatus.RUNNING:
            raise Conflict(f"{ref} is not running")
        if force:
            await self.lv.call(dom.reset, 0, what=f"resetting {ref.name}")
        else:
            await self.lv.call(dom.reboot, libvirt.VIR_DOMAIN_REBOOT_ACPI_POWER_BTN,
                               what=f"rebooting {ref.name}")

    async def freeze(self, ref: InstanceRef) -> None:
        dom = await self.lv.domain(ref)
        await self.lv.call(dom.suspend, what=f"pausing {ref.name}")

    async def unfreeze(self, ref: InstanceRef) -> None:
        dom = await self.lv.domain(ref)
        await self.lv.call(dom.resume, what=f"resuming {ref.name}")

    async def delete(self, ref: InstanceRef, *, force: bool = False) -> None:
        """Undefine the domain; its disks stay where they are."""
        dom = await self.lv.domain(ref)
        if await self.lv.status(dom) is not InstanceStatus.STOPPED:
            if not force:
                raise Conflict(f"{ref} is running: stop it first (or delete with force)")
            await self.lv.call(dom.destroy, what=f"forcing {ref.name} off", within=60)
        persistent = await self.lv.call(dom.isPersistent, what="reading the domain")
        if persistent:
            await self.lv.call(dom.undefineFlags, UNDEFINE, what=f"undefining {ref.name}")
        self._cpu.pop(ref.name, None)


def _persistent(dom: libvirt.virDomain) -> bool:
    try:
        return bool(dom.isPersistent())
    except libvirt.libvirtError:
        return True


def _snapshots(dom: libvirt.virDomain) -> int | None:
    """How many snapshots the domain has (a row read after a snapshot verb shows it)."""
    try:
        return dom.snapshotNum(0)
    except libvirt.libvirtError:
        return None


def _dotted(version: int) -> str:
    return f"{version // 1000000}.{version // 1000 % 1000}.{version % 1000}"
