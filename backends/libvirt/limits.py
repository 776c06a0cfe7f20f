"""Resource limits of libvirt domains: vCPUs (``setVcpusFlags``) and memory
(``setMemoryFlags``), each saying before it is applied whether it applies live or at the
next start, as the QEMU backend's do (``backends/qemu/limits.py``).

- ``cpus``: the vCPUs the domain has, from 1 to its maximum. While it runs, more are added
  live (hot-plugged) and saved; fewer are saved for the next start (taking a vCPU away
  needs the guest's help).
- ``cpus_max``: the most vCPUs it can have (its ``<vcpu>``); at the next start.
- ``memory``: the balloon's target, up to the memory the domain has: live while it runs
  and has a balloon device (the guest needs its virtio-balloon driver), else saved for the
  next start.
- ``memory_max``: the domain's memory (its ``<memory>``); at the next start.
- ``disk``: the size of its first writable disk, grow only (a smaller size is refused in
  words): while it runs at once (``virDomainBlockResize``: the guest sees the bigger disk
  and grows its partition itself), shut off through the storage API
  (``virStorageVolResize``) when the disk is a volume of a libvirt pool (see
  ``disks.py``), else refused in words. It cannot be undone, so it is the last step.

A value over a maximum is refused in words (raise the maximum first: it applies at the
next start), as are malformed ones; everything is checked before anything is changed,
and what was changed is put back when a later step fails. Values saved but not in effect
until the next start are shown as ``pending``. A transient domain has no saved
definition: only what applies live can change.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Callable

import libvirt

from ..base import Backend
from ..errors import InvalidInput, Unsupported
from ..models import InstanceRef, LimitField
from ..units import format_size, is_whole, libvirt_bytes, parse_size
from .connection import Connection
from .disks import disks_of, volume_of

KiB = 1024
MIN_MEMORY = 32 << 10
"""KiB: the least memory accepted (QEMU's backend's bound too)."""
LIVE, CONFIG = libvirt.VIR_DOMAIN_AFFECT_LIVE, libvirt.VIR_DOMAIN_AFFECT_CONFIG
RESTART_ONLY = ("cpus_max", "memory_max")


@dataclass(frozen=True)
class Figures:
    """vCPUs and memory (KiB) of one definition: the running domain's or the saved one."""

    cpus: int
    cpus_max: int
    memory: int
    memory_max: int
    balloon: bool


@dataclass(frozen=True)
class Shape:
    active: bool
    persistent: bool
    now: Figures
    """The running domain's (the saved one's when it is shut off)."""
    saved: Figures
    """The saved definition's (the running one's for a transient domain)."""
    host_cpus: int | None
    """The most vCPUs this machine type takes (None: unknown)."""
    disk: DiskSize | None = None
    """Its first writable disk (None: it has none)."""


@dataclass(frozen=True)
class DiskSize:
    dev: str
    size: int
    """Bytes (the guest's view: the virtual size); 0 when libvirt cannot tell."""
    volume: libvirt.virStorageVol | None
    """The pool volume it is (None: not a pool's)."""


def _disk(conn: libvirt.virConnect, dom: libvirt.virDomain, xml: str) -> DiskSize | None:
    """The first writable disk and its size (blocks)."""
    first = next((d for d in disks_of(xml) if d.writable), None)
    if first is None:
        return None
    volume = volume_of(conn, first)
    try:
        size = int(dom.blockInfo(first.dev, 0)[0])
    except libvirt.libvirtError:
        size = int(volume.info()[1]) if volume is not None else 0
    return DiskSize(first.dev, size, volume)


def _kib(element: ET.Element | None) -> int:
    if element is None:
        return 0
    return (libvirt_bytes(element.text or "", element.get("unit")) or 0) // KiB


