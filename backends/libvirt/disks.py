"""A libvirt domain's disks and the storage pool volumes behind them, and deleting a domain
with its volumes (``owned_storage``, ``delete_with_storage``: ``backends.deletion``).

- A disk is the pool's when libvirt's storage API knows it: a ``<disk type='volume'>``
  (pool and volume named), or a file or block device some active pool holds
  (``storageVolLookupByPath``). Only such volumes are ever copied, resized or deleted by
  corral: it works the same over ``qemu+ssh://`` (the daemon does the work) and never
  touches a path libvirt does not manage.
- ``owned_storage`` lists the volumes of the domain's writable disks that no other domain
  uses (its saved or running definition): read-only and shareable disks (an installer
  ISO, a disk shared by a cluster) are never listed. Disks outside any pool are not
  listed either (``delete`` keeps them, as before).
- ``delete_with_storage`` deletes the domain (as ``delete``) and then exactly the volumes
  the user confirmed; one that is no longer the domain's own refuses the verb before
  anything is deleted. A volume that cannot be deleted afterwards is named in the error.

Every libvirt call runs in the remote's thread (``self.lv``); the helpers here block and
are called inside those calls.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

import libvirt

from ..base import Backend
from ..errors import Conflict, OperationFailed
from ..models import InstanceRef
from .connection import Connection

WRITABLE = ("disk", "lun")


@dataclass(frozen=True)
class Disk:
    """One ``<disk>`` of a domain's XML."""

    dev: str
    """Its target (``vda``)."""
    kind: str
    """libvirt's disk type: ``file``, ``block``, ``volume``, ``network``, …"""
    source: str
    """The file or device path; ``pool/volume`` for a volume disk; "" for none."""
    fmt: str
    writable: bool
    """A disk or LUN, neither read-only nor shareable: the domain's own data."""


def disks_of(xml: str) -> list[Disk]:
    out = []
    for disk in ET.fromstring(xml).iterfind("devices/disk"):
        target, source, driver = disk.find("target"), disk.find("source"), disk.find("driver")
        kind = disk.get("type", "file")
        src = ""
        if source is not None:
            if kind == "volume":
                src = f"{source.get('pool', '')}/{source.get('volume', '')}"
            else:
                src = source.get("file") or source.get("dev") or ""
        writable = (disk.get("device", "disk") in WRITABLE and disk.find("readonly") is None
                    and disk.find("shareable") is None)
        out.append(Disk(target.get("dev", "?") if target is not None else "?", kind, src,
                        driver.get("type", "") if driver is not None else "", writable))
    return out


def volume_of(conn: libvirt.virConnect, disk: Disk) -> libvirt.virStorageVol | None:
    """The pool volume behind ``disk``, or None when no active pool holds it (blocks)."""
    if not disk.source:
        return None
    try:
        if disk.kind == "volume":
            pool, _, name = disk.source.partition("/")
            return conn.storagePoolLookupByName(pool).storageVolLookupByName(name)
        if disk.kind in ("file", "block"):
            return conn.storageVolLookupByPath(disk.source)
    except libvirt.libvirtError as e:
        if e.get_error_code() in (libvirt.VIR_ERR_NO_STORAGE_VOL,
                                  libvirt.VIR_ERR_NO_STORAGE_POOL,
                                  libvirt.VIR_ERR_OPERATION_INVALID):  # pool not active
            return None
        raise
    return None


def volumes_used_by_others(conn: libvirt.virConnect, name: str) -> set[str]:
    """The paths of every pool volume other domains' disks use (saved and running
    definitions; blocks)."""
    used: set[str] = set()
    for dom in conn.listAllDomains(0):
        if dom.name() == name:
            continue
        xmls = [dom.XMLDesc(0)]
        if dom.isPersistent() and dom.isActive():
            xmls.append(dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE))
        for xml in xmls:
            for disk in disks_of(xml):
                if disk.kind in ("file", "block"):
                    used.add(disk.source)
                if (vol := volume_of(conn, disk)) is not None:
                    used.add(vol.path())
    return used


def owned_volumes(conn: libvirt.virConnect, dom: libvirt.virDomain
                  ) -> dict[str, libvirt.virStorageVol]:
    """``{path: volume}`` of the pool volumes only this domain's writable disks use
    (blocks)."""
    xmls = [dom.XMLDesc(0)]
    if dom.isPersistent() and dom.isActive():
        xmls.append(dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE))
    mine: dict[str, libvirt.virStorageVol] = {}
    for xml in xmls:
        for disk in disks_of(xml):
            if disk.writable and (vol := volume_of(conn, disk)) is not None:
                mine.setdefault(vol.path(), vol)
    others = volumes_used_by_others(conn, dom.name())
    return {path: vol for path, vol in mine.items() if path not in others}


class OwnedStorage(Backend):
    """``owned_storage`` and ``delete_with_storage`` of a libvirt remote."""

    lv: Connection

    async def owned_storage(self, ref: InstanceRef) -> list[str]:
        """The paths of the pool volumes only this domain uses (see the module)."""
        dom = await self.lv.domain(ref)
        conn = await self.lv.live()
        found = await self.lv.call(lambda: sorted(owned_volumes(conn, dom)),
                                   what=f"reading the disks of {ref.name}")
        return list(found)

    async def delete_with_storage(self, ref: InstanceRef, storage: list[str], *,
                                  force: bool = False) -> None:
        dom = await self.lv.domain(ref)
        conn = await self.lv.live()
        owned = await self.lv.call(owned_volumes, conn, dom,
                                   what=f"reading the disks of {ref.name}")
        strangers = [p for p in storage if p not in owned]
        if strangers:
            raise Conflict(f"{', '.join(strangers)} {'is' if len(strangers) == 1 else 'are'} "
                           f"not (any more) a volume only {ref} uses: nothing was deleted. "
                           f"Look at its disks again.")
        await self.delete(ref, force=force)

        def remove() -> list[str]:
            left = []
            for path in storage:
                try:
                    owned[path].delete(0)
                except libvirt.libvirtError as e:
                    left.append(f"{path} ({(e.get_error_message() or str(e)).strip()})")
            return left

        left = await self.lv.call(remove, what=f"deleting the volumes of {ref.name}",
                                  within=max(self.timeout, 120))
        if left:
            raise OperationFailed(f"{ref} is deleted, but not all of its volumes: "
                                  f"{'; '.join(left)}.")
