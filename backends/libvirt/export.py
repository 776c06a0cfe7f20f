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
  it has not flushed), without snapshots (libvirt keeps their metadata apart from the
  qcow2 files; corral does not carry it: clone the domain without its snapshots and
  export the clone). Read-only drives (cdrom, floppy) are written ejected: the ISO is the
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
import io
import os
import shutil
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
from ..paths import export_target, private_file
from ..qemu.image_headers import read_header
from ..units import human_size
from ..work import Worker, in_thread
from .archived import (MANIFEST, TARGET_RE, XML, ArchivedDisk, DomainArchive, checked_domain,
                       host_file_problems, host_files_of, manifest_json, read_manifest)
from .connection import Connection
from .convert import status_of
from .disks import Disk, volume_of
from .migrate import _open
from .names import name_problem
from .uri import host_of, is_remote

CHUNK = 1 << 20
INACTIVE = libvirt.VIR_DOMAIN_XML_INACTIVE


class Transfer:
    """Bytes moved so far, for progress in words."""

    def __init__(self, worker: Worker, total: int) -> None:
        self.worker, self.total, self.done = worker, total, 0

    def moved(self, what: str, n: int) -> None:
        self.done += n
        self.worker.report(f"{what}: {human_size(self.done)} of {human_size(self.total)}")


class _VolumeReader(io.RawIOBase):
    """A pool volume downloaded as a file tarfile reads (exactly ``size`` bytes)."""

    def __init__(self, stream: libvirt.virStream, size: int, transfer: Transfer,
                 label: str) -> None:
        self.stream, self.left, self.transfer, self.label = stream, size, transfer, label

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        self.transfer.worker.check()
        n = self.left if n < 0 else min(n, self.left)
        parts, got = [], 0
        while got < n:
            data = self.stream.recv(min(n - got, CHUNK))
            if not data or not isinstance(data, bytes):
                break
            parts.append(data)
            got += len(data)
        self.left -= got
        self.transfer.moved(self.label, got)
        return b"".join(parts)


class _FileReader(io.RawIOBase):
    def __init__(self, f, transfer: Transfer, label: str) -> None:
        self.f, self.transfer, self.label = f, transfer, label

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        self.transfer.worker.check()
        data = self.f.read(n)
        self.transfer.moved(self.label, len(data))
        return data


def _lookup_free(conn: libvirt.virConnect, name: str, where: str) -> None:
    try:
        conn.lookupByName(name)
    except libvirt.libvirtError as e:
        if e.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
            return
        raise
    raise Conflict(f"A domain named '{name}' already exists on {where}.")


def _export_plan(conn: libvirt.virConnect, dom: libvirt.virDomain, ref: InstanceRef,
                 local: bool) -> tuple[bytes, list[tuple[ArchivedDisk, object, int]]]:
    """The XML to archive and each disk: (its entry, its volume or local path, bytes)."""
    if status_of(dom.state()[0]) is not InstanceStatus.STOPPED or not dom.isPersistent():
        raise Conflict(f"{ref} is not a shut-off, defined domain any more.")
    root = ET.fromstring(dom.XMLDesc(INACTIVE))
    plan: list[tuple[ArchivedDisk, object, int]] = []
    problems: list[str] = []
    for el in root.iterfind("devices/disk"):
        device, source, target = el.get("device", "disk"), el.find("source"), el.find("target")
        dev = target.get("dev", "?") if target is not None else "?"
        if device in ("cdrom", "floppy"):
            if source is not None:
                el.remove(source)  # written ejected: the medium is the old host's file
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


def _export_blocking(worker: Worker, uri: str, ref: InstanceRef, part: str, compress: bool,
                     local: bool) -> None:
    conn = _open(uri)
    try:
        dom = conn.lookupByName(ref.name)
        xml, plan = _export_plan(conn, dom, ref, local)
        transfer = Transfer(worker, sum(size for _, _, size in plan))
        with private_file(part) as raw:
            with tarfile.open(fileobj=raw, mode="w:gz" if compress else "w",
                              format=tarfile.PAX_FORMAT) as tar:
                tar.copybufsize = CHUNK  # (16 KiB by default: a round trip each)
                for name, data in ((MANIFEST, manifest_json(ref.name, [d for d, _, _ in plan])),
                                   (XML, xml)):
                    tar.addfile(_info(name, len(data)), io.BytesIO(data))
                for disk, source, size in plan:
                    label = f"exporting {disk.target}"
                    if isinstance(source, str):
                        with open(source, "rb") as f:
                            tar.addfile(_info(disk.member, size), _FileReader(f, transfer, label))
                        continue
                    stream = conn.newStream(0)
                    try:
                        source.download(stream, 0, size, 0)  # type: ignore[attr-defined]
                        tar.addfile(_info(disk.member, size),
                                    _VolumeReader(stream, size, transfer, label))
                        stream.finish()
                    except BaseException:
                        with contextlib.suppress(libvirt.libvirtError):
                            stream.abort()
                        raise
            raw.flush()
            os.fsync(raw.fileno())
    finally:
        conn.close()


