"""``export_instance`` and ``import_instance`` of a libvirt remote: a shut-off domain as one
tar archive (its saved XML, its disk files, a manifest: ``archived.py``), and a new domain
made from such an archive.

- Everything goes through libvirt, so it works over ``qemu+ssh://`` as on this machine:
  a disk that is a storage pool volume is read with ``virStorageVolDownload`` and written
  with ``storageVolCreateXML`` + ``virStorageVolUpload`` (streams). A disk outside any
  pool is read as a file on a local URI only; over SSH it is refused in words.
- The transfers run on a connection of their own in a worker thread
  (:func:`backends.work.in_thread`: cancellable, progress in bytes): on the remote's one
  thread they would hold every listing behind them.
- Export: only a shut-off domain (a paused one's QEMU still holds writes of its disks that
  it has not flushed). Its internal snapshots are inside its qcow2 files; libvirt's
  metadata of them (``snapshotListNames``/``getXMLDesc``) goes along ``with_snapshots``
  and is redefined on import (``REDEFINE``, the current one ``CURRENT``). Without them, a
  domain that has snapshots is refused in words (its qcow2 files would still hold them:
  clone it without its snapshots and export the clone). Read-only drives (cdrom, floppy) are written ejected: the ISO is the
  old host's. What the import would refuse (a host device, …) is refused at export
  already. Written to ``path + ".part"`` and renamed when complete; nothing is left on
  failure or cancel.
- Import: the archive is read once by the one archive reader (:mod:`backends.archive`,
  :class:`~.archived.DomainArchive`) into a private directory; the XML is checked
  (:func:`~.archived.checked_domain`), each disk's header read by corral
  (:func:`backends.qemu.image_headers.read_header`, the image gate's reader): a qcow2 that
  names a backing or data file, is encrypted or damaged is refused before anything is
  uploaded. Then each disk becomes a new volume ``<name>-<target>.<format>`` in the chosen
  pool (``default`` when none is given), and the domain is defined with the new name, a
  new UUID and new MACs, on those volumes. Any failure or cancel deletes the uploaded
  volumes and undefines the domain: nothing half made is left on the daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import os
import shutil
import stat
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Callable

import libvirt

from ..archive import ArchiveRefused, read_archive
from ..base import Backend
from ..errors import BackendError, Conflict, InvalidInput, OperationFailed, Unsupported
from ..models import Instance, InstanceRef, InstanceStatus
from ..paths import export_target, private_file, publish_export
from ..qemu.files import owner_alive, owner_token
from ..qemu.image_headers import read_header
from ..work import Worker, in_thread
from .archived import (MANIFEST, TARGET_RE, XML, ArchivedDisk, Checked, CheckedSnapshot,
                       DomainArchive, checked_domain, checked_snapshot, host_file_problems,
                       host_files_of, manifest_json, read_manifest)
from .connection import Connection
from .convert import status_of
from .disks import Disk, volume_of
from .names import name_problem
from .streams import (CHUNK, FileReader, SparseFile, Transfer, download, on_connection,
                      upload, volume_xml)
from .uri import host_of, is_remote

INACTIVE = libvirt.VIR_DOMAIN_XML_INACTIVE


def _lookup_free(conn: libvirt.virConnect, name: str, where: str) -> None:
    try:
        conn.lookupByName(name)
    except libvirt.libvirtError as e:
        if e.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
            return
        raise
    raise Conflict(f"A domain named '{name}' already exists on {where}.")


Planned = tuple[ArchivedDisk, libvirt.virStorageVol | str, int]
"""A disk to export: its entry in the archive, its pool volume or local path, its bytes."""


def _export_plan(conn: libvirt.virConnect, dom: libvirt.virDomain, ref: InstanceRef,
                 local: bool) -> tuple[bytes, list[Planned]]:
    """The XML to archive and each disk: (its entry, its volume or local path, bytes)."""
    if status_of(dom.state()[0]) is not InstanceStatus.STOPPED or not dom.isPersistent():
        raise Conflict(f"{ref} is not a shut-off, defined domain any more.")
    root = ET.fromstring(dom.XMLDesc(INACTIVE))
    plan: list[Planned] = []
    problems: list[str] = []
    _eject(root)
    for el in root.iterfind("devices/disk"):
        device, source, target = el.get("device", "disk"), el.find("source"), el.find("target")
        dev = target.get("dev", "?") if target is not None else "?"
        if device in ("cdrom", "floppy"):
            continue
        driver = el.find("driver")
        fmt = driver.get("type", "raw") if driver is not None else "raw"
        kind = el.get("type", "file")
        src = "" if source is None else (
            f"{source.get('pool', '')}/{source.get('volume', '')}" if kind == "volume"
            else source.get("file") or source.get("dev") or "")
        if device != "disk" or fmt not in ("qcow2", "raw") or not TARGET_RE.match(dev):
            problems.append(f"{dev} (a {device} of format {fmt}: corral exports qcow2 and "
                            f"raw disks)")
            continue
        vol = volume_of(conn, Disk(dev, kind, src, fmt, True))
        member = ArchivedDisk(dev, f"disk-{dev}.{fmt}", fmt)
        if vol is not None:
            if fmt == "qcow2" and "<backingStore>" in vol.XMLDesc(0).replace(
                    "<backingStore/>", ""):
                problems.append(f"{dev} (a qcow2 overlay: its backing file would not be in "
                                f"the archive; clone the domain, which flattens it)")
                continue
            size = vol.infoFlags(libvirt.VIR_STORAGE_VOL_GET_PHYSICAL)[2]
            plan.append((member, vol, size))
        elif local and kind == "file" and src:
            header = read_header(src, fmt)
            if header.problem or header.backing or header.data_file:
                problems.append(f"{dev} ({src} {header.problem or 'names another file'})")
                continue
            plan.append((member, src, os.path.getsize(src)))
        else:
            problems.append(f"{dev} ({src or kind}: not a volume of a libvirt storage pool; "
                            f"corral reads a remote host's disks through libvirt's storage "
                            f"API only: add its directory as a pool, virsh pool-define-as "
                            f"NAME dir --target DIR)")
    if problems:
        raise Unsupported(f"{ref} cannot be exported: {'; '.join(problems)}.")
    xml = ET.tostring(root, encoding="unicode").encode()
    try:  # what an import would refuse anywhere, refused now (host files depend on it)
        checked_domain(xml, {d.target for d, _, _ in plan})
    except ArchiveRefused as e:
        raise Unsupported(f"{ref} cannot be exported: corral's import would refuse it: "
                          f"{e}.") from None
    return xml, plan


def _eject(domain: ET.Element) -> None:
    """Its cdrom and floppy drives empty: the media are the old host's files."""
    for el in domain.iterfind("devices/disk"):
        if el.get("device") in ("cdrom", "floppy"):
            for source in el.findall("source"):
                el.remove(source)