def figures(xml: str) -> Figures:
    root = ET.fromstring(xml)
    vcpu = root.find("vcpu")
    cpus_max = int((vcpu.text or "1").strip()) if vcpu is not None else 1
    cpus = int(vcpu.get("current", cpus_max)) if vcpu is not None else cpus_max
    memory_max = _kib(root.find("memory"))
    balloon = any(b.get("model", "none") != "none" for b in root.iterfind("devices/memballoon"))
    return Figures(cpus, cpus_max, _kib(root.find("currentMemory")) or memory_max,
                   memory_max, balloon)


def _host_cpus(conn: libvirt.virConnect, xml: str) -> int | None:
    """The machine type's vCPU bound from libvirt's domain capabilities (blocks)."""
    root = ET.fromstring(xml)
    os_type = root.find("os/type")
    try:
        caps = conn.getDomainCapabilities(
            root.findtext("devices/emulator"), os_type.get("arch") if os_type is not None
            else None, os_type.get("machine") if os_type is not None else None,
            root.get("type"), 0)
        found = ET.fromstring(caps).find("vcpu")
        return int(found.get("max", "")) if found is not None else None
    except (libvirt.libvirtError, ValueError, ET.ParseError):
        return None


def _size(kib: int) -> str:
    return format_size(kib * KiB)


class Limits(Backend):
    """``get_limits``, ``set_limits`` of a libvirt remote."""

    lv: Connection

    async def _shape(self, ref: InstanceRef) -> tuple[libvirt.virDomain, Shape]:
        dom = await self.lv.domain(ref)
        conn = await self.lv.live()

        def read() -> Shape:
            active, persistent = bool(dom.isActive()), bool(dom.isPersistent())
            xml = dom.XMLDesc(0)
            saved = dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE) if persistent else xml
            return Shape(active, persistent, figures(xml), figures(saved),
                         _host_cpus(conn, xml), _disk(conn, dom, xml))

        return dom, await self.lv.call(read, what=f"reading the limits of {ref.name}")

    async def get_limits(self, ref: InstanceRef) -> list[LimitField]:
        """vCPUs and memory; while the domain runs, what it has now, and what is saved for
        the next start as ``pending`` when that differs."""
        _dom, s = await self._shape(ref)
        now, saved = s.now, s.saved
        later = "restart" if s.persistent else "unsupported"
        transient = "" if s.persistent else "; a transient domain has no saved definition"

        def pending(current: object, kept: object, text: str) -> str:
            return text if s.active and s.persistent and current != kept else ""

        if s.active:
            cpus_applies = "live" if now.cpus < now.cpus_max else later
            cpus_hint = (f"from 1 to {saved.cpus_max}: up to {now.cpus_max} are added live; "
                         f"fewer apply at the next start{transient}")
            if now.balloon:
                memory_applies = "live"
                memory_hint = (f"the balloon's target, up to {_size(now.memory_max)}; the "
                               f"guest needs its virtio-balloon driver")
            else:
                memory_applies = later
                memory_hint = f"no balloon device: applies at the next start{transient}"
        else:
            cpus_applies, memory_applies = "restart", "restart"
            cpus_hint = f"from 1 to {saved.cpus_max} ('vCPUs (max)')"
            memory_hint = f"up to {_size(saved.memory_max)} ('Memory (max)')"
        host = f" (up to {s.host_cpus} here)" if s.host_cpus else ""
        return [
            LimitField("cpus", "vCPUs", str(now.cpus), cpus_applies, cpus_hint,
                       pending=pending(now.cpus, saved.cpus, str(saved.cpus))),
            LimitField("cpus_max", "vCPUs (max)", str(now.cpus_max), later,
                       f"the most vCPUs it can have{host}; takes effect at the next start"
                       f"{transient}",
                       pending=pending(now.cpus_max, saved.cpus_max, str(saved.cpus_max))),
            LimitField("memory", "Memory (balloon)", _size(now.memory), memory_applies,
                       memory_hint, pending=pending(now.memory, saved.memory,
                                                    _size(saved.memory))),
            LimitField("memory_max", "Memory (max)", _size(now.memory_max), later,
                       f"the domain's memory; takes effect at the next start{transient}",
                       pending=pending(now.memory_max, saved.memory_max,
                                       _size(saved.memory_max))),
            _disk_field(s),
        ]

    async def set_limits(self, ref: InstanceRef, changes: dict[str, str]) -> dict[str, str]:
        """Apply what can change live (vCPU hot-add, the balloon) and save everything for
        the next start; returns ``{key: "live" | "restart"}``. Everything is checked before
        anything is changed.

        Raises:
            InvalidInput: a malformed value, an unknown key, or a value over a maximum.
            Unsupported: a change only the next start could apply, on a transient domain.
        """
        dom, s = await self._shape(ref)
        plan = _plan(ref, changes, s)
        steps, result = _steps(dom, plan, s)

        def apply() -> None:
            undo: list[tuple[Callable[..., object], tuple]] = []
            try:
                for (fn, args), back in steps:
                    fn(*args)
                    undo[:0] = back
            except libvirt.libvirtError:
                for fn, args in undo:
                    try:
                        fn(*args)
                    except libvirt.libvirtError:
                        pass
                raise

        await self.lv.call(apply, what=f"changing the limits of {ref.name}", within=120)
        return result


