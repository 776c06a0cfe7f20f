"""Export and import of libvirt domains against the suite's private libvirtd
(``tests/lab_libvirt.py``), over its unix socket and over ``qemu+ssh://``, read back with
``virsh``, ``qemu-img`` and ``tarfile`` (not through corral):

- a shut-off domain becomes one archive (manifest, XML, its disk files); imported under
  another name it is a new domain (new UUID, new MAC) on new volumes of the pool with the
  same bytes, and it boots: its serial console answers;
- its snapshots go along (libvirt's metadata; their data is in the qcow2) and are
  redefined on the new domain, which reverts to them on its own disks; a snapshot whose
  saved definition has a host device refuses the archive;
- a disk's holes stay holes: in the archive and in the imported volume (sparse streams),
  with the same bytes; a gzip archive (``.tar.gz``) round-trips too;
- what cannot be exported is refused in words with no file left (running, snapshots
  without them, a disk outside any pool over SSH, a qcow2 overlay, a host device); a
  cancelled export or import leaves nothing, and an import removes the unpacking
  directory a killed corral left beside the archive;
- hostile archives, by class: names that leave the directory, absolute names, links, a
  duplicate member, an XML with a host device, a disk or serial port on a host path,
  QEMU command-line options, a kernel no domain here uses, a qcow2 with a backing file:
  each refused in words, and nothing is left on the daemon (domains, volumes).
"""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import tarfile
import uuid
from pathlib import Path

import libvirt
import pytest
import pytest_asyncio

import lab_libvirt
from backends import get_backend
from backends.errors import Conflict, InvalidInput, Unsupported
from backends.models import InstanceRef, InstanceStatus, Remote

from .contract_subjects import qemu_io
from .libvirt_helpers import domain_xml, virsh
from .test_libvirt_backend import Sink, typed_until

live = pytest.mark.asyncio(loop_scope="module")
PREFIX = "lve-"
MiB = 1 << 20
IMAGES = Path("/var/lib/libvirt/images")
"""The default pool's directory in the lab daemon's namespace (``vlab.images`` outside)."""


@pytest.fixture(scope="module")
def vlab(request):
    return lab_libvirt.session_lab(request)


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["unix", "ssh"])
async def lv(request, vlab):
    uri = vlab.unix_uri if request.param == "unix" else vlab.ssh_uri()
    backend = get_backend(Remote(name=f"lve-{request.param}", kind="libvirt", address=uri),
                          timeout=10)
    await backend.connect()
    yield backend
    conn = libvirt.open(vlab.unix_uri)
    try:
        for dom in conn.listAllDomains(0):
            if dom.name().startswith(PREFIX):
                if dom.isActive():
                    dom.destroy()
                dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA)
        pool = conn.storagePoolLookupByName("default")
        pool.refresh(0)
        for vol in pool.listAllVolumes(0):
            if vol.name().startswith(PREFIX):
                vol.delete(0)
    finally:
        conn.close()
    await backend.close()


def in_default_pool(vlab, name: str, fmt: str = "qcow2", size: str = "16M") -> Path:
    path = vlab.images / f"{name}.{fmt}"
    subprocess.run(["qemu-img", "create", "-q", "-f", fmt, str(path), size], check=True)
    virsh(vlab, "pool-refresh", "default")
    return path


def define(vlab, lv, guest, *, fmt: str = "qcow2", outside: bool = False,
           size: str = "16M") -> tuple[InstanceRef, Path]:
    """A shut-off test guest with one disk (in the default pool, or in the lab's directory
    that no pool holds), a NIC and an installer drive."""
    name = f"{PREFIX}{uuid.uuid4().hex[:6]}"
    if outside:
        disk = vlab.root / f"{name}.{fmt}"
        subprocess.run(["qemu-img", "create", "-q", "-f", fmt, str(disk), size], check=True)
    else:
        disk = in_default_pool(vlab, name, fmt, size)
    (vlab.root / "installer.iso").write_bytes(bytes(2048))
    seen = disk if outside else IMAGES / disk.name  # as the daemon sees the pool's files
    xml = lab_libvirt.guest_xml(name, *guest, disks=((seen, fmt),))
    extra = ("<interface type='user'><model type='virtio'/>"
             "</interface><disk type='file' device='cdrom'><driver name='qemu' type='raw'/>"
             f"<source file='{vlab.root}/installer.iso'/><target dev='sda' bus='sata'/>"
             "<readonly/></disk>")
    lab_libvirt.define(vlab, xml.replace("</devices>", extra + "</devices>"))
    return InstanceRef(lv.remote.name, name), disk


