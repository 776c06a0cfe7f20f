"""Hostile archives and images for the QEMU backend, with real qemu-img and QEMU (TCG):
files an imported vm.json names, commas in paths, ISOs that look like qcow2, images with
backing files, and the private modes of what corral writes."""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import signal
import stat
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest

from backends.errors import InvalidInput, NeedsConfirmation
from backends.models import InstanceRef, InstanceType
from backends.create_models import CreateRequest, CreateSource
from backends.qemu import QEMUBackend, qemu_remote


def ref(name):
    return InstanceRef("qemu", name)


def qemu_img(*args):
    subprocess.run(["qemu-img", *args], check=True, capture_output=True)


@pytest.fixture
def public_dir():
    """A directory every user can read (pytest's tmp_path is private to us)."""
    path = Path(tempfile.mkdtemp(prefix="corral-pub-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def secret(tmp_path: Path) -> Path:
    path = tmp_path / "id_ed25519"
    path.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n")
    os.chmod(path, 0o600)
    return path


def disk_info(path: Path) -> dict:
    out = subprocess.run(["qemu-img", "info", "-f", "qcow2", "--output=json", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def disk_bytes(path: Path) -> bytes:
    """The guest-visible contents of one of corral's qcow2 disks."""
    raw = path.with_suffix(".check.raw")
    qemu_img("convert", "-f", "qcow2", "-O", "raw", str(path), str(raw))
    try:
        return raw.read_bytes()
    finally:
        raw.unlink()


def rewrite(archive: Path, out: Path, **changes) -> Path:
    """A copy of a corral QEMU export with its vm.json changed."""
    with tarfile.open(archive) as src, tarfile.open(out, "w") as dst:
        for member in src:
            data = src.extractfile(member).read()
            if member.name == "vm.json":
                d = json.loads(data)
                d.update(changes)
                data = json.dumps(d).encode()
            member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
    return out


async def test_import_refuses_files_and_values_an_archive_may_not_name(qemu, guest, tmp_path,
                                                                      public_dir):
    kernel, initrd = guest
    await qemu.create("src", kernel=str(kernel), initrd=str(initrd), memory_mib=256,
                      disk_gib=1, cmdline="console=ttyS0", accel="tcg")
    archive = tmp_path / "src.tar"
    await qemu.export_instance(ref("src"), str(archive))
    key = secret(tmp_path)
    private_dir = tmp_path / "private"
    private_dir.mkdir(mode=0o700)
    hidden = private_dir / "cd.iso"
    hidden.write_bytes(b"\0" * 2048)
    os.chmod(hidden, 0o644)  # world-readable, but in a directory nobody else may enter
    before = sorted(p.name for p in Path(qemu.remote.address).iterdir())
    cases = [
        ({"iso": str(key)}, "names the iso .*id_ed25519.* not readable by every user"),
        ({"iso": str(hidden)}, "names the iso .*not readable by every user"),
        ({"kernel": "/etc/shadow"}, "names the kernel '/etc/shadow'"),
        ({"initrd": str(public_dir / ".." / public_dir.name / "x")},
         "not an absolute, plain path"),
        ({"iso": "relative.iso"}, "not an absolute, plain path"),
        ({"iso": "/dev/sda"}, "names the iso"),
        ({"kernel": str(public_dir / "missing")}, "cannot be used"),
        ({"boot": "cdrom"}, "boots from its cdrom, which it does not have"),
        ({"boot": "floppy"}, "boots from 'floppy'"),
        ({"cmdline": "console=ttyS0\nx"}, "printable text"),
        ({"kernel": "", "initrd": "", "cmdline": ""}, "boots from its kernel"),
        ({"io_limits": {"evil": 1}}, "disk limit 'evil'"),
        ({"mac": "52:54:00:12:34:56,x"}, "MAC address"),
        ({"max_cpus": 100000}, "out of bounds"),
    ]
    for changes, why in cases:
        bad = rewrite(archive, tmp_path / "bad.tar", **changes)
        with pytest.raises(InvalidInput, match=why):
            await qemu.import_instance(str(bad), "imp")
        assert sorted(p.name for p in Path(qemu.remote.address).iterdir()) == before, changes
    # a public ISO, and the kernel the source VM uses (the test guest lives in a private
    # cache directory), are accepted
    iso = public_dir / "install.iso"
    iso.write_bytes(b"\0" * 2048)
    os.chmod(iso, 0o644)
    ok = rewrite(archive, tmp_path / "ok.tar", iso=str(iso))
    await qemu.import_instance(str(ok), "imp")
    d = qemu.vms.definition("imp")
    assert (d.iso, d.kernel) == (str(iso), str(kernel))


async def test_commas_in_paths_are_escaped_and_the_iso_is_raw(guest, tmp_path, monkeypatch,
                                                             public_dir):
    """A VM directory and runtime directory with commas, and an "ISO" that is really a
    qcow2 naming a host secret as its backing file: QEMU gets each path whole and the ISO
    as raw bytes."""
    kernel, initrd = guest
    run = Path(f"/tmp/cq,{os.getpid()}")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    key = secret(tmp_path)
    iso = public_dir / "cd,format=qcow2.iso"
    qemu_img("create", "-f", "qcow2", "-F", "raw", "-b", str(key), str(iso))
    os.chmod(iso, 0o644)
    backend = QEMUBackend(qemu_remote(str(tmp_path / "v,ms")), timeout=10)
    await backend.connect()
    try:
        await backend.create("commas", kernel=str(kernel), initrd=str(initrd), iso=str(iso),
                             memory_mib=256, disk_gib=1, cmdline="console=ttyS0",
                             accel="tcg")
        await backend.start(ref("commas"))
        blocks = await backend.monitor.execute(ref("commas"), "query-block")
        inserted = {b["device"] or b["qdev"]: b["inserted"] for b in blocks
                    if b.get("inserted")}
        files = {v["file"]: v for v in inserted.values()}
        disk = str(tmp_path / "v,ms" / "commas" / "disk0.qcow2")
        assert disk in files, files
        # the ISO reaches QEMU as the descriptor corral checked at start (/dev/fd/N)
        cd = next(v for k, v in files.items() if k.startswith("/dev/fd/"))
        assert cd["drv"] == "raw" and "backing_file" not in cd
        pid = backend.vms.pid("commas")
        held = {os.readlink(f"/proc/{pid}/fd/{n}") for n in os.listdir(f"/proc/{pid}/fd")}
        assert {str(iso), str(kernel), str(initrd)} <= held
        assert (run / "corral" / "qemu" / "commas" / "serial.log").exists()
    finally:
        for name in backend.vms.names():
            pid = backend.vms.pid(name)
            if pid:
                os.kill(pid, signal.SIGKILL)
        await backend.close()
        shutil.rmtree(run, ignore_errors=True)


async def test_an_image_with_a_backing_file_needs_the_users_agreement(qemu, tmp_path):
    key = secret(tmp_path)
    trap = tmp_path / "disk.raw"  # named raw, really a qcow2 backed by the secret
    qemu_img("create", "-f", "qcow2", "-F", "raw", "-b", str(key), str(trap), "1M")
    datafile = tmp_path / "ext.qcow2"
    qemu_img("create", "-f", "qcow2", "-o", f"data_file={tmp_path / 'ext.data'}",
             str(datafile), "1M")
    root = Path(qemu.remote.address)
    for image, what in ((trap, f"the backing file {key}"),
                        (datafile, f"the external data file {tmp_path / 'ext.data'}")):
        for overlay in (False, True):
            with pytest.raises(NeedsConfirmation, match=what) as caught:
                await qemu.create("trap", image=str(image), overlay=overlay, accel="tcg")
            assert caught.value.option == "allow_backing"
            assert not (root / "trap").exists()
    # agreed, an overlay is not made over a chain QEMU would read again at every start:
    # the VM gets a flattened, self-contained copy
    await qemu.create("flat", image=str(trap), overlay=True, allow_backing=True, accel="tcg")
    assert "backing-filename" not in disk_info(root / "flat" / "disk0.qcow2")
    # through the wizard's verb: refused, then created once the user agreed
    request = CreateRequest(name="agreed", source=CreateSource(
        "disk-image", "", type=InstanceType.VM, value=str(trap)),
        options={"overlay": "no"})
    with pytest.raises(NeedsConfirmation):
        await qemu.create_instance(request)
    assert not (root / "agreed").exists()
    request = CreateRequest(name="agreed", source=request.source,
                            options={"overlay": "no", "allow_backing": "yes"})
    await qemu.create_instance(request)
    assert qemu.vms.definition("agreed").disks == ["disk0.qcow2"]
    # a plain raw image: no question; VM directories are private
    qemu_img("create", "-f", "raw", str(tmp_path / "real.raw"), "1M")
    await qemu.create("plain", image=str(tmp_path / "real.raw"), overlay=False, accel="tcg")
    assert stat.S_IMODE(os.stat(root / "plain").st_mode) == 0o700


async def test_exports_are_private(qemu, guest, tmp_path):
    kernel, initrd = guest
    await qemu.create("priv", kernel=str(kernel), initrd=str(initrd), memory_mib=256,
                      disk_gib=1, accel="tcg")
    old = os.umask(0o022)
    try:
        await qemu.export_instance(ref("priv"), str(tmp_path / "p.tar"))
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "p.tar").st_mode) == 0o600


def hostile_images(tmp_path: Path) -> list[tuple[Path, str]]:
    """Images that must be refused outright (no question), with what the refusal says."""
    key = secret(tmp_path)
    out = []
    flat = tmp_path / "flat.vmdk"  # the guest would read the host's key (or disk) as its own
    flat.write_text('# Disk DescriptorFile\nversion=1\nCID=fffffffe\nparentCID=ffffffff\n'
                    f'createType="monolithicFlat"\n\nRW 1 FLAT "{key}" 0\n')
    out.append((flat, f'VMDK descriptor.*FLAT "{key}"'))
    device = tmp_path / "device.vmdk"
    device.write_text('version=1\ncreateType="monolithicFlat"\nRW 8 FLAT "/dev/sda" 0\n')
    out.append((device, 'VMDK descriptor.*FLAT "/dev/sda"'))
    sparse = tmp_path / "sparse.raw"  # a descriptor under another name, SPARSE extent
    sparse.write_text(f'version=1\nRW 8 SPARSE "{key}"\n')
    out.append((sparse, 'VMDK descriptor.*SPARSE "'))
    for name, backing, why in (
            ("json", 'json:{"driver":"raw","file":{"filename":"/etc/shadow"}}', "json:"),
            ("nbd", "nbd:127.0.0.1:10809", "protocol"),
            ("http", "http://127.0.0.1:9/x", "protocol"),
            ("dev", "/dev/zero", "which is a device")):
        path = tmp_path / f"{name}.qcow2"
        qemu_img("create", "-f", "qcow2", "-u", "-F", "raw", "-b", backing, str(path), "1M")
        out.append((path, why))
    link = tmp_path / "data-link"  # an external data file that now leads to a device
    link.write_bytes(b"")
    data = tmp_path / "data.qcow2"
    qemu_img("create", "-f", "qcow2", "-o", f"data_file={link}", str(data), "1M")
    link.unlink()
    link.symlink_to("/dev/zero")
    out.append((data, "external data file .*data-link, which is a device"))
    qed = tmp_path / "old.qed"
    qemu_img("create", "-f", "qed", str(qed), "1M")
    out.append((qed, "QED image"))
    return out


async def test_hostile_images_are_refused_in_words_and_leave_nothing(qemu, tmp_path):
    root = Path(qemu.remote.address)
    root.mkdir(parents=True, exist_ok=True)
    for image, why in hostile_images(tmp_path):
        for overlay in (True, False):
            for agreed in (False, True):  # no agreement lets these through
                with pytest.raises(InvalidInput, match=why) as caught:
                    await qemu.create("trap", image=str(image), overlay=overlay,
                                      allow_backing=agreed, accel="tcg")
                assert type(caught.value) is InvalidInput, (image, caught.value)
                assert list(root.iterdir()) == [], image


async def test_the_format_probing_trick_and_the_users_word(qemu, tmp_path):
    """A raw disk whose first bytes a guest made into a qcow2 header naming a host secret:
    never probed. Unsaid, corral asks, naming the secret; said raw, the VM gets the bytes
    themselves (an overlay with -F raw, or a copy), and the secret nowhere."""
    key = secret(tmp_path)
    trap = tmp_path / "guest-disk.img"
    qemu_img("create", "-f", "qcow2", "-F", "raw", "-b", str(key), str(trap), "1M")
    header = trap.read_bytes()
    root = Path(qemu.remote.address)
    source = CreateSource("disk-image", "", type=InstanceType.VM, value=str(trap))
    with pytest.raises(NeedsConfirmation, match=f"backing file {key}.*format raw"):
        await qemu.create_instance(CreateRequest(name="said", source=source))
    for overlay in ("yes", "no"):
        name = f"raw-{overlay}"
        await qemu.create_instance(CreateRequest(name=name, source=source, options={
            "overlay": overlay, "format": "raw"}))
        info = disk_info(root / name / "disk0.qcow2")
        assert info.get("backing-filename-format", "raw") == "raw"
        seen = disk_bytes(root / name / "disk0.qcow2")
        assert seen[:len(header)] == header and b"PRIVATE KEY" not in seen


async def test_other_formats_are_converted_into_a_fresh_qcow2(qemu, tmp_path):
    pattern = b"corral!\n" * 512
    raw = tmp_path / "src.raw"
    raw.write_bytes(pattern + bytes((1 << 20) - len(pattern)))
    root = Path(qemu.remote.address)
    for fmt in ("vmdk", "vdi", "vhdx", "vpc"):
        image = tmp_path / f"src.{fmt}"
        qemu_img("convert", "-f", "raw", "-O", fmt, str(raw), str(image))
        said = []
        await qemu.create(f"from-{fmt}", image=str(image), overlay=True, accel="tcg",
                          progress=said.append)  # an overlay is asked: a copy is made
        disk = root / f"from-{fmt}" / "disk0.qcow2"
        info = disk_info(disk)
        assert info["format"] == "qcow2" and "backing-filename" not in info, fmt
        assert disk_bytes(disk).startswith(pattern), fmt
        assert f"converting {fmt} image 100%" in said, said


async def test_images_others_can_change_are_never_reread(qemu, tmp_path):
    """An overlay's base is read again at every start: refused when someone else could
    change it. A copy reads the very bytes checked: a link swapped after the check is not
    followed, and a qcow2 others may write is copied privately and checked again, so a
    backing file written into it after the check is caught."""
    key = secret(tmp_path)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    pattern = b"mine" * 1024
    image = theirs / "disk.raw"
    image.write_bytes(pattern + bytes((1 << 20) - len(pattern)))
    os.chown(theirs, 65534, 65534)  # a directory another user owns
    root = Path(qemu.remote.address)
    with pytest.raises(InvalidInput, match=f"cannot be the base of an overlay: the "
                                           f"directory {theirs} belongs to another user"):
        await qemu.create("over", image=str(image), overlay=True, accel="tcg")
    assert not (root / "over").exists()

    def swap(text):  # after the check, before the copy: the name now leads to the key
        if text == "copying disk image…":
            image.unlink()
            image.symlink_to(key)

    await qemu.create("copy", image=str(image), overlay=False, accel="tcg", progress=swap)
    seen = disk_bytes(root / "copy" / "disk0.qcow2")
    assert seen.startswith(pattern) and b"PRIVATE KEY" not in seen

    shared = tmp_path / "shared.qcow2"
    qemu_img("create", "-f", "qcow2", str(shared), "1M")
    os.chmod(shared, 0o666)
    with pytest.raises(InvalidInput, match="may be written by other users"):
        await qemu.create("over2", image=str(shared), overlay=True, accel="tcg")

    def add_backing(text):  # another user rewrites the header between check and use
        if text == "copying disk image…":
            qemu_img("rebase", "-u", "-f", "qcow2", "-F", "raw", "-b", str(key), str(shared))

    with pytest.raises(InvalidInput, match=f"changed while corral read it.*backing file "
                                           f"{key}"):
        await qemu.create("race", image=str(shared), overlay=False, accel="tcg",
                          progress=add_backing)
    assert sorted(p.name for p in root.iterdir()) == ["copy"]


def with_disk(archive: Path, out: Path, disk: Path) -> Path:
    """A copy of a corral QEMU export whose disk0.qcow2 is ``disk``."""
    with tarfile.open(archive) as src, tarfile.open(out, "w") as dst:
        for member in src:
            data = src.extractfile(member).read()
            if member.name == "disk0.qcow2":
                data = disk.read_bytes()
            member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
    return out


async def test_import_takes_self_contained_qcow2_disks_only(qemu, tmp_path):
    await qemu.create("src", disk_gib=0.01, memory_mib=64, network_boot=True, accel="tcg")
    archive = tmp_path / "src.tar"
    await qemu.export_instance(ref("src"), str(archive))
    key = secret(tmp_path)
    link = tmp_path / "data-link"
    link.write_bytes(b"")
    datafile = tmp_path / "data.qcow2"
    qemu_img("create", "-f", "qcow2", "-o", f"data_file={link}", str(datafile), "1M")
    link.unlink()
    link.symlink_to(key)  # the disk's data would be the host's key
    backed = tmp_path / "backed.qcow2"
    qemu_img("create", "-f", "qcow2", "-u", "-F", "raw", "-b", "json:{}", str(backed), "1M")
    flat = tmp_path / "flat.vmdk"
    flat.write_text(f'version=1\nRW 1 FLAT "{key}" 0\n')
    vmdk = tmp_path / "sparse.vmdk"
    qemu_img("create", "-f", "vmdk", str(vmdk), "1M")
    fifo = tmp_path / "fifo"
    piped = tmp_path / "piped.qcow2"  # qemu-img would hang opening it (or act on a device)
    qemu_img("create", "-f", "qcow2", "-o", f"data_file={fifo}", str(piped), "1M")
    fifo.unlink()
    os.mkfifo(fifo)
    before = sorted(p.name for p in Path(qemu.remote.address).iterdir())
    for disk, why in ((datafile, f"external data file {link}"), (backed, "json:"),
                      (flat, "is not a qcow2 file"), (vmdk, "is not a qcow2 file"),
                      (piped, "fifo, which is not a regular file")):
        bad = with_disk(archive, tmp_path / "bad.tar", disk)
        with pytest.raises(InvalidInput, match=f"disk0.qcow2 that is not a self-contained "
                                               f"qcow2; refused.*{why}") as caught:
            await asyncio.wait_for(qemu.import_instance(str(bad), "imp"), 30)
        assert type(caught.value) is InvalidInput
        assert sorted(p.name for p in Path(qemu.remote.address).iterdir()) == before, disk
    await qemu.import_instance(str(archive), "imp")  # the export itself is fine