def _snapshots(dom: libvirt.virDomain, ref: InstanceRef, targets: set[str]
               ) -> tuple[list[bytes], int]:
    """Each snapshot's XML, parents first, and the index of the current one (-1: none)."""
    found = {snap.getName(): snap for snap in dom.listAllSnapshots(0)}
    parents: dict[str, str] = {}
    for name, snap in found.items():
        try:
            parents[name] = snap.getParent(0).getName()
        except libvirt.libvirtError:
            parents[name] = ""
    order: list[str] = []
    while len(order) < len(found):
        ready = sorted(n for n in found if n not in order and (not parents[n] or
                                                               parents[n] in order))
        if not ready:
            raise Unsupported(f"The snapshots of {ref} do not form a tree libvirt can "
                              f"redefine.")
        order += ready
    current = dom.snapshotCurrent(0).getName() if dom.hasCurrentSnapshot(0) else ""
    xmls = []
    for n in order:
        root = ET.fromstring(found[n].getXMLDesc(0))
        for inner in root.findall("domain") + root.findall("inactiveDomain"):
            _eject(inner)
        xmls.append(ET.tostring(root, encoding="unicode").encode())
    for n, text in zip(order, xmls):
        try:
            checked_snapshot(text, f"snapshot {n}", targets)
        except ArchiveRefused as e:
            raise Unsupported(f"{ref} cannot be exported with its snapshots: corral's import "
                              f"would refuse it: {e}.") from None
    return xmls, order.index(current) if current else -1


