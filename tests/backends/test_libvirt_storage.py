"""Disks of the libvirt backend as storage pool volumes, against the suite's private
libvirtd (``tests/lab_libvirt.py``), read back with ``virsh`` and ``qemu-img`` (not through
corral):

- a clone is a new domain (new UUID, new MAC) on copies of the source's pool volumes made
  by the daemon, with the data; ``with_snapshots`` of a domain with snapshots, a disk
  outside any pool, a taken name, ``linked`` are refused in words with nothing made; a
  copy that fails half way leaves nothing behind;
- ``owned_storage`` lists only the pool volumes the domain alone uses (not a volume
  another domain shares, not a file outside any pool), and ``delete_with_storage``
  deletes exactly those, refusing a list that names anything else before deleting;
- the first disk grows (through the pool when shut off, ``blockResize`` while it runs),
  never shrinks.
"""

from __future__ import annotations

import contextlib
import subprocess
import uuid
from pathlib import Path

import libvirt
import pytest
import pytest_asyncio

import lab_libvirt
from backends.errors import Conflict, InvalidInput, Unsupported
from backends.models import InstanceRef, InstanceStatus

from .contract_subjects import qemu_io
from .libvirt_helpers import connected, disk_snapshots, domain_xml, image, virsh

live = pytest.mark.asyncio(loop_scope="module")
PREFIX = "lvd-"
MiB = 1024**2
PATTERN = "write -P 0x5a 0 64k"


@pytest.fixture(scope="module")
def vlab(request):
    return lab_libvirt.session_lab(request)


@pytest.fixture(scope="module")
def pool(vlab):
    """A directory pool of the lab's libvirt (removed at the end, with its volumes)."""
    name = f"lvdpool{uuid.uuid4().hex[:6]}"
    path = vlab.root / "pools" / name
    path.mkdir(parents=True)
    conn = libvirt.open(vlab.unix_uri)
    made = conn.storagePoolDefineXML(f"<pool type='dir'><name>{name}</name><target>"
                                     f"<path>{path}</path></target></pool>")
    made.create(0)
    yield name, path
    for vol in made.listAllVolumes(0):
        vol.delete(0)
    made.destroy()
    made.undefine()
    conn.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lv(vlab):
    async with connected(vlab, "lvd", PREFIX) as backend:
        yield backend


def in_pool(vlab, pool, name: str, fmt: str = "qcow2") -> Path:
    """A 16 MiB volume of ``pool`` (made with qemu-img, then the pool refreshed)."""
    path = pool[1] / f"{name}.{fmt}"
    subprocess.run(["qemu-img", "create", "-q", "-f", fmt, str(path), "16M"], check=True)
    virsh(vlab, "pool-refresh", pool[0])
    return path


def define(vlab, lv, guest, disks, *, nic: bool = True, volume_disk: str = "",
           name: str = "") -> InstanceRef:
    """A shut-off domain on ``disks`` (``(path, format)``), with a NIC (a MAC to change)
    and, with ``volume_disk``, a ``<disk type='volume'>`` of that ``pool/volume``."""
    name = name or f"{PREFIX}{uuid.uuid4().hex[:6]}"
    xml = lab_libvirt.guest_xml(name, *guest, disks=tuple(disks))
    extra = ""
    if nic:
        extra += ("<interface type='bridge'><source bridge='lvdnone0'/><model type='virtio'/>"
                  "</interface>")
    if volume_disk:
        pool, vol = volume_disk.split("/")
        extra += (f"<disk type='volume' device='disk'><driver name='qemu' type='qcow2'/>"
                  f"<source pool='{pool}' volume='{vol}'/><target dev='vdz' bus='virtio'/>"
                  f"</disk>")
    lab_libvirt.define(vlab, xml.replace("</devices>", extra + "</devices>"))
    return InstanceRef(lv.remote.name, name)


def names(vlab) -> set[str]:
    return set(virsh(vlab, "list", "--all", "--name").stdout.split())


def volumes(vlab, pool) -> set[str]:
    virsh(vlab, "pool-refresh", pool[0])
    out = virsh(vlab, "vol-list", pool[0]).stdout.splitlines()[2:]
    return {line.split()[0] for line in out if line.strip()}


def disk_sources(root) -> dict[str, str]:
    out = {}
    for disk in root.iterfind("devices/disk"):
        source = disk.find("source")
        out[disk.find("target").get("dev")] = (source.get("file") or source.get("volume")
                                               or "")
    return out