def domains(vlab) -> set[str]:
    return set(virsh(vlab, "list", "--all", "--name").stdout.split())


def volumes(vlab) -> set[str]:
    virsh(vlab, "pool-refresh", "default")
    out = virsh(vlab, "vol-list", "default").stdout.splitlines()[2:]
    return {line.split()[0] for line in out if line.strip()}


def members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


@live
async def test_round_trip_is_a_new_domain_with_the_same_disk_that_boots(lv, vlab, guest,
                                                                         tmp_path):
    ref, disk = define(vlab, lv, guest)
    qemu_io(str(disk), "write -P 0x5a 0 64k")
    said: list[str] = []
    archive = tmp_path / "web.tar"
    size = await lv.export_instance(ref, str(archive), progress=said.append)
    assert size == archive.stat().st_size and not Path(f"{archive}.part").exists()
    assert said[-1] == "exported" and any(" of " in s for s in said), said
    found = members(archive)
    assert sorted(found) == ["disk-vda.qcow2", "domain.xml", "manifest.json"]
    manifest = json.loads(found["manifest.json"])
    assert manifest["format"] == "corral-libvirt-domain" and manifest["name"] == ref.name
    assert found["disk-vda.qcow2"] == disk.read_bytes()
    assert b"installer.iso" not in found["domain.xml"]  # the cdrom goes ejected

    new = f"{ref.name}-i"
    said.clear()
    made = await lv.import_instance(str(archive), new, progress=said.append)
    assert (made.name, made.status) == (new, InstanceStatus.STOPPED)
    assert said[-1] == "imported" and any("importing vda" in s for s in said), said
    src, copy = domain_xml(vlab, ref.name, saved=True), domain_xml(vlab, new, saved=True)
    assert src.findtext("uuid") != copy.findtext("uuid")
    mac = "devices/interface/mac"
    assert src.find(mac).get("address") != copy.find(mac).get("address")
    source = copy.find("devices/disk[@device='disk']/source").get("file")
    assert source == str(IMAGES / f"{new}-vda.qcow2")
    assert f"{new}-vda.qcow2" in volumes(vlab)
    imported = vlab.images / f"{new}-vda.qcow2"
    subprocess.run(["qemu-img", "compare", "-f", "qcow2", "-F", "qcow2", str(disk),
                    str(imported)], check=True, capture_output=True)
    assert "Pattern verification failed" not in qemu_io(str(imported), "read -P 0x5a 0 64k")
    with pytest.raises(Conflict, match="already exists"):
        await lv.import_instance(str(archive), new)

    copy_ref = InstanceRef(lv.remote.name, new)
    await lv.start(copy_ref)
    session = await lv.open_console(copy_ref)
    sink = Sink()
    await session.start(sink)
    try:
        await typed_until(session, sink, b"echo k$((6*7))\r", b"k42")
    finally:
        await session.close()
        await lv.stop(copy_ref, force=True)


