"""Export/import, clones, rename and description of QEMU VMs, with real QEMU (TCG) and
qemu-img: the results are checked with qemu-img and by booting the guest."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qemu_guest import wait_serial

from backends.errors import Conflict, InvalidInput, OperationFailed
from backends.models import InstanceRef, InstanceStatus
from backends.qemu.definition import VMDefinition


def ref(name):
    return InstanceRef("qemu", name)


def image_info(path):
    return json.loads(subprocess.run(["qemu-img", "info", "-U", "--output=json", str(path)],
                                     capture_output=True, text=True, check=True).stdout)


def snapshot_names(path):
    out = subprocess.run(["qemu-img", "snapshot", "-l", "-U", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return [line.split()[1] for line in out.splitlines()[2:] if line.split()]


async def make_vm(qemu, guest, name, *, data_mib=0):
    kernel, initrd = guest
    await qemu.create(name, kernel=str(kernel), initrd=str(initrd), memory_mib=256,
                      disk_gib=1, cmdline="console=ttyS0 panic=-1", accel="tcg")
    if data_mib:  # real data, so copies take a moment and holes do not hide anything
        subprocess.run(["qemu-io", "-c", f"write -P 0xab 0 {data_mib}M",
                        str(qemu.vms.dir(name) / "disk0.qcow2")], check=True,
                       capture_output=True)


async def boots(qemu, name):
    await qemu.start(ref(name))
    try:
        await wait_serial(qemu, name, "corral-guest ready", timeout=90)
        blocks = await qemu.monitor.execute(ref(name), "query-block")
        files = [b["inserted"]["file"] for b in blocks if b.get("inserted")]
        assert str(qemu.vms.dir(name) / "disk0.qcow2") in files
        return files
    finally:
        await qemu.stop(ref(name), force=True)


def leftovers(root: Path):
    return sorted(p.name for p in root.iterdir())


async def test_export_import_round_trip_keeps_snapshots_and_boots(qemu, guest, tmp_path):
    await make_vm(qemu, guest, "src", data_mib=8)
    await qemu.create_snapshot(ref("src"), "before")
    await qemu.set_description(ref("src"), "the original")
    assert (await qemu.get_instance(ref("src"))).description == "the original"

    # a running VM is refused
    await qemu.start(ref("src"))
    with pytest.raises(Conflict, match="stop it first"):
        await qemu.export_instance(ref("src"), str(tmp_path / "run.tar"))
    await qemu.stop(ref("src"), force=True)

    said: list[str] = []
    archive = tmp_path / "src.tar.gz"
    size = await qemu.export_instance(ref("src"), str(archive), progress=said.append)
    assert size == archive.stat().st_size > 0
    assert not Path(str(archive) + ".part").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".corral")] == []
    assert any(s.startswith("writing disk0.qcow2 ") for s in said) and \
        "writing disk0.qcow2 100%" in said
    with tarfile.open(archive) as tar:
        assert tar.getnames() == ["vm.json", "disk0.qcow2"]
    with pytest.raises(InvalidInput, match="exists already"):
        await qemu.export_instance(ref("src"), str(archive))

    inst = await qemu.import_instance(str(archive), "copy")
    assert inst.status is InstanceStatus.STOPPED and inst.description == "the original"
    disk = qemu.vms.dir("copy") / "disk0.qcow2"
    assert snapshot_names(disk) == ["before"]
    assert [s.name for s in await qemu.list_snapshots(ref("copy"))] == ["before"]
    assert qemu.vms.definition("copy").name == "copy"
    await boots(qemu, "copy")

    with pytest.raises(Conflict, match="already exists"):
        await qemu.import_instance(str(archive), "copy")
    with pytest.raises(InvalidInput, match="storage pools"):
        await qemu.import_instance(str(archive), "other", storage_pool="default")
    with pytest.raises(InvalidInput, match="not a valid VM name"):
        await qemu.import_instance(str(archive), "Bad_Name")

    # without snapshots: qemu-img convert, an uncompressed tar
    plain = tmp_path / "flat.tar"
    said.clear()
    await qemu.export_instance(ref("src"), str(plain), with_snapshots=False,
                               progress=said.append)
    assert any(s.startswith("converting disk0.qcow2") for s in said)
    await qemu.import_instance(str(plain), "flat")
    assert snapshot_names(qemu.vms.dir("flat") / "disk0.qcow2") == []
    assert snapshot_names(qemu.vms.dir("src") / "disk0.qcow2") == ["before"]  # source intact


def tar_with(path: Path, members: dict[str, bytes], *,
             kinds: dict[str, bytes] | None = None):
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, kind in (kinds or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, "/etc/passwd"
            tar.addfile(info)


async def test_damaged_or_foreign_archives_are_refused_and_leave_nothing(qemu, guest,
                                                                         tmp_path):
    await make_vm(qemu, guest, "src", data_mib=4)
    good = tmp_path / "good.tar.gz"
    await qemu.export_instance(ref("src"), str(good))
    root = Path(qemu.remote.address)
    before = leftovers(root)
    vm_json = json.dumps({"name": "x", "disks": ["disk0.qcow2"]}).encode()
    disk = (qemu.vms.dir("src") / "disk0.qcow2").read_bytes()

    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    flipped = tmp_path / "flipped.tar.gz"
    data = bytearray(good.read_bytes())
    for i in range(len(data) // 2, len(data) // 2 + 64):
        data[i] ^= 0x5A
    flipped.write_bytes(bytes(data))
    not_tar = tmp_path / "notes.tar"
    not_tar.write_text("hello\n" * 100)
    cases = {truncated: "damaged or not a tar", flipped: "damaged or not a tar",
             not_tar: "damaged or not a tar"}
    for name, members, kinds, why in [
        ("dotdot", {"../evil": b"x", "vm.json": vm_json}, {}, "unexpected member"),
        ("absolute", {"/tmp/evil": b"x"}, {}, "unexpected member"),
        ("symlink", {"vm.json": vm_json}, {"disk0.qcow2": tarfile.SYMTYPE}, "not a plain file"),
        ("nojson", {"disk0.qcow2": disk}, {}, "has no vm.json"),
        ("baddisk", {"vm.json": json.dumps({"name": "x", "disks": ["../../x.qcow2"]}).encode()},
         {}, "named disk<N>.qcow2"),
        ("missing", {"vm.json": vm_json}, {}, "names the disks disk0.qcow2"),
        ("garbage", {"vm.json": vm_json, "disk0.qcow2": b"\0" * 4096}, {},
         "not a self-contained qcow2|damaged"),
    ]:
        path = tmp_path / f"{name}.tar"
        tar_with(path, members, kinds=kinds)
        cases[path] = why
    # a qcow2 that would read a host file through its backing file
    backed = tmp_path / "backed.qcow2"
    subprocess.run(["qemu-img", "create", "-f", "qcow2", "-F", "raw", "-b", "/etc/hostname",
                    str(backed)], check=True, capture_output=True)
    path = tmp_path / "backed.tar"
    tar_with(path, {"vm.json": vm_json, "disk0.qcow2": backed.read_bytes()})
    cases[path] = "not a self-contained qcow2"

    for path, why in cases.items():
        with pytest.raises(InvalidInput, match=why):
            await qemu.import_instance(str(path), "imp")
        assert leftovers(root) == before, path
    # and the good one still imports
    await qemu.import_instance(str(good), "imp")


async def test_export_and_clone_cancelled_leave_nothing(qemu, guest, tmp_path):
    await make_vm(qemu, guest, "big", data_mib=512)
    root = Path(qemu.remote.address)
    before = leftovers(root)

    async def cancel_at(start, prefix):
        seen = asyncio.Event()

        def progress(text):
            if text.startswith(prefix):
                seen.set()

        task = asyncio.ensure_future(start(progress))
        await asyncio.wait_for(seen.wait(), 60)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    out = tmp_path / "out"
    out.mkdir()
    target = out / "big.tar"
    await cancel_at(lambda p: qemu.export_instance(ref("big"), str(target), progress=p),
                    "writing disk0.qcow2")
    await cancel_at(lambda p: qemu.export_instance(ref("big"), str(target),
                                                   with_snapshots=False, progress=p),
                    "converting disk0.qcow2")
    assert leftovers(out) == []
    await cancel_at(lambda p: qemu.clone_instance(ref("big"), "c1", progress=p), "copying")
    await cancel_at(lambda p: qemu.clone_instance(ref("big"), "c2", with_snapshots=False,
                                                  progress=p), "copying")
    assert leftovers(root) == before
    assert qemu.vms.busy == {}
    # not busy any more: it still starts
    await qemu.start(ref("big"))
    await qemu.stop(ref("big"), force=True)


async def test_full_and_linked_clones_boot_and_protect_their_source(qemu, guest, tmp_path):
    await make_vm(qemu, guest, "src", data_mib=4)
    await qemu.create_snapshot(ref("src"), "s1")
    src_disk = qemu.vms.dir("src") / "disk0.qcow2"

    await qemu.start(ref("src"))
    with pytest.raises(Conflict, match="stop it first"):
        await qemu.clone_instance(ref("src"), "nope")
    await qemu.stop(ref("src"), force=True)

    said: list[str] = []
    full = await qemu.clone_instance(ref("src"), "full", progress=said.append)
    assert full.status is InstanceStatus.STOPPED and "copying disk0.qcow2 100%" in said
    assert snapshot_names(qemu.vms.dir("full") / "disk0.qcow2") == ["s1"]
    await qemu.clone_instance(ref("src"), "flat", with_snapshots=False)
    info = image_info(qemu.vms.dir("flat") / "disk0.qcow2")
    assert "backing-filename" not in info and not info.get("snapshots")
    linked = await qemu.clone_instance(ref("src"), "lnk", linked=True)
    info = image_info(qemu.vms.dir("lnk") / "disk0.qcow2")
    assert info["backing-filename"] == str(src_disk) and not info.get("snapshots")
    assert qemu.vms.definition("lnk").linked_to == "src"
    macs = {qemu.vms.definition(n).mac for n in ("src", "full", "flat", "lnk")}
    assert len(macs) == 4  # src has none (""), each clone its own
    assert linked.name == "lnk" and linked.extra["linked_to"] == "src"
    with pytest.raises(Conflict, match="already exists"):
        await qemu.clone_instance(ref("src"), "full")

    await boots(qemu, "full")
    files = await boots(qemu, "lnk")
    assert str(qemu.vms.dir("lnk") / "disk0.qcow2") in files

    # an export of the linked clone is flattened (its base is not in the archive) ...
    archive = tmp_path / "lnk.tar"
    await qemu.export_instance(ref("lnk"), str(archive))
    solo = await qemu.import_instance(str(archive), "solo")
    assert "backing-filename" not in image_info(qemu.vms.dir("solo") / "disk0.qcow2")
    assert solo.extra["linked_to"] == ""
    await boots(qemu, "solo")
    # ... which cannot keep snapshots of the overlay
    await qemu.create_snapshot(ref("lnk"), "mine")
    with pytest.raises(InvalidInput, match="overlay .* snapshots"):
        await qemu.export_instance(ref("lnk"), str(tmp_path / "lnk2.tar"))
    assert not list(tmp_path.glob("lnk2*"))
    await qemu.export_instance(ref("lnk"), str(tmp_path / "lnk3.tar"), with_snapshots=False)

    # the source backs lnk: it may not change
    for action in (qemu.start(ref("src")), qemu.delete(ref("src"), force=True),
                   qemu.restore_snapshot((await qemu.list_snapshots(ref("src")))[0])):
        with pytest.raises(Conflict, match="linked clone.*lnk"):
            await action
    assert src_disk.exists()
    await qemu.delete(ref("lnk"))
    await qemu.start(ref("src"))  # free again
    await qemu.stop(ref("src"), force=True)
    await qemu.delete(ref("src"))


async def test_a_rename_that_fails_half_way_is_put_back(qemu):
    """Of two linked clones, the first is rebased onto the new path and the second cannot
    be (its qcow2 carries the "corrupt" flag, so qemu-img opens it read-only): the steps'
    undos rebase the first back, relink it and move the directory back; the journal goes."""
    await qemu.create("orig", disk_gib=1, network_boot=True, accel="tcg")
    await qemu.clone_instance(ref("orig"), "a-clone", linked=True)
    await qemu.clone_instance(ref("orig"), "b-clone", linked=True)
    broken = qemu.vms.dir("b-clone") / "disk0.qcow2"
    with open(broken, "r+b") as f:  # header: incompatible_features at byte 72, bit 1
        f.seek(72)
        flags = int.from_bytes(f.read(8), "big")
        f.seek(72)
        f.write((flags | 2).to_bytes(8, "big"))
    old_disk = str(qemu.vms.dir("orig") / "disk0.qcow2")

    with pytest.raises(OperationFailed) as failed:
        await qemu.rename_instance(ref("orig"), "renamed")
    print(f"\nrefused half way: {failed.value}")
    assert qemu.vms.dir("orig").is_dir() and not qemu.vms.dir("renamed").exists()
    assert qemu.vms.definition("orig").name == "orig"
    assert image_info(qemu.vms.dir("a-clone") / "disk0.qcow2")["backing-filename"] == old_disk
    assert qemu.vms.definition("a-clone").linked_to == "orig"
    assert qemu.vms.definition("b-clone").linked_to == "orig"
    assert not [p.name for p in qemu.vms.dir("orig").iterdir() if "rename" in p.name]
    assert sorted(i.name for i in await qemu.list_instances()) == ["a-clone", "b-clone",
                                                                     "orig"]
    assert qemu.vms.busy == {}


async def test_rename_keeps_linked_clones_and_uefi_working(qemu, guest):
    await make_vm(qemu, guest, "src")
    await qemu.clone_instance(ref("src"), "lnk", linked=True)
    await qemu.start(ref("lnk"))
    with pytest.raises(Conflict, match="running"):
        await qemu.rename_instance(ref("src"), "base")  # its overlay runs
    with pytest.raises(Conflict, match="stop it first"):
        await qemu.rename_instance(ref("lnk"), "x")
    await qemu.stop(ref("lnk"), force=True)
    with pytest.raises(Conflict, match="already exists"):
        await qemu.rename_instance(ref("src"), "lnk")

    base = await qemu.rename_instance(ref("src"), "base")
    assert base.name == "base" and not qemu.vms.dir("src").exists()
    assert qemu.vms.definition("base").name == "base"
    assert image_info(qemu.vms.dir("lnk") / "disk0.qcow2")["backing-filename"] == str(
        qemu.vms.dir("base") / "disk0.qcow2")
    assert qemu.vms.definition("lnk").linked_to == "base"
    await boots(qemu, "lnk")

    await qemu.rename_instance(ref("lnk"), "lnk2")
    assert sorted(i.name for i in await qemu.list_instances()) == ["base", "lnk2"]
    await boots(qemu, "lnk2")
    with pytest.raises(Conflict, match="lnk2"):
        await qemu.delete(ref("base"))
    await qemu.delete(ref("lnk2"))
    await boots(qemu, "base")

    # UEFI: the variables file goes with a clone, a rename and an export
    await qemu.create("efi", disk_gib=1, firmware="uefi", network_boot=True, accel="tcg")
    await qemu.clone_instance(ref("efi"), "efi2")
    await qemu.rename_instance(ref("efi2"), "efi3")
    assert (qemu.vms.dir("efi3") / "OVMF_VARS.fd").stat().st_size == (
        qemu.vms.dir("efi") / "OVMF_VARS.fd").stat().st_size
    d: VMDefinition = qemu.vms.definition("efi3")
    assert d.firmware == "uefi" and d.name == "efi3"
    await qemu.start(ref("efi3"))
    await qemu.stop(ref("efi3"), force=True)
