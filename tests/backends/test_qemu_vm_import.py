"""Foreign VMs imported into the QEMU backend (backends/qemu/vm_import/): OVF packages
as VirtualBox 7 and VMware write them, a VirtualBox machine folder and libvirt domain XML,
with disks the test makes with qemu-img in every format, and OVAs tarred from them (what
the descriptors alone say: tests/unit/test_vm_import_descriptors.py); each disk converted
into the new VM's qcow2 with the guest's data intact; nothing left after a refusal, a
cancel or a full disk. One imported OVA really boots under TCG (tests/import_fixtures.py's SYSLINUX disk
holding the lab's kernel and busybox initramfs) and its serial console answers."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import import_fixtures as fx
from qemu_guest import wait_serial

from backends.errors import InvalidInput
from backends.models import InstanceStatus, InstanceType
from backends.create_models import CreateRequest, CreateSource

MiB = 1 << 20


def same_data(qcow2: Path, raw: Path) -> bool:
    return subprocess.run(["qemu-img", "compare", "-f", "qcow2", "-F", "raw", str(qcow2),
                           str(raw)], capture_output=True).returncode == 0


def leftovers(qemu) -> list[str]:
    root = Path(qemu.remote.address)
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


# Disks in every format, converted ----------------------------------------------------------

@pytest.mark.parametrize("fmt", ["vmdk", "vmdk-sparse", "vdi", "vhdx", "vpc", "raw"])
async def test_every_disk_format_is_converted_with_its_data(qemu, tmp_path, fmt):
    raw = fx.pattern_disk(tmp_path / "data.raw")
    folder = tmp_path / "export"
    folder.mkdir()
    fx.convert(raw, folder / "vm-disk1.img", fmt)
    descriptor = fx.vmware_ovf("conv", [("vm-disk1.img", 0, 0)], cpus=1, memory_mib=128,
                               efi=False)
    if fmt != "vmdk":  # the descriptor says what the file is
        descriptor = descriptor.replace(fx.VMDK_FORMAT.encode(), {
            "vmdk-sparse": b"http://www.vmware.com/interfaces/specifications/vmdk.html#sparse",
            "vdi": b"http://www.virtualbox.org/vdi", "vhdx": b"urn:vhdx",
            "vpc": b"http://go.microsoft.com/fwlink/?LinkId=137171#vhd",
            "raw": b"http://example.org/raw"}[fmt])
    (folder / "conv.ovf").write_bytes(descriptor)
    said = []
    plan = await qemu.plan_import(str(folder), said.append)
    assert not plan.problems, plan.summary()
    assert plan.disks[0].gated.format == fmt.split("-")[0]
    assert plan.target_bytes > 0 and plan.free_bytes > plan.target_bytes
    inst = await qemu.import_vm(plan, "conv", accel="tcg", progress=said.append)
    assert inst.status is InstanceStatus.STOPPED
    assert any(s.startswith("converting disk 1 of 1") for s in said), said
    disk = Path(qemu.remote.address) / "conv" / "disk0.qcow2"
    if fmt == "vpc":  # VHD rounds the size up to its geometry: the data are what counts
        out = subprocess.run(["qemu-img", "dd", "-f", "qcow2", "-O", "raw", f"if={disk}",
                              f"of={tmp_path / 'back.raw'}", f"count={8}", "bs=1M"],
                             capture_output=True)
        assert out.returncode == 0 and (tmp_path / "back.raw").read_bytes() == raw.read_bytes()
    else:
        assert same_data(disk, raw)
    d = qemu.vms.definition("conv")
    assert (d.disks, d.mac, d.firmware, d.network) == (
        ["disk0.qcow2"], "00:50:56:ab:cd:ef", "bios", "user")
    assert leftovers(qemu) == ["conv"]


async def test_virtualbox_folder_with_two_disks_keeps_their_order(qemu, tmp_path):
    folder = tmp_path / "VirtualBox VMs" / "vb"
    folder.mkdir(parents=True)
    first = fx.pattern_disk(tmp_path / "first.raw", 4 * MiB)
    second = tmp_path / "second.raw"
    second.write_bytes(b"second disk".ljust(2 * MiB, b"\0"))
    fx.convert(first, folder / "vb.vdi", "vdi")
    fx.convert(second, folder / "data.vhd", "vpc")
    (folder / "vb.vbox").write_bytes(fx.vbox_file("vb", [("vb.vdi", "VDI"),
                                                         ("data.vhd", "VHD")]))
    plan = await qemu.plan_import(str(folder))
    assert not plan.problems, plan.summary()
    summary = "\n".join(plan.summary())
    assert "disk 1: vb.vdi (SATA port 0) — vdi" in summary
    assert "disk 2: data.vhd (SATA port 1) — vpc" in summary
    assert "USB device filters (passthrough)" in summary
    await qemu.import_vm(plan, "vb", accel="tcg")
    d = qemu.vms.definition("vb")
    assert d.disks == ["disk0.qcow2", "disk1.qcow2"] and d.mac == "08:00:27:d1:e2:f3"
    assert "VirtualBox machine" in d.description and "Debian_64" in d.description
    assert same_data(Path(qemu.remote.address) / "vb" / "disk0.qcow2", first)


async def test_libvirt_domain_overlay_names_its_backing_file_and_is_flattened(qemu, tmp_path):
    base = fx.pattern_disk(tmp_path / "base.raw", 4 * MiB)
    overlay = tmp_path / "images" / "lv.qcow2"
    overlay.parent.mkdir()
    fx.qemu_img("create", "-f", "qcow2", "-F", "raw", "-b", str(base), str(overlay))
    xml = tmp_path / "lv.xml"
    xml.write_bytes(fx.libvirt_domain("lv", [(str(overlay), "qcow2")], efi=True))
    plan = await qemu.plan_import(str(xml))
    assert not plan.problems, plan.summary()
    summary = "\n".join(plan.summary())
    assert f"its backing files {base} are copied in" in summary
    assert "not mapped: a SPICE-only display" in summary
    await qemu.import_vm(plan, "lv", accel="tcg")
    directory = Path(qemu.remote.address) / "lv"
    assert same_data(directory / "disk0.qcow2", base)
    assert fx_backing(directory / "disk0.qcow2") is None
    assert (directory / "OVMF_VARS.fd").is_file()
    assert qemu.vms.definition("lv").firmware == "uefi"
    assert overlay.exists() and base.exists()  # the original is left untouched


def fx_backing(path: Path):
    import json
    out = subprocess.run(["qemu-img", "info", "--output=json", str(path)], capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out).get("backing-filename")


# OVAs ----------------------------------------------------------------------------------

def vbox_ova(tmp_path: Path, raw: Path, name: str = "deb", **kw) -> Path:
    """An OVA as VirtualBox 7 exports it: descriptor, stream-optimised VMDK, manifest."""
    vmdk = fx.convert(raw, tmp_path / f"{name}-disk001.vmdk", "vmdk")
    descriptor = fx.vbox7_ovf(name, [(vmdk.name, raw.stat().st_size)], **kw)
    return fx.make_ova(tmp_path / f"{name}.ova", [(f"{name}.ovf", descriptor),
                                                 (vmdk.name, vmdk)])


async def test_imported_ova_boots_and_its_serial_console_answers(qemu, tmp_path):
    ova = vbox_ova(tmp_path, fx.boot_disk(), cpus=1, memory_mib=256)
    said = []
    source = CreateSource("vm-import", "Import a VM…", value=str(ova), type=InstanceType.VM)
    inst = await qemu.create_instance(
        CreateRequest(name="ova1", source=source, options={"accel": "tcg"}, start=True),
        progress=said.append)
    assert inst.status is InstanceStatus.RUNNING
    assert any(s.startswith("unpacking the OVA") for s in said), said
    assert any(s.startswith("converting disk 1 of 1 (vmdk)") for s in said), said
    d = qemu.vms.definition("ova1")
    assert (d.cpus, d.memory_mib, d.mac, d.boot) == (1, 256, "08:00:27:a1:b2:c3", "disk")
    await wait_serial(qemu, "ova1", "corral-guest ready", timeout=90)
    console = await asyncio.open_unix_connection(str(qemu.vms.run_dir("ova1") / "serial.sock"))
    reader, writer = console
    writer.write(b"\recho import-$((6*7))\r")
    await writer.drain()
    await wait_serial(qemu, "ova1", "import-42", timeout=30)
    writer.close()
    assert leftovers(qemu) == ["ova1"]  # the unpacked OVA is gone


async def test_ova_summary_before_anything_is_made(qemu, tmp_path):
    raw = fx.pattern_disk(tmp_path / "d.raw")
    ova = vbox_ova(tmp_path, raw, macs=("080027A1B2C3",))
    plan = await qemu.plan_import(str(ova))
    try:
        summary = plan.summary()
        assert summary[0] == f"OVA: {ova}"
        assert "understood: 1 CPU, 256 MiB of memory" in summary
        assert any(line.startswith("disk order: disk 1: deb-disk001.vmdk (disk1) — vmdk, "
                                   "8.0 MiB") for line in summary), summary
        assert any("not mapped: a USB controller" in line for line in summary)
        assert any(line.startswith("target size on disk: about") for line in summary)
        assert not qemu.vms.names()
    finally:
        plan.close()
    assert leftovers(qemu) == []


def member_tweak(name: str, **changes):
    def tweak(info):
        if info.name == name:
            for key, value in changes.items():
                setattr(info, key, value)
    return tweak


@pytest.mark.parametrize("case", ["dotdot", "symlink", "device", "folder", "unnamed",
                                  "not-first", "manifest", "extent", "backing", "href",
                                  "huge-member", "size"])
async def test_hostile_ovas_are_refused_in_words_and_leave_nothing(qemu, tmp_path, case):
    raw = fx.pattern_disk(tmp_path / "d.raw", 2 * MiB)
    vmdk = fx.convert(raw, tmp_path / "x-disk001.vmdk", "vmdk")
    descriptor = fx.vbox7_ovf("x", [(vmdk.name, 2 * MiB)])
    members: list = [("x.ovf", descriptor), (vmdk.name, vmdk)]
    tweak, manifest = None, True
    if case == "dotdot":
        members.append(("../evil.vmdk", b"x"))
        expect = "'../evil.vmdk', which leaves"
    elif case == "symlink":
        tweak = member_tweak(vmdk.name, type=b"2", linkname="/etc/shadow")
        expect = "not a plain file"
    elif case == "device":
        tweak = member_tweak(vmdk.name, type=b"3", devmajor=8, devminor=0)
        expect = "not a plain file"
    elif case == "folder":
        members.append(("sub/y.vmdk", b"x"))
        expect = "in a folder"
    elif case == "unnamed":
        members.append(("extra.sh", b"#!/bin/sh\n"))
        expect = "'extra.sh', which its descriptor does not name"
    elif case == "not-first":
        members.reverse()
        expect = "not the .ovf descriptor"
    elif case == "manifest":
        members = [("x.ovf", descriptor), (vmdk.name, vmdk),
                   ("x.mf", f"SHA256({vmdk.name}) = {'0' * 64}\n".encode())]
        manifest = False
        expect = "does not match its manifest"
    elif case == "extent":  # a VMDK descriptor whose data are a host file
        text = ('# Disk DescriptorFile\nversion=1\nCID=fffffffe\nparentCID=ffffffff\n'
                'createType="monolithicFlat"\nRW 4096 FLAT "/etc/passwd" 0\n').encode()
        members = [("x.ovf", descriptor), (vmdk.name, text)]
        expect = 'VMDK descriptor.*"/etc/passwd"'
    elif case == "backing":  # a qcow2 that would read a host file
        q = tmp_path / "x-disk001.qcow2"
        fx.qemu_img("create", "-f", "qcow2", "-F", "raw", "-b", "/etc/passwd", str(q))
        members = [("x.ovf", descriptor.replace(fx.VMDK_FORMAT.encode(), b"qcow2")),
                   (vmdk.name, q)]
        expect = "refers to other files"
    elif case == "href":
        members = [("x.ovf", descriptor.replace(vmdk.name.encode(), b"../../etc/passwd"))]
        expect = "not a file name inside the package"
    elif case == "huge-member":  # the header declares more than the disk can hold
        members = [("x.ovf", descriptor), (vmdk.name, b"")]
        tweak = member_tweak(vmdk.name, size=1 << 50)
        manifest = False
        expect = "is 1024.0 TiB, more than the .* free"
    else:  # the descriptor declares another file size than the package holds
        descriptor = fx.vmware_ovf("x", [(vmdk.name, 0, 999)], efi=False)
        members = [("x.ovf", descriptor), (vmdk.name, vmdk)]
        expect = "the descriptor says .* is 999 bytes"
    if case == "huge-member":
        ova = huge_member_ova(tmp_path / "x.ova", descriptor, vmdk.name)
    else:
        ova = fx.make_ova(tmp_path / "x.ova", members, manifest=manifest, tweak=tweak)
    with pytest.raises(InvalidInput, match=expect) as caught:
        plan = await qemu.plan_import(str(ova))
        try:
            await qemu.import_vm(plan, "x", accel="tcg")
        finally:
            plan.close()
    assert str(ova) in caught.value.message
    assert leftovers(qemu) == [] and not qemu.vms.names()


def huge_member_ova(path: Path, descriptor: bytes, name: str) -> Path:
    """An OVA whose disk member's header says 1 PiB (the data never come)."""
    import tarfile
    head = tarfile.TarInfo("x.ovf")
    head.size = len(descriptor)
    disk = tarfile.TarInfo(name)
    disk.size = 1 << 50
    with open(path, "wb") as f:
        f.write(head.tobuf(tarfile.GNU_FORMAT))
        f.write(descriptor.ljust(-(-len(descriptor) // 512) * 512, b"\0"))
        f.write(disk.tobuf(tarfile.GNU_FORMAT))  # nothing more: the header is all there is
    return path


async def test_folder_disks_outside_the_package_are_refused(qemu, tmp_path):
    secret = tmp_path / "secret.img"
    secret.write_bytes(b"secret".ljust(MiB, b"\0"))
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "link.vmdk").symlink_to(secret)
    (folder / "a.ovf").write_bytes(fx.vmware_ovf("a", [("link.vmdk", 0, 0)], efi=False))
    plan = await qemu.plan_import(str(folder))
    assert any("outside the package" in p for p in plan.problems), plan.problems
    with pytest.raises(InvalidInput, match="cannot be imported: .*outside the package"):
        await qemu.import_vm(plan, "a")
    vb = tmp_path / "vb"
    vb.mkdir()
    (vb / "vb.vbox").write_bytes(fx.vbox_file("vb", [("../secret.img", "RAW")]))
    plan = await qemu.plan_import(str(vb))
    plan.close()
    assert any("leaves the machine folder" in p for p in plan.problems), plan.problems
    assert leftovers(qemu) == []


# Cancel and a full disk ------------------------------------------------------------------

def busy_disk(path: Path, size: int) -> Path:
    """A raw disk full of data (no zeros to skip): its conversion takes a while."""
    block = os.urandom(MiB)
    with open(path, "wb") as f:
        for _ in range(size >> 20):
            f.write(block)
    return path


def qemu_img_children() -> list[int]:
    me = str(os.getpid())
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if "(qemu-img)" in stat and stat.rsplit(")", 1)[1].split()[1] == me:
            found.append(int(pid))
    return found


async def test_cancelled_import_kills_qemu_img_and_leaves_nothing(qemu, tmp_path):
    folder = tmp_path / "pkg"
    folder.mkdir()
    busy_disk(folder / "big.img", 256 * MiB)
    (folder / "big.ovf").write_bytes(fx.vmware_ovf("big", [("big.img", 0, 0)], efi=False)
                                     .replace(fx.VMDK_FORMAT.encode(), b"raw"))
    plan = await qemu.plan_import(str(folder))
    started = asyncio.Event()

    def said(text):
        if text.startswith("converting disk 1 of 1"):
            started.set()

    task = asyncio.ensure_future(qemu.import_vm(plan, "big", accel="tcg", progress=said))
    await asyncio.wait_for(started.wait(), 30)
    assert qemu_img_children()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert qemu_img_children() == []
    assert leftovers(qemu) == [] and not qemu.vms.names()
    assert plan.disks[0].gated.fd == -1  # the plan is closed


@pytest.fixture
def small_fs(tmp_path):
    """A 24 MiB tmpfs: a disk that fills up."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)], check=True)
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.qemu  # a QEMU backend of its own, on a tmpfs it mounts (root)
async def test_full_disk_is_said_before_and_during_and_leaves_nothing(tmp_path, small_fs,
                                                                       monkeypatch):
    from backends.local import qemu_remote
    from backends.errors import OperationFailed
    from backends.qemu import QEMUBackend

    monkeypatch.setenv("XDG_RUNTIME_DIR", f"/tmp/cq-imp-{os.getpid()}")
    qemu = QEMUBackend(qemu_remote(str(small_fs / "vms")), timeout=10)
    await qemu.connect()
    try:
        folder = tmp_path / "pkg"
        folder.mkdir()
        busy_disk(folder / "big.img", 40 * MiB)
        (folder / "big.ovf").write_bytes(fx.vmware_ovf("big", [("big.img", 0, 0)], efi=False)
                                         .replace(fx.VMDK_FORMAT.encode(), b"raw"))
        # the summary says it will not fit, and the import refuses before writing
        plan = await qemu.plan_import(str(folder))
        assert any("need about 40.3 MiB, but only 24.0 MiB are free" in p for p in plan.problems), plan.problems
        with pytest.raises(InvalidInput, match="need about 40.3 MiB, but only 24.0 MiB are free"):
            await qemu.import_vm(plan, "big", accel="tcg")
        # an OVA too big to unpack is refused as its header comes, not after filling
        ova = fx.make_ova(tmp_path / "big.ova", [
            ("big.ovf", fx.vmware_ovf("big", [("big.vmdk", 0, 0)])),
            ("big.vmdk", fx.convert(folder / "big.img", tmp_path / "big.vmdk", "vmdk"))])
        with pytest.raises(InvalidInput, match="more than the .* free in"):
            await qemu.plan_import(str(ova))
        assert os.listdir(small_fs / "vms") == []
        # the disk fills up during the conversion: said in words, nothing left
        plan = await qemu.plan_import(str(folder))
        monkeypatch.setattr(type(plan), "problems", property(lambda self: []))
        plan.target_bytes = 0
        with pytest.raises(OperationFailed, match="disk is full"):
            await qemu.import_vm(plan, "big", accel="tcg")
        assert os.listdir(small_fs / "vms") == []
    finally:
        await qemu.close()


async def test_wizard_preview_suggests_values_and_create_reuses_what_it_read(qemu, tmp_path):
    ova = vbox_ova(tmp_path, fx.pattern_disk(tmp_path / "d.raw"), name="Deb_VM", cpus=2,
                   memory_mib=384)
    source = next(s for s in await qemu.create_sources() if s.kind == "vm-import")
    assert source.preview and source.cancellable
    assert [(f.key, f.path, f.required) for f in source.fields] == [("", "local", True)]
    chosen = CreateSource(**{**{f: getattr(source, f) for f in source.__slots__},
                             "value": str(ova)})
    preview = await qemu.preview_source(chosen)
    assert dict(preview.defaults) == {"name": "deb-vm", "cpus": "2", "memory": "384MiB"}
    assert preview.lines[0] == f"OVA: {ova}" and not preview.problems
    assert len([p for p in Path(qemu.remote.address).iterdir()]) == 1  # the unpacked OVA
    said = []
    inst = await qemu.create_instance(CreateRequest(name="deb-vm", source=chosen, cpus=1,
                                                    memory=256 * MiB), said.append)
    assert not any(s.startswith("unpacking") for s in said), said  # read once, at preview
    d = qemu.vms.definition("deb-vm")
    assert (d.cpus, d.memory_mib) == (1, 256) and inst.status is InstanceStatus.STOPPED
    assert leftovers(qemu) == ["deb-vm"]
    preview = await qemu.preview_source(chosen)
    qemu.drop_preview(chosen)
    assert preview.defaults["name"] == ""  # taken now
    assert leftovers(qemu) == ["deb-vm"]


async def test_what_is_not_an_importable_vm_is_said(qemu, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidInput, match="holds no .ovf descriptor and no VirtualBox"):
        await qemu.plan_import(str(tmp_path / "empty"))
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    with pytest.raises(InvalidInput, match="is not something corral imports"):
        await qemu.plan_import(str(other))
    with pytest.raises(InvalidInput, match="is not a regular file or a folder"):
        await qemu.plan_import("/dev/null")
    fake = tmp_path / "fake.ova"
    fake.write_bytes(b"not a tar at all" * 100)
    with pytest.raises(InvalidInput, match="damaged or not a tar archive"):
        await qemu.plan_import(str(fake))
    assert leftovers(qemu) == []


async def test_vmware_ova_with_uefi_gets_its_own_firmware_variables(qemu, tmp_path):
    raw = fx.pattern_disk(tmp_path / "d.raw", 4 * MiB)
    vmdk = fx.convert(raw, tmp_path / "web-disk1.vmdk", "vmdk")
    ova = fx.make_ova(tmp_path / "web.ova", [
        ("web.ovf", fx.vmware_ovf("web", [(vmdk.name, 0, vmdk.stat().st_size)], cpus=1,
                                  memory_mib=128, efi=True)),
        (vmdk.name, vmdk)])
    plan = await qemu.plan_import(str(ova))
    assert not plan.problems, plan.summary()
    assert "understood: firmware: UEFI (OVMF)" in plan.summary()
    await qemu.import_vm(plan, "web", accel="tcg")
    directory = Path(qemu.remote.address) / "web"
    d = qemu.vms.definition("web")
    assert (d.firmware, d.mac, d.memory_mib) == ("uefi", "00:50:56:ab:cd:ef", 128)
    assert (directory / "OVMF_VARS.fd").stat().st_size == Path(
        "/usr/share/OVMF/OVMF_VARS_4M.fd").stat().st_size
    assert same_data(directory / "disk0.qcow2", raw)
    assert "debian11_64Guest" in d.description