def _export_blocking(worker: Worker, conn: libvirt.virConnect, ref: InstanceRef, part: str,
                     compress: bool, local: bool, with_snapshots: bool) -> None:
    dom = conn.lookupByName(ref.name)
    xml, plan = _export_plan(conn, dom, ref, local)
    snaps, current = _snapshots(dom, ref, {d.target for d, _, _ in plan}) \
        if with_snapshots else ([], -1)
    names = [f"snapshot-{i:03d}.xml" for i in range(1, len(snaps) + 1)]
    manifest = manifest_json(ref.name, [d for d, _, _ in plan], names,
                             names[current] if current >= 0 else "")
    transfer = Transfer(worker, sum(size for _, _, size in plan))
    with private_file(part) as raw:
        sparse = SparseFile(raw)  # a disk's holes stay holes in the archive
        with tarfile.open(fileobj=sparse, mode="w:gz" if compress else "w",
                          format=tarfile.PAX_FORMAT) as tar:
            # (16 KiB by default: a round trip each); typeshed leaves out this undocumented
            # attribute of TarFile (its constructor's copybufsize)
            tar.copybufsize = CHUNK  # type: ignore[attr-defined]
            for name, data in ((MANIFEST, manifest), (XML, xml), *zip(names, snaps)):
                tar.addfile(_info(name, len(data)), io.BytesIO(data))
            for disk, source, size in plan:
                label = f"exporting {disk.target}"
                if isinstance(source, str):
                    with open(source, "rb") as f:
                        tar.addfile(_info(disk.member, size), FileReader(f, transfer, label))
                    continue
                download(conn, source, size, transfer, label,
                         functools.partial(tar.addfile, _info(disk.member, size)))
        sparse.end()
        raw.flush()
        os.fsync(raw.fileno())


def _info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, int(time.time())
    return info


def _import_blocking(worker: Worker, conn: libvirt.virConnect, name: str, pool_name: str,
                     where: str, scratch: Path, disks: list[tuple[ArchivedDisk, int]],
                     checked: Checked, snaps: list[tuple[CheckedSnapshot, bool]]) -> None:
    made: list[libvirt.virStorageVol] = []
    defined = None
    try:
        _lookup_free(conn, name, where)
        try:
            pool = conn.storagePoolLookupByName(pool_name)
        except libvirt.libvirtError:
            pools = ", ".join(sorted(conn.listStoragePools() + conn.listDefinedStoragePools()))
            raise InvalidInput(f"{where} has no storage pool '{pool_name}' (its pools: "
                               f"{pools or 'none'}). Choose one to import the disks into.") \
                from None
        if not pool.isActive():
            raise InvalidInput(f"The storage pool '{pool_name}' of {where} is not active.")
        used: set[str] = set()
        for other in conn.listAllDomains(0):
            used |= host_files_of(other.XMLDesc(INACTIVE))
        refused = host_file_problems(checked, used) + [
            p for snap, _ in snaps for c in snap.domains for p in host_file_problems(c, used)]
        if refused:
            raise InvalidInput(f"The archive names files of {where} that no domain there uses "
                               f"(a domain reading them could hand them to its guest): "
                               f"{', '.join(refused)}. corral imports it only where a domain "
                               f"already boots from the same files.")
        pool.refresh(0)
        names = {d.target: f"{name}-{d.target}.{d.format}" for d, _ in disks}
        taken = []
        for vol_name in names.values():
            with contextlib.suppress(libvirt.libvirtError):
                pool.storageVolLookupByName(vol_name)
                taken.append(vol_name)
        if taken:
            raise Conflict(f"The pool '{pool_name}' already has {', '.join(taken)}: choose "
                           f"another name for the domain.")
        transfer = Transfer(worker, sum(size for _, size in disks))
        new: dict[str, tuple[libvirt.virStorageVol, str]] = {}
        for disk, size in disks:
            vol = pool.createXML(volume_xml(names[disk.target], size), 0)
            made.append(vol)
            upload(conn, vol, scratch / disk.member, size, transfer,
                   f"importing {disk.target}")
            new[disk.target] = vol, disk.format
        pool.refresh(0)  # libvirt reads the uploaded files' formats again
        _renamed(checked, name, new)
        worker.check()
        defined = conn.defineXML(ET.tostring(checked.root, encoding="unicode"))
        given = ET.fromstring(defined.XMLDesc(INACTIVE))
        macs = [m.get("address", "") for m in given.iterfind("devices/interface/mac")]
        for snap, current in snaps:
            worker.report(f"redefining snapshot {snap.root.findtext('name')}")
            for inner in snap.domains:
                _renamed(inner, name, new, given.findtext("uuid") or "", macs)
            flags = libvirt.VIR_DOMAIN_SNAPSHOT_CREATE_REDEFINE | (
                libvirt.VIR_DOMAIN_SNAPSHOT_CREATE_CURRENT if current else 0)
            defined.snapshotCreateXML(ET.tostring(snap.root, encoding="unicode"), flags)
    except BaseException:
        if defined is not None:
            with contextlib.suppress(libvirt.libvirtError):
                defined.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM
                                      | libvirt.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA)
        for vol in made:
            with contextlib.suppress(libvirt.libvirtError):
                vol.delete(0)
        raise