def _plan(ref: InstanceRef, changes: dict[str, str], s: Shape) -> dict[str, int]:
    """The changes as numbers (vCPUs, KiB), checked against the domain's maximums."""
    plan: dict[str, int] = {}
    for key, raw in changes.items():
        raw = raw.strip()
        if key in ("cpus", "cpus_max"):
            if not is_whole(raw) or int(raw) < 1:
                raise InvalidInput(f"'{raw}' is not a number of vCPUs (a whole number from 1).")
            plan[key] = int(raw)
        elif key == "disk":
            disk = _planned_disk(ref, raw, s)
            if disk is not None:
                plan[key] = disk
        elif key in ("memory", "memory_max"):
            try:
                size = parse_size(raw, default_unit="MiB")
            except ValueError as e:
                raise InvalidInput(str(e)) from None
            if size < MIN_MEMORY * KiB:
                raise InvalidInput(f"Memory '{raw}' is less than {_size(MIN_MEMORY)}.")
            plan[key] = size // KiB
        else:
            raise InvalidInput(f"Unknown resource '{key}'.")
    if not s.persistent:
        later = [k for k in plan if k in RESTART_ONLY]
        if later:
            raise Unsupported(f"{ref} is transient: it has no saved definition, so "
                              f"{', '.join(later)} (which apply at the next start) cannot "
                              f"change.")
    if s.host_cpus and plan.get("cpus_max", 0) > s.host_cpus:
        raise InvalidInput(f"vCPUs (max) must be from 1 to {s.host_cpus} for this machine.")
    cpus_max = plan.get("cpus_max", s.saved.cpus_max)
    if "cpus" in plan and plan["cpus"] > cpus_max:
        raise InvalidInput(f"vCPUs must be from 1 to {cpus_max}: raise 'vCPUs (max)' first "
                           f"(it applies at the next start).")
    memory_max = plan.get("memory_max", s.saved.memory_max)
    if "memory" in plan and plan["memory"] > memory_max:
        raise InvalidInput(f"The balloon can give at most {_size(memory_max)}: raise "
                           f"'Memory (max)' first (it applies at the next start).")
    if not s.persistent:
        if "cpus" in plan and not s.now.cpus < plan["cpus"] <= s.now.cpus_max:
            raise Unsupported(f"{ref} is transient: vCPUs can only be added live, from "
                              f"{s.now.cpus + 1} to {s.now.cpus_max}.")
        if "memory" in plan and not s.now.balloon:
            raise Unsupported(f"{ref} is transient and has no balloon device: its memory "
                              f"cannot change.")
    return plan


Call = tuple[Callable[..., object], tuple]
Step = tuple[Call, list[Call]]


