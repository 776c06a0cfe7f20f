"""``clone_instance`` of a libvirt remote: a shut-off domain copied to a new domain with a
new UUID, new MAC addresses and its own copies of its disks.

- Each writable disk must be a volume of a libvirt storage pool (``disks.py``): it is
  copied by the daemon into the same pool (``virStorageVolCreateXMLFrom``), so a clone
  works over ``qemu+ssh://`` as on this machine. A disk outside any pool is refused in
  words before anything is made. Read-only and shareable disks (an installer ISO) are
  shared, not copied.
- The copy's volumes are named after the clone: the source's volume name with the
  domain's name replaced (``web.qcow2`` → ``web-copy.qcow2``), or ``<clone>-<target>``.
  A name taken in the pool is refused before anything is made.
- libvirt's copy holds the volume's current state only (for qcow2, ``qemu-img convert``):
  internal snapshots are not carried, so ``with_snapshots`` of a domain that has
  snapshots is refused in words (clone it without them); a source without snapshots
  clones either way. No linked clones (``LINKED_CLONE`` is not declared).
- UEFI variables are not copied: the clone's NVRAM file is made afresh from the
  firmware's template at its first start.
- Only a shut-off, persistent domain is cloned. On any failure what was made (the copied
  volumes, the defined domain) is removed again: nothing half made is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Callable

import libvirt

from ..base import Backend
from ..errors import Conflict, InvalidInput, Unsupported
from ..models import Instance, InstanceRef, InstanceStatus
from .connection import Connection
from .convert import status_of
from .disks import Disk, disks_of, volume_of
from .names import name_problem

COPYING = 6 * 3600
"""Seconds a clone may take (the daemon copies every disk)."""
XML_FLAGS = libvirt.VIR_DOMAIN_XML_INACTIVE | libvirt.VIR_DOMAIN_XML_SECURE


@dataclass
class Copy:
    """One disk to copy: its source volume and the new volume's name in the same pool."""

    disk: Disk
    volume: libvirt.virStorageVol
    pool: libvirt.virStoragePool
    name: str
    made: libvirt.virStorageVol | None = None


def new_volume_name(volume: str, old: str, new: str, dev: str) -> str:
    if old in volume:
        return volume.replace(old, new, 1)
    stem, dot, ext = volume.rpartition(".")
    return f"{new}-{dev}.{ext}" if dot and stem else f"{new}-{dev}"


def volume_xml(name: str, capacity: int, fmt: str) -> str:
    root = ET.Element("volume")
    ET.SubElement(root, "name").text = name
    ET.SubElement(root, "capacity", unit="bytes").text = str(capacity)
    target = ET.SubElement(root, "target")
    if fmt:
        ET.SubElement(target, "format", type=fmt)
        if fmt == "qcow2":
            ET.SubElement(target, "compat").text = "1.1"
    return ET.tostring(root, encoding="unicode")


def clone_xml(xml: str, new_name: str, copies: list[Copy]) -> str:
    """The source's saved definition as the clone's: its name, no UUID (libvirt makes
    one), no MAC addresses (new ones), its disks on the copied volumes, no NVRAM path."""
    root = ET.fromstring(xml)
    root.find("name").text = new_name  # type: ignore[union-attr]
    for drop in root.findall("uuid"):
        root.remove(drop)
    for iface in root.iterfind("devices/interface"):
        for mac in iface.findall("mac"):
            iface.remove(mac)
    nvram = root.find("os/nvram")
    if nvram is not None:
        nvram.text = None
    by_dev = {c.disk.dev: c for c in copies}
    for disk in root.iterfind("devices/disk"):
        target, source = disk.find("target"), disk.find("source")
        copy = by_dev.get(target.get("dev", "") if target is not None else "")
        if copy is None or source is None or copy.made is None:
            continue
        if copy.disk.kind == "volume":
            source.set("volume", copy.name)
        elif copy.disk.kind == "block":
            source.set("dev", copy.made.path())
        else:
            source.set("file", copy.made.path())
    return ET.tostring(root, encoding="unicode")