def _renamed(checked: Checked, name: str, new: dict[str, tuple[libvirt.virStorageVol, str]],
             uuid: str = "", macs: list[str] | None = None) -> None:
    """A checked definition as the new domain's: its name (and UUID, MACs: a snapshot's
    must be the domain's), its disks on the new volumes."""
    root = checked.root
    found = root.find("name")
    if found is None:
        found = ET.SubElement(root, "name")
    found.text = name
    if uuid:
        ET.SubElement(root, "uuid").text = uuid
    for target, el in checked.disks.items():
        _rewire(el, *new[target])
    for iface, mac in zip(root.iterfind("devices/interface"), macs or []):
        iface.insert(0, ET.Element("mac", address=mac))


def _rewire(el: ET.Element, vol: libvirt.virStorageVol, fmt: str) -> None:
    """Point an imported ``<disk>`` at its new volume, read as the archive's format."""
    block = vol.info()[0] == libvirt.VIR_STORAGE_VOL_BLOCK
    el.set("type", "block" if block else "file")
    for old in el.findall("source"):
        el.remove(old)
    driver = el.find("driver")
    if driver is None:
        driver = ET.Element("driver")
        el.insert(0, driver)
    driver.set("name", "qemu")
    driver.set("type", fmt)
    source = ET.Element("source", {"dev" if block else "file": vol.path()})
    el.insert(list(el).index(driver) + 1, source)