@live
async def test_snapshots_go_along_and_are_redefined(lv, vlab, guest, tmp_path):
    ref, disk = define(vlab, lv, guest)
    qemu_io(str(disk), "write -P 0x5a 0 64k")
    await lv.create_snapshot(ref, "one")
    qemu_io(str(disk), "write -P 0x33 0 64k")
    await lv.create_snapshot(ref, "two")
    archive = tmp_path / "snaps.tar"
    await lv.export_instance(ref, str(archive), with_snapshots=True)
    found = members(archive)
    assert sorted(found) == ["disk-vda.qcow2", "domain.xml", "manifest.json",
                             "snapshot-001.xml", "snapshot-002.xml"]
    assert json.loads(found["manifest.json"])["current"] == "snapshot-002.xml"

    new = f"{ref.name}-s"
    await lv.import_instance(str(archive), new)
    assert virsh(vlab, "snapshot-list", "--name", "--topological", new).stdout.split() \
        == ["one", "two"]
    assert virsh(vlab, "snapshot-current", "--name", new).stdout.strip() == "two"
    assert virsh(vlab, "snapshot-parent", new, "two").stdout.strip() == "one"
    uuid_ = domain_xml(vlab, new, saved=True).findtext("uuid")
    import xml.etree.ElementTree as ET

    inner = ET.fromstring(virsh(vlab, "snapshot-dumpxml", new, "one").stdout).find("domain")
    assert (inner.findtext("name"), inner.findtext("uuid")) == (new, uuid_)
    assert inner.find("devices/disk/source").get("file") == str(IMAGES / f"{new}-vda.qcow2")
    copy = InstanceRef(lv.remote.name, new)
    one = next(s for s in await lv.list_snapshots(copy) if s.name == "one")
    await lv.restore_snapshot(one)
    imported = vlab.images / f"{new}-vda.qcow2"
    assert "Pattern verification failed" not in qemu_io(str(imported), "read -P 0x5a 0 64k")
    assert "Pattern verification failed" not in qemu_io(str(disk), "read -P 0x33 0 64k")

    def hostdev_in_first(items):
        xml = dict((i.name, d) for i, d in items)["snapshot-001.xml"]
        set_member(items, "snapshot-001.xml", xml.replace(
            b"</devices>", b"<hostdev mode='subsystem' type='pci'><source><address bus='0' "
            b"slot='2'/></source></hostdev></devices>", 1))
    bad = rewritten(archive, tmp_path / "bad.tar", hostdev_in_first)
    before = domains(vlab), volumes(vlab)
    with pytest.raises(InvalidInput, match="snapshot-001.xml has .*hostdev"):
        await lv.import_instance(str(bad), f"{ref.name}-h")
    assert (domains(vlab), volumes(vlab)) == before


@live
async def test_what_cannot_be_exported_is_refused_and_leaves_no_file(lv, vlab, guest, tmp_path):
    ref, _disk = define(vlab, lv, guest)
    target = tmp_path / "x.tar"
    await lv.start(ref)
    with pytest.raises(Conflict, match="only a shut-off domain is exported"):
        await lv.export_instance(ref, str(target))
    await lv.stop(ref, force=True)
    await lv.create_snapshot(ref, "one")
    with pytest.raises(Unsupported, match=r"1 snapshot\(s\).*Export it with its snapshots"):
        await lv.export_instance(ref, str(target), with_snapshots=False)
    outside, _ = define(vlab, lv, guest, outside=True)
    if "ssh" in lv.remote.name:
        with pytest.raises(Unsupported, match="not a volume of a libvirt storage pool"):
            await lv.export_instance(outside, str(target))
    else:  # a local file is read as a file
        await lv.export_instance(outside, str(target))
        assert sorted(members(target)) == ["disk-vda.qcow2", "domain.xml", "manifest.json"]
        target.unlink()
    overlay, base = define(vlab, lv, guest)  # its disk made an overlay of another volume
    top = vlab.images / f"{overlay.name}-top.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-u", "-f", "qcow2", "-F", "qcow2", "-b",
                    str(IMAGES / base.name), str(top), "16M"], check=True)  # (the daemon's path)
    virsh(vlab, "pool-refresh", "default")
    virsh(vlab, "detach-disk", overlay.name, "vda", "--config")
    virsh(vlab, "attach-disk", overlay.name, str(IMAGES / top.name), "vda", "--subdriver",
          "qcow2", "--config")
    with pytest.raises(Unsupported, match="vda \\(a qcow2 overlay"):
        await lv.export_instance(overlay, str(target))
    hostdev = f"{PREFIX}{uuid.uuid4().hex[:6]}"
    lab_libvirt.define(vlab, lab_libvirt.guest_xml(hostdev, *guest).replace(
        "</devices>", "<hostdev mode='subsystem' type='pci' managed='yes'><source>"
        "<address domain='0' bus='0' slot='31' function='0'/></source></hostdev></devices>"))
    with pytest.raises(Unsupported, match="import would refuse it.*hostdev"):
        await lv.export_instance(InstanceRef(lv.remote.name, hostdev), str(target))
    assert list(tmp_path.iterdir()) == []