@live
async def test_a_clone_is_a_new_domain_on_copies_of_its_volumes(lv, vlab, guest, pool):
    name = f"{PREFIX}{uuid.uuid4().hex[:6]}"
    first, second = in_pool(vlab, pool, f"{name}-0"), in_pool(vlab, pool, "data", "raw")
    third = in_pool(vlab, pool, f"{name}-vol")
    ref = define(vlab, lv, guest, [(first, "qcow2"), (second, "raw")],
                 volume_disk=f"{pool[0]}/{third.name}", name=name)
    qemu_io(str(first), PATTERN)
    await lv.set_description(ref, "the source")
    progress: list[str] = []
    clone = await lv.clone_instance(ref, f"{ref.name}-c", with_snapshots=True,
                                    progress=progress.append)
    assert (clone.name, clone.status) == (f"{ref.name}-c", InstanceStatus.STOPPED)
    assert progress and progress[-1] == "cloned"

    src, new = domain_xml(vlab, ref.name, saved=True), domain_xml(vlab, clone.name, saved=True)
    assert src.findtext("uuid") != new.findtext("uuid")
    mac = "devices/interface/mac"
    assert src.find(mac).get("address") != new.find(mac).get("address")
    assert new.findtext("description") == "the source"
    copies = disk_sources(new)
    assert copies["vda"] != str(first) and copies["vdb"] != str(second)
    assert Path(copies["vda"]).parent == pool[1] == Path(copies["vdb"]).parent
    assert copies["vda"].endswith(f"/{clone.name}-0.qcow2")  # the source's, renamed
    assert copies["vdb"].endswith(f"/{clone.name}-vdb.raw")  # no domain name in "data.raw"
    assert copies["vdz"] == f"{clone.name}-vol.qcow2"  # the name replaced in a volume disk
    for path, fmt in ((copies["vda"], "qcow2"), (copies["vdb"], "raw")):
        info = subprocess.run(["qemu-img", "info", "-U", path], capture_output=True,
                              text=True, check=True).stdout
        assert f"file format: {fmt}" in info and "16 MiB" in info
    # the data came along, and the source's disk is its own
    assert "Pattern verification failed" not in qemu_io(copies["vda"], "read -P 0x5a 0 64k")
    qemu_io(copies["vda"], "write -P 0x33 0 64k")
    assert "Pattern verification failed" not in qemu_io(str(first), "read -P 0x5a 0 64k")

    with pytest.raises(Conflict, match="already exists"):
        await lv.clone_instance(ref, clone.name)
    with pytest.raises(Unsupported, match="linked clones"):
        await lv.clone_instance(ref, f"{ref.name}-l", linked=True)


@live
async def test_what_cannot_be_cloned_is_refused_and_nothing_is_made(lv, vlab, guest, pool):
    ref = define(vlab, lv, guest, [(in_pool(vlab, pool, f"{PREFIX}s{uuid.uuid4().hex[:4]}"),
                                    "qcow2")])
    await lv.create_snapshot(ref, "one")
    before_domains, before_volumes = names(vlab), volumes(vlab, pool)
    with pytest.raises(Unsupported, match=r"has 1 snapshot\(s\).*Clone it without"):
        await lv.clone_instance(ref, f"{ref.name}-c", with_snapshots=True)
    outside = define(vlab, lv, guest, [(image(vlab, f"{PREFIX}o{uuid.uuid4().hex[:4]}"),
                                        "qcow2")])
    with pytest.raises(Unsupported, match="not a volume of a libvirt storage pool: vda"):
        await lv.clone_instance(outside, f"{outside.name}-c")
    with pytest.raises(InvalidInput, match="no '/'"):
        await lv.clone_instance(ref, "a/b")
    assert names(vlab) == before_domains | {outside.name}
    assert volumes(vlab, pool) == before_volumes

    # without its snapshots: the copy has none, in libvirt or in its disk
    clone = await lv.clone_instance(ref, f"{ref.name}-c", with_snapshots=False)
    assert virsh(vlab, "snapshot-list", "--name", clone.name).stdout.split() == []
    copy = disk_sources(domain_xml(vlab, clone.name, saved=True))["vda"]
    assert disk_snapshots(Path(copy)) == []
    assert disk_snapshots(pool[1] / Path(disk_sources(domain_xml(
        vlab, ref.name, saved=True))["vda"]).name) == ["one"]


