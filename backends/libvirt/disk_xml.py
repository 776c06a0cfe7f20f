"""A libvirt domain's ``<disk>`` elements read from its XML, and the storage pool volume
behind one (libvirt's storage API knows it: a ``<disk type='volume'>``, or a file or block
device some active pool holds). Blocking helpers: they run in the remote's thread."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

import libvirt

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


def disk_of(disk: ET.Element) -> Disk:
    """One ``<disk>`` element."""
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
    return Disk(target.get("dev", "?") if target is not None else "?", kind, src,
                driver.get("type", "") if driver is not None else "", writable)


def disks_of(xml: str) -> list[Disk]:
    return [disk_of(disk) for disk in ET.fromstring(xml).iterfind("devices/disk")]


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