@live
async def test_holes_stay_holes_in_the_archive_and_the_new_volume(lv, vlab, guest, tmp_path):
    ref, disk = define(vlab, lv, guest, fmt="raw", size="256M")
    for offset in (0, 128):  # 1 MiB of data at 0 and at 128 MiB, holes elsewhere
        subprocess.run(["dd", "if=/dev/urandom", f"of={disk}", "bs=1M", "count=1",
                        f"seek={offset}", "conv=notrunc", "status=none"], check=True)
    archive = tmp_path / "holes.tar"
    await lv.export_instance(ref, str(archive))
    assert archive.stat().st_size > 256 * MiB
    assert archive.stat().st_blocks * 512 < 16 * MiB  # the holes were not written
    assert members(archive)["disk-vda.raw"] == disk.read_bytes()
    new = f"{ref.name}-h"
    await lv.import_instance(str(archive), new)
    imported = vlab.images / f"{new}-vda.raw"
    assert imported.read_bytes() == disk.read_bytes()
    assert imported.stat().st_blocks * 512 < 16 * MiB


@live
async def test_a_gzip_archive_round_trips(lv, vlab, guest, tmp_path):
    ref, disk = define(vlab, lv, guest)
    qemu_io(str(disk), "write -P 0x6b 1M 64k")
    archive = tmp_path / "web.tar.gz"
    await lv.export_instance(ref, str(archive))
    assert archive.read_bytes()[:2] == b"\x1f\x8b"  # gzip, as its name says
    assert members(archive)["disk-vda.qcow2"] == disk.read_bytes()
    await lv.import_instance(str(archive), f"{ref.name}-z")
    imported = vlab.images / f"{ref.name}-z-vda.qcow2"
    assert "Pattern verification failed" not in qemu_io(str(imported), "read -P 0x6b 1M 64k")


@live
async def test_a_cancelled_export_or_import_leaves_nothing(lv, vlab, guest, tmp_path):
    ref, disk = define(vlab, lv, guest, fmt="raw", size="256M")
    subprocess.run(["dd", "if=/dev/urandom", f"of={disk}", "bs=1M", "count=256",
                    "conv=notrunc", "status=none"], check=True)
    archive = tmp_path / "big.tar"

    async def cancelled(work, said: list[str]) -> None:
        task = asyncio.ensure_future(work)
        while not any("MiB of" in s for s in said) and not task.done():
            await asyncio.sleep(0.01)
        assert not task.done(), said
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    said: list[str] = []
    await cancelled(lv.export_instance(ref, str(archive), progress=said.append), said)
    assert list(tmp_path.iterdir()) == []
    await lv.export_instance(ref, str(archive))
    before = domains(vlab), volumes(vlab)
    stale = tmp_path / ".corral-libvirt-import-killed"  # what a killed corral left there
    stale.mkdir()
    (stale / "owner").write_text("999999999 1")
    (stale / "disk-vda.raw").write_bytes(b"left")
    said = []
    await cancelled(lv.import_instance(str(archive), f"{ref.name}-c", progress=said.append),
                    said)
    assert (domains(vlab), volumes(vlab)) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.tar"]  # no scratch left,
    # and the one a killed corral left was removed


def rewritten(good: Path, out: Path, change) -> Path:
    """A copy of the archive ``good`` with its members changed by ``change(list)``, where
    each item is ``(TarInfo, bytes)``."""
    with tarfile.open(good) as tar:
        items = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
    change(items)
    with tarfile.open(out, "w") as tar:
        for info, data in items:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return out


def set_member(items, name: str, data: bytes) -> None:
    for i, (info, _) in enumerate(items):
        if info.name == name:
            info.size = len(data)
            items[i] = (info, data)


def xml_with(extra: str, *, kernel: str = ""):
    def change(items):
        xml = dict((i.name, d) for i, d in items)["domain.xml"].decode()
        xml = xml.replace("</devices>", extra + "</devices>")
        if kernel:
            start, end = xml.index("<kernel>") + 8, xml.index("</kernel>")
            xml = xml[:start] + kernel + xml[end:]
        set_member(items, "domain.xml", xml.encode())
    return change


def extra_member(info: tarfile.TarInfo, data: bytes = b""):
    def change(items):
        info.size = len(data) if info.isreg() else 0
        items.append((info, data))
    return change