class Export(Backend):
    """``export_instance`` and ``import_instance`` of a libvirt remote."""

    lv: Connection
    backup_extension = ".tar"

    async def export_instance(self, ref: InstanceRef, path: str, *, with_snapshots: bool = True,
                              progress: Callable[[str], None] | None = None) -> int:
        """Write the shut-off domain ``ref`` to a new tar archive at ``path`` (gzip when
        it ends with ``.gz``/``.tgz``); returns its size in bytes (see the module).

        Raises:
            Conflict: it is not shut off.
            Unsupported: it has snapshots; a disk that cannot be read through libvirt, is
                not qcow2 or raw, or is an overlay; something an import refuses.
            InvalidInput: ``path`` exists, or its directory does not.
        """
        say = progress or (lambda _text: None)
        path, part = export_target(path)
        dom = await self.lv.domain(ref)
        status = await self.lv.status(dom)
        if status is not InstanceStatus.STOPPED:
            raise Conflict(f"{ref} is {status.value}: only a shut-off domain is exported (a "
                           f"running or paused one's disks may hold unwritten changes). Shut "
                           f"it down first.")
        count = await self.lv.call(dom.snapshotNum, 0, what="counting snapshots")
        if count and not with_snapshots:
            raise Unsupported(f"{ref} has {count} snapshot(s), which its qcow2 files hold: "
                              f"exported without them they would still be there, unknown to "
                              f"libvirt. Export it with its snapshots, or clone it without "
                              f"them and export the clone.")
        try:
            try:
                await in_thread(on_connection, self.lv.uri, _export_blocking, ref, part,
                                path.endswith((".gz", ".tgz")), not is_remote(self.remote.address),
                                with_snapshots, progress=say, every=0.25)
            except libvirt.libvirtError as e:
                raise self.lv.error(e, f"exporting {ref.name}") from None
            except OSError as e:
                raise OperationFailed(f"Writing {part} failed: {e.strerror or e}.") from e
            publish_export(part, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(part)
            raise
        say("exported")
        return os.path.getsize(path)

    async def import_instance(self, path: str, name: str, *, storage_pool: str = "",
                              progress: Callable[[str], None] | None = None) -> Instance:
        """Define the domain ``name`` from an archive :meth:`export_instance` wrote, its
        disks uploaded into ``storage_pool`` (``default`` when empty). See the module.

        Raises:
            InvalidInput: bad name, no such file or pool, a refused archive (in words).
            Conflict: the name or a volume name is taken.
        """
        say = progress or (lambda _text: None)
        problem = name_problem(name)
        if problem:
            raise InvalidInput(problem)
        path = os.path.abspath(os.path.expanduser(path))
        if not os.path.isfile(path):
            raise InvalidInput(f"{path} does not exist or is not a file.")
        where = host_of(self.remote.address) if is_remote(self.remote.address) \
            else self.remote.name
        conn = await self.lv.live()
        await self.lv.call(_lookup_free, conn, name, where, what="looking for the name")
        scratch = Path(await asyncio.to_thread(_scratch, path))
        try:
            try:
                kept = await in_thread(read_archive, path, scratch, DomainArchive(),
                                       progress=say, every=0.25)
                manifest = read_manifest(kept[MANIFEST], {p.name for p in scratch.iterdir()}
                                         | set(kept))
                disks, targets = manifest.disks, {d.target for d in manifest.disks}
                checked = checked_domain(kept[XML], targets)
                snaps = [(checked_snapshot(kept[m], m, targets), m == manifest.current)
                         for m in manifest.snapshots]
                sized = []
                for disk in disks:
                    say(f"checking {disk.member}…")
                    sized.append((disk, await asyncio.to_thread(_gate, scratch, disk)))
            except ArchiveRefused as e:
                raise InvalidInput(f"{path} was not imported: {e}.") from None
            except OSError as e:
                raise OperationFailed(f"Reading {path} failed: {e.strerror or e}.") from e
            try:
                await in_thread(on_connection, self.lv.uri, _import_blocking, name,
                                storage_pool or "default", where, scratch, sized, checked,
                                snaps, progress=say, every=0.25)
            except libvirt.libvirtError as e:
                raise self.lv.error(e, f"importing {name}") from None
        finally:
            await asyncio.shield(asyncio.to_thread(shutil.rmtree, scratch, True))
        say("imported")
        try:
            return await self.get_instance(InstanceRef(self.remote.name, name))
        except BackendError:
            raise OperationFailed(f"{name} was imported but cannot be read back.") from None


SCRATCH, OWNER = ".corral-libvirt-import-", "owner"


def _scratch(path: str) -> str:
    """A private directory for the archive's files: beside it (room for its disks), else
    in the temporary directory. Its ``owner`` file names this process; one that a killed
    corral left there is removed first (blocks)."""
    for where in (os.path.dirname(path), tempfile.gettempdir()):
        _sweep(Path(where))
        try:
            made = tempfile.mkdtemp(prefix=SCRATCH, dir=where)
        except OSError:
            continue
        try:
            (Path(made) / OWNER).write_text(owner_token())
        except OSError:
            shutil.rmtree(made, ignore_errors=True)
            continue
        return made
    raise OperationFailed(f"There is no room to unpack {path} (beside it, or in "
                          f"{tempfile.gettempdir()}).")


def _sweep(where: Path) -> None:
    """Remove this user's import directories in ``where`` whose corral is gone."""
    for found in where.glob(f"{SCRATCH}*"):
        try:
            st = os.lstat(found)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
                continue
            token = (found / OWNER).read_text()
        except OSError:
            continue
        if not owner_alive(token):
            shutil.rmtree(found, ignore_errors=True)


def _gate(scratch: Path, disk: ArchivedDisk) -> int:
    """The disk file's size, once its header shows it names no other file (blocks)."""
    target = scratch / disk.member
    header = read_header(str(target), disk.format)
    if header.problem:
        raise ArchiveRefused(f"its {disk.member} {header.problem}")
    for what, named in (("backing file", header.backing), ("external data file",
                                                          header.data_file)):
        if named is not None:
            raise ArchiveRefused(f"its {disk.member} names the {what} {named}; an imported "
                                 f"disk must hold all its data itself")
    return target.stat().st_size