class Clone(Backend):
    """``clone_instance`` of a libvirt remote."""

    lv: Connection

    async def clone_instance(self, ref: InstanceRef, new_name: str, *,
                             with_snapshots: bool = True, linked: bool = False,
                             progress: Callable[[str], None] | None = None) -> Instance:
        """Copy the shut-off domain ``ref`` to ``new_name`` (see the module docstring).

        Raises:
            Conflict: it is not shut off or is transient, or a name is taken.
            Unsupported: ``linked``; ``with_snapshots`` for a domain with snapshots; a
                writable disk outside any storage pool.
            InvalidInput: a name libvirt cannot take.
        """
        if linked:
            raise self._unsupported("make linked clones (it copies the disks)")
        problem = name_problem(new_name)
        if problem:
            raise InvalidInput(problem)
        dom = await self.lv.domain(ref)
        conn = await self.lv.live()
        xml, copies = await self.lv.call(self._plan, conn, dom, ref, new_name, with_snapshots,
                                         what=f"reading {ref.name}")
        loop = asyncio.get_running_loop()

        def say(text: str) -> None:
            if progress is not None:
                loop.call_soon_threadsafe(progress, text)

        def make() -> None:
            defined = None
            try:
                for n, copy in enumerate(copies, 1):
                    say(f"copying {copy.disk.dev} ({n} of {len(copies)}) to {copy.name}…")
                    capacity = copy.volume.info()[1]
                    copy.made = copy.pool.createXMLFrom(
                        volume_xml(copy.name, capacity, copy.disk.fmt), copy.volume, 0)
                defined = conn.defineXML(clone_xml(xml, new_name, copies))
            except BaseException:
                if defined is not None:
                    with contextlib.suppress(libvirt.libvirtError):
                        defined.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
                for copy in copies:
                    if copy.made is not None:
                        with contextlib.suppress(libvirt.libvirtError):
                            copy.made.delete(0)
                raise

        await self.lv.call(make, what=f"cloning {ref.name} to {new_name}", within=COPYING)
        say("cloned")
        return await self.get_instance(InstanceRef(ref.remote, new_name, ref.project))

    @staticmethod
    def _plan(conn: libvirt.virConnect, dom: libvirt.virDomain, ref: InstanceRef,
              new_name: str, with_snapshots: bool) -> tuple[str, list[Copy]]:
        """The source's saved XML and the disks to copy, every check made (blocks)."""
        try:
            conn.lookupByName(new_name)
            raise Conflict(f"A domain named '{new_name}' already exists on {ref.remote}.")
        except libvirt.libvirtError as e:
            if e.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
                raise
        status = status_of(dom.state()[0])
        if status is not InstanceStatus.STOPPED:
            raise Conflict(f"{ref} is {status.value}: only a shut-off domain is cloned (its "
                           f"disks change while it runs). Shut it down first.")
        if not dom.isPersistent():
            raise Conflict(f"{ref} is transient: it has no saved definition to clone.")
        snapshots = dom.snapshotNum(0)
        if with_snapshots and snapshots:
            raise Unsupported(f"{ref} has {snapshots} snapshot(s): libvirt copies a disk's "
                              f"current state only, so its clone cannot take them. Clone "
                              f"it without its snapshots.")
        xml = dom.XMLDesc(XML_FLAGS)
        copies: list[Copy] = []
        outside = []
        for disk in disks_of(xml):
            if not disk.writable:
                continue
            volume = volume_of(conn, disk)
            if volume is None:
                outside.append(f"{disk.dev} ({disk.source or disk.kind})")
                continue
            name = new_volume_name(volume.name(), ref.name, new_name, disk.dev)
            copies.append(Copy(disk, volume, volume.storagePoolLookupByVolume(), name))
        if outside:
            raise Unsupported(
                f"{ref} has a disk that is not a volume of a libvirt storage pool: "
                f"{', '.join(outside)}. corral copies disks with libvirt's storage API only "
                f"(it works over SSH too); add its directory as a pool (virsh "
                f"pool-define-as NAME dir --target DIR) first.")
        taken = []
        names = [(c.pool.name(), c.name) for c in copies]
        for copy in copies:
            try:
                copy.pool.storageVolLookupByName(copy.name)
                taken.append(f"{copy.pool.name()}/{copy.name}")
            except libvirt.libvirtError as e:
                if e.get_error_code() != libvirt.VIR_ERR_NO_STORAGE_VOL:
                    raise
        if taken or len(set(names)) != len(names):
            raise Conflict(f"The volume names for the clone's disks are taken: "
                           f"{', '.join(taken) or 'two disks would share one'}. Choose "
                           f"another name.")
        return xml, copies