def link(name: str, kind: bytes, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


def backed_disk(tmp: Path):
    def change(items):
        top = tmp / "top.qcow2"  # -u: qemu-img does not open the backing file
        subprocess.run(["qemu-img", "create", "-q", "-u", "-f", "qcow2", "-F", "qcow2", "-b",
                        "/etc/shadow", str(top), "16M"], check=True)
        set_member(items, "disk-vda.qcow2", top.read_bytes())
    return change


HOSTILE = {
    "../ name": (extra_member(tarfile.TarInfo("../evil")), "leaves"),
    "absolute name": (extra_member(tarfile.TarInfo("/tmp/evil")), "leaves"),
    "symlink": (extra_member(link("disk-vdb.raw", tarfile.SYMTYPE, "/dev/sda")),
                "not a plain file"),
    "hard link": (extra_member(link("disk-vdb.raw", tarfile.LNKTYPE, "disk-vda.qcow2")),
                  "not a plain file"),
    "duplicate": (extra_member(tarfile.TarInfo("./domain.xml"), b"<domain/>"), "twice"),
    "other member": (extra_member(tarfile.TarInfo("notes.txt"), b"hi"), "not part of"),
    "hostdev": (xml_with("<hostdev mode='subsystem' type='usb'><source><vendor id='0x1'/>"
                         "<product id='0x2'/></source></hostdev>"), "hostdev"),
    "host disk": (xml_with("<disk type='block' device='disk'><source dev='/dev/sda'/>"
                           "<target dev='vdb' bus='virtio'/></disk>"), "/dev/sda"),
    "filesystem": (xml_with("<filesystem type='mount'><source dir='/'/><target dir='h'/>"
                            "</filesystem>"), "filesystem"),
    "serial file": (xml_with("<serial type='file'><source path='/etc/cron.d/x'/>"
                             "<target port='1'/></serial>"), "serial type='file'"),
    "qemu:commandline": (xml_with("</devices><qemu:commandline xmlns:qemu='http://libvirt."
                                  "org/schemas/domain/qemu/1.0'><qemu:arg value='-x'/>"
                                  "</qemu:commandline><devices>"), "qemu:commandline"),
    "host kernel": (xml_with("", kernel="/etc/shadow"), "<kernel> /etc/shadow"),
    "entities": (xml_with("", kernel="&x;"), "entities"),
}


@live
@pytest.mark.parametrize("case", list(HOSTILE))
async def test_hostile_archives_are_refused_and_leave_nothing(lv, vlab, guest, tmp_path, case):
    ref, _disk = define(vlab, lv, guest)
    good = tmp_path / "good.tar"
    await lv.export_instance(ref, str(good))
    change, words = HOSTILE[case]
    if case == "entities":
        def change(items, _inner=change):  # the entity declared, then used
            _inner(items)
            xml = dict((i.name, d) for i, d in items)["domain.xml"]
            set_member(items, "domain.xml", b"<!DOCTYPE d [<!ENTITY x '/etc/shadow'>]>" + xml)
    bad = rewritten(good, tmp_path / "bad.tar", change)
    before = domains(vlab), volumes(vlab)
    with pytest.raises(InvalidInput) as refused:
        await lv.import_instance(str(bad), f"{ref.name}-h")
    assert "was not imported" in str(refused.value) or "no domain there uses" in \
        str(refused.value), refused.value
    assert words in str(refused.value), refused.value
    assert (domains(vlab), volumes(vlab)) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.tar", "good.tar"]


@live
async def test_a_qcow2_with_a_backing_file_is_refused_before_upload(lv, vlab, guest, tmp_path):
    ref, _disk = define(vlab, lv, guest)
    good = tmp_path / "good.tar"
    await lv.export_instance(ref, str(good))
    work = tmp_path / "work"
    work.mkdir()
    bad = rewritten(good, tmp_path / "bad.tar", backed_disk(work))
    before = domains(vlab), volumes(vlab)
    with pytest.raises(InvalidInput, match="names the backing file /etc/shadow"):
        await lv.import_instance(str(bad), f"{ref.name}-b")
    assert (domains(vlab), volumes(vlab)) == before
    with pytest.raises(InvalidInput, match="no storage pool 'nopool'"):
        await lv.import_instance(str(good), f"{ref.name}-p", storage_pool="nopool")
    assert (domains(vlab), volumes(vlab)) == before