def _info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, int(time.time())
    return info


def _import_blocking(worker: Worker, uri: str, name: str, pool_name: str, where: str,
                     scratch: Path, disks: list[tuple[ArchivedDisk, int]],
                     checked) -> None:
    conn = _open(uri)
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
        refused = host_file_problems(checked, used)
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
        for disk, size in disks:
            vol = pool.createXML(_volume_xml(names[disk.target], size), 0)
            made.append(vol)
            _upload(conn, vol, scratch / disk.member, size, transfer,
                    f"importing {disk.target}")
            _rewire(checked.disks[disk.target], vol, disk.format)
        pool.refresh(0)  # libvirt reads the uploaded files' formats again
        checked.root.find("name").text = name  # type: ignore[union-attr]
        worker.check()
        defined = conn.defineXML(ET.tostring(checked.root, encoding="unicode"))
    except BaseException:
        if defined is not None:
            with contextlib.suppress(libvirt.libvirtError):
                defined.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
        for vol in made:
            with contextlib.suppress(libvirt.libvirtError):
                vol.delete(0)
        raise
    finally:
        conn.close()


def _volume_xml(name: str, size: int) -> str:
    """A new volume of exactly ``size`` bytes, allocated as it is written (libvirt reads
    its format again once uploaded; the domain says which it is)."""
    root = ET.Element("volume")
    ET.SubElement(root, "name").text = name
    ET.SubElement(root, "capacity", unit="bytes").text = str(size)
    ET.SubElement(root, "allocation", unit="bytes").text = "0"
    ET.SubElement(ET.SubElement(root, "target"), "format", type="raw")
    return ET.tostring(root, encoding="unicode")


def _upload(conn: libvirt.virConnect, vol: libvirt.virStorageVol, path: Path, size: int,
            transfer: Transfer, label: str) -> None:
    stream = conn.newStream(0)
    try:
        vol.upload(stream, 0, size, 0)
        with open(path, "rb") as f:
            while True:
                transfer.worker.check()
                data = f.read(CHUNK)
                if not data:
                    break
                view = memoryview(data)
                while view:
                    sent = stream.send(view.tobytes())
                    if sent < 0:
                        raise OperationFailed(f"The upload of {label} was refused by libvirt.")
                    view = view[sent:]
                transfer.moved(label, len(data))
        stream.finish()
    except BaseException:
        with contextlib.suppress(libvirt.libvirtError):
            stream.abort()
        raise


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
        if count:
            raise Unsupported(f"{ref} has {count} snapshot(s): libvirt keeps their metadata "
                              f"apart from the disks, and corral does not carry it. Clone it "
                              f"without its snapshots and export the clone.")
        try:
            try:
                await in_thread(_export_blocking, self.lv.uri, ref, part,
                                path.endswith((".gz", ".tgz")), not is_remote(self.remote.address),
                                progress=say, every=0.25)
            except libvirt.libvirtError as e:
                raise self.lv.error(e, f"exporting {ref.name}") from None
            except OSError as e:
                raise OperationFailed(f"Writing {part} failed: {e.strerror or e}.") from e
            try:
                os.link(part, path)  # never replaces a file that appeared meanwhile
            except FileExistsError:
                raise InvalidInput(f"{path} appeared during the export; the export was "
                                   f"not kept.") from None
            except OSError:
                os.rename(part, path)
            else:
                os.unlink(part)
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
                disks = read_manifest(kept[MANIFEST], {p.name for p in scratch.iterdir()})
                checked = checked_domain(kept[XML], {d.target for d in disks})
                sized = []
                for disk in disks:
                    say(f"checking {disk.member}…")
                    sized.append((disk, await asyncio.to_thread(_gate, scratch, disk)))
            except ArchiveRefused as e:
                raise InvalidInput(f"{path} was not imported: {e}.") from None
            except OSError as e:
                raise OperationFailed(f"Reading {path} failed: {e.strerror or e}.") from e
            try:
                await in_thread(_import_blocking, self.lv.uri, name, storage_pool or "default",
                                where, scratch, sized, checked, progress=say, every=0.25)
            except libvirt.libvirtError as e:
                raise self.lv.error(e, f"importing {name}") from None
        finally:
            await asyncio.shield(asyncio.to_thread(shutil.rmtree, scratch, True))
        say("imported")
        try:
            return await self.get_instance(InstanceRef(self.remote.name, name))
        except BackendError:
            raise OperationFailed(f"{name} was imported but cannot be read back.") from None


def _scratch(path: str) -> str:
    """A private directory for the archive's files: beside it (room for its disks), else
    in the temporary directory."""
    try:
        return tempfile.mkdtemp(prefix=".corral-libvirt-import-", dir=os.path.dirname(path))
    except OSError:
        return tempfile.mkdtemp(prefix="corral-libvirt-import-")


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
