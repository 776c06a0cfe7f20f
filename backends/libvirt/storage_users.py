"""Who in a libvirt daemon depends on a file: the disks of its domains and the backing
chains of its pools' volumes, read before a volume is offered for deletion and again right
before it is deleted (``disks.py``).

A path is used when it is:

- the source of a disk of another domain, in any state: its saved and its running
  definition (a ``<disk type='volume'>`` by its pool's path, in an inactive pool too);
- in the backing chain of such a disk as the running definition shows it (libvirt lists
  a running disk's whole chain, files outside any pool too);
- the backing file of a volume of an active pool (the volume's ``<backingStore><path>``,
  which libvirt reads from a qcow2 header), whether or not a domain uses that volume. The
  pools are refreshed first, so an overlay made beside libvirt (``qemu-img create -b``) is
  seen too. Transitively: ``base ← mid ← top`` keeps ``base`` while ``mid`` exists.

What libvirt cannot tell is not seen: the chain of a shut-off domain's disk that is
outside every active pool (libvirt reads it only at start), and volumes of inactive pools.

The helpers block; they run in the remote's thread.
"""

from __future__ import annotations

import posixpath
import xml.etree.ElementTree as ET

import libvirt

from .disk_xml import Disk, disk_of, volume_of

GONE = (libvirt.VIR_ERR_NO_STORAGE_VOL, libvirt.VIR_ERR_NO_STORAGE_POOL,
        libvirt.VIR_ERR_NO_DOMAIN, libvirt.VIR_ERR_OPERATION_INVALID)
"""libvirt's errors for a volume, pool or domain that went (or a pool gone inactive) while
it was being read: what is gone uses nothing."""


def canonical(conn: libvirt.virConnect, path: str) -> str:
    """``path`` as libvirt names its volume (``/p/./a.qcow2`` is ``/p/a.qcow2``); the
    path itself, normalised, for a file no active pool holds."""
    path = posixpath.normpath(path) if path.startswith("/") else path
    try:
        return conn.storageVolLookupByPath(path).path()
    except libvirt.libvirtError as e:
        if e.get_error_code() in GONE:
            return path
        raise


def disk_path(conn: libvirt.virConnect, disk: Disk) -> str:
    """The file or device ``disk`` stands for, as libvirt names it; "" for none (a
    network disk, an empty CD-ROM). A volume of an inactive pool is its pool's target path
    and the volume's name (for a directory pool, its file)."""
    if (vol := volume_of(conn, disk)) is not None:
        return vol.path()
    if disk.kind in ("file", "block") and disk.source:
        return canonical(conn, disk.source)
    if disk.kind == "volume" and disk.source:
        pool, _, name = disk.source.partition("/")
        try:
            target = ET.fromstring(conn.storagePoolLookupByName(pool).XMLDesc(0)
                                   ).findtext("target/path")
        except libvirt.libvirtError:
            return ""
        return posixpath.join(target, name) if target else ""
    return ""


class Users:
    """Who uses which path in one daemon, read at once (:meth:`read`).

    ``disks``: path → the domain disk that is it (``a disk of web2 (vda)``);
    ``backs``: path → the file whose backing file it is."""

    def __init__(self) -> None:
        self.disks: dict[str, str] = {}
        self.backs: dict[str, str] = {}

    @classmethod
    def read(cls, conn: libvirt.virConnect, *, besides: str) -> Users:
        """Every use of a path in the daemon but by the domain named ``besides`` (its own
        disks' backing chains count: a volume under its own disk is used)."""
        users = cls()
        for dom in conn.listAllDomains(0):
            try:
                users._domain(conn, dom, mine=dom.name() == besides)
            except libvirt.libvirtError as e:
                if e.get_error_code() not in GONE:
                    raise
        for pool in conn.listAllStoragePools(libvirt.VIR_CONNECT_LIST_STORAGE_POOLS_ACTIVE):
            try:
                pool.refresh(0)
            except libvirt.libvirtError:
                pass  # busy (a volume being built) or gone: its last listing, or none
            try:
                volumes = pool.listAllVolumes(0)
            except libvirt.libvirtError as e:
                if e.get_error_code() in GONE:
                    continue
                raise
            for vol in volumes:
                try:
                    backing = ET.fromstring(vol.XMLDesc(0)).findtext("backingStore/path")
                    path = vol.path()
                except libvirt.libvirtError as e:
                    if e.get_error_code() in GONE:
                        continue
                    raise
                if backing:
                    users.backs.setdefault(canonical(conn, backing), path)
        return users

    def _domain(self, conn: libvirt.virConnect, dom: libvirt.virDomain, *,
                mine: bool) -> None:
        xmls = [dom.XMLDesc(0)]
        if dom.isPersistent() and dom.isActive():
            xmls.append(dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE))
        for xml in xmls:
            for element in ET.fromstring(xml).iterfind("devices/disk"):
                disk = disk_of(element)
                path = disk_path(conn, disk)
                if not path:
                    continue
                if not mine:
                    self.disks.setdefault(path, f"a disk of {dom.name()} ({disk.dev})")
                self._chain(conn, element, path)

    def _chain(self, conn: libvirt.virConnect, element: ET.Element, top: str) -> None:
        """The backing chain a running definition lists under a disk (``<backingStore>``
        in ``<backingStore>``)."""
        upper = top
        store = element.find("backingStore")
        while store is not None:
            source = store.find("source")
            lower = (source.get("file") or source.get("dev") or "") if source is not None \
                else ""
            if not lower:
                break
            lower = canonical(conn, lower)
            self.backs.setdefault(lower, upper)
            upper, store = lower, store.find("backingStore")

    def why(self, path: str) -> str | None:
        """What uses ``path`` as a sentence naming it (``base.qcow2 is the backing file of
        web2.qcow2, which is a disk of web2 (vda)``), or None when nothing does."""
        clause = self._clause(path, path, set())
        return f"{_short(path, path)} {clause}" if clause else None

    def _clause(self, path: str, kept: str, seen: set[str]) -> str:
        if path in seen:  # a loop of backing files (libvirt refuses them; be safe)
            return ""
        seen.add(path)
        if path in self.disks:
            return f"is {self.disks[path]}"
        if path not in self.backs:
            return ""
        upper = self.backs[path]
        more = self._clause(upper, kept, seen)
        return f"is the backing file of {_short(upper, kept)}" + (f", which {more}"
                                                                   if more else "")


def _short(path: str, beside: str) -> str:
    """``path``'s file name when it lies in the directory of ``beside`` (the volume kept),
    else the path."""
    same = posixpath.dirname(path) == posixpath.dirname(beside)
    return posixpath.basename(path) if same else path