@live
async def test_a_copy_that_fails_half_way_leaves_nothing(lv, vlab, guest, pool):
    name = f"{PREFIX}h{uuid.uuid4().hex[:4]}"
    good, bad = in_pool(vlab, pool, f"{name}-0"), in_pool(vlab, pool, f"{name}-1")
    ref = define(vlab, lv, guest, [(good, "qcow2"), (bad, "qcow2")])
    with open(bad, "r+b") as f:  # a qcow2 whose L1 table offset is not one: no copy reads it
        f.seek(40)
        f.write((0x7FFF_FFFF_FFFF_0001).to_bytes(8, "big"))
    before_domains, before_volumes = names(vlab), volumes(vlab, pool)
    with pytest.raises(Exception) as failed:
        await lv.clone_instance(ref, f"{ref.name}-c")
    assert "cloning" in str(failed.value), failed.value  # the copy failed, not a check
    assert names(vlab) == before_domains
    assert volumes(vlab, pool) == before_volumes


@live
async def test_delete_with_storage_removes_only_its_own_volumes(lv, vlab, guest, pool):
    tag = uuid.uuid4().hex[:4]
    own, shared = in_pool(vlab, pool, f"{PREFIX}own{tag}"), in_pool(vlab, pool, f"sh{tag}")
    loose = image(vlab, f"{PREFIX}loose{tag}")
    cdrom = in_pool(vlab, pool, f"iso{tag}", "raw")
    ref = define(vlab, lv, guest, [(own, "qcow2"), (shared, "qcow2"), (loose, "qcow2")])
    virsh(vlab, "attach-disk", ref.name, str(cdrom), "sdc", "--type", "cdrom", "--mode",
          "readonly", "--config")
    other = define(vlab, lv, guest, [(shared, "qcow2")])
    assert await lv.owned_storage(ref) == [str(own)]

    with pytest.raises(Conflict, match=f"{shared}.*not \\(any more\\) a volume only"):
        await lv.delete_with_storage(ref, [str(own), str(shared)])
    assert ref.name in names(vlab) and own.exists()

    await lv.delete_with_storage(ref, [str(own)])
    assert ref.name not in names(vlab)
    assert not own.exists() and own.name not in volumes(vlab, pool)
    assert shared.exists() and loose.exists() and cdrom.exists()
    assert other.name in names(vlab)
    assert await lv.owned_storage(other) == [str(shared)]  # its alone now

    # a plain delete keeps the disks, as before
    await lv.delete(other)
    assert shared.exists()


@live
async def test_the_first_disk_grows_and_never_shrinks(lv, vlab, guest, pool):
    disk = in_pool(vlab, pool, f"{PREFIX}g{uuid.uuid4().hex[:4]}")
    ref = define(vlab, lv, guest, [(disk, "qcow2")], nic=False)
    fields = {f.key: f for f in await lv.get_limits(ref)}
    assert (fields["disk"].value, fields["disk"].applies) == ("16MiB", "restart")
    assert await lv.set_limits(ref, {"disk": "32MiB"}) == {"disk": "restart"}
    info = subprocess.run(["qemu-img", "info", "-U", str(disk)], capture_output=True,
                          text=True, check=True).stdout
    assert "32 MiB" in info
    with pytest.raises(InvalidInput, match="Disks only grow: .* at least 32MiB"):
        await lv.set_limits(ref, {"disk": "8MiB"})
    assert await lv.set_limits(ref, {"disk": "32MiB"}) == {}  # that size already

    loose = define(vlab, lv, guest, [(image(vlab, f"{PREFIX}l{uuid.uuid4().hex[:4]}"),
                                      "qcow2")], nic=False)
    assert {f.key: f.applies for f in await lv.get_limits(loose)}["disk"] == "unsupported"
    with pytest.raises(Unsupported, match="not a volume of a libvirt storage pool"):
        await lv.set_limits(loose, {"disk": "32MiB"})

    # running: blockResize, outside a pool too; a running domain is not cloned
    await lv.start(loose)
    try:
        assert {f.key: f.applies for f in await lv.get_limits(loose)}["disk"] == "live"
        assert await lv.set_limits(loose, {"disk": "48MiB", "cpus": "1"}) == {
            "disk": "live", "cpus": "restart"}
        blk = virsh(vlab, "domblkinfo", loose.name, "vda").stdout
        assert f"Capacity:       {48 * MiB}" in blk
        with pytest.raises(Conflict, match="only a shut-off domain is cloned"):
            await lv.clone_instance(loose, f"{loose.name}-c")
    finally:
        with contextlib.suppress(Exception):
            await lv.stop(loose, force=True)