def _steps(dom: libvirt.virDomain, plan: dict[str, int], s: Shape
           ) -> tuple[list[Step], dict[str, str]]:
    """The libvirt calls that apply ``plan`` (maximums first), each with the calls that
    undo it, and what each key will be: live or at the next start."""
    cfg = CONFIG if s.persistent else 0
    vcpus, memory = dom.setVcpusFlags, dom.setMemoryFlags
    max_cpu, max_mem = libvirt.VIR_DOMAIN_VCPU_MAXIMUM, libvirt.VIR_DOMAIN_MEM_MAXIMUM
    saved = s.saved
    steps: list[Step] = []
    result: dict[str, str] = {}
    if "cpus_max" in plan:
        steps.append(((vcpus, (plan["cpus_max"], max_cpu | CONFIG)),
                      [(vcpus, (saved.cpus_max, max_cpu | CONFIG)),
                       (vcpus, (saved.cpus, CONFIG))]))
        result["cpus_max"] = "restart"
    if "memory_max" in plan:
        steps.append(((memory, (plan["memory_max"], max_mem | CONFIG)),
                      [(memory, (saved.memory_max, max_mem | CONFIG)),
                       (memory, (saved.memory, CONFIG))]))
        result["memory_max"] = "restart"
    if "cpus" in plan:
        live = s.active and s.now.cpus < plan["cpus"] <= s.now.cpus_max
        back = [(vcpus, (saved.cpus, CONFIG))] if cfg else []  # a hot-added vCPU stays
        steps.append(((vcpus, (plan["cpus"], (LIVE if live else 0) | cfg)), back))
        result["cpus"] = "live" if live else "restart"
    if "memory" in plan:
        live = s.active and s.now.balloon and plan["memory"] <= s.now.memory_max
        back = ([(memory, (s.now.memory, LIVE))] if live else []) + \
            ([(memory, (saved.memory, CONFIG))] if cfg else [])
        steps.append(((memory, (plan["memory"], (LIVE if live else 0) | cfg)), back))
        result["memory"] = "live" if live else "restart"
    if "disk" in plan and s.disk is not None:  # last: a disk does not shrink back
        step: Call
        if s.active:
            step = (dom.blockResize, (s.disk.dev, plan["disk"],
                                      libvirt.VIR_DOMAIN_BLOCK_RESIZE_BYTES))
        else:
            assert s.disk.volume is not None
            step = (s.disk.volume.resize, (plan["disk"], 0))
        steps.append((step, []))
        result["disk"] = "live" if s.active else "restart"
    return steps, result


def _disk_field(s: Shape) -> LimitField:
    disk = s.disk
    if disk is None:
        return LimitField("disk", "Disk size", "", "unsupported", "no disk")
    label = f"Disk size ({disk.dev})"
    value = format_size(disk.size) if disk.size else ""
    if s.active:
        return LimitField("disk", label, value, "live",
                          "grow only; the guest then grows its partition")
    if disk.volume is None:
        return LimitField("disk", label, value, "unsupported",
                          "grows while it runs; shut off only when it is a volume of a "
                          "libvirt storage pool")
    return LimitField("disk", label, value, "restart",
                      "grow only; the guest then grows its partition")


def _planned_disk(ref: InstanceRef, raw: str, s: Shape) -> int | None:
    """The new size of the first disk in bytes (None: it has that size already)."""
    try:
        size = parse_size(raw, default_unit="GiB")
    except ValueError as e:
        raise InvalidInput(str(e)) from None
    disk = s.disk
    if disk is None:
        raise InvalidInput(f"{ref} has no disk to resize.")
    if disk.size and size < disk.size:
        raise InvalidInput(f"Disks only grow: give a size of at least "
                           f"{format_size(disk.size)} ({disk.dev} has that now).")
    if size == disk.size:
        return None
    if not s.active and disk.volume is None:
        raise Unsupported(f"The disk {disk.dev} of {ref} is not a volume of a libvirt "
                          f"storage pool: corral resizes it only while {ref} runs (or add "
                          f"its directory as a pool).")
    return size
