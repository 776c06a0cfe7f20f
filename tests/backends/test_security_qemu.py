"""Hostile archives and images for the QEMU backend, with real qemu-img and QEMU (TCG):
files an imported vm.json names, commas in paths, ISOs that look like qcow2, images with
backing files, and the private modes of what corral writes."""

from __future__ import annotations

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
from backends.models import CreateRequest, CreateSource, InstanceRef, InstanceType
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
        blocks = await backend.vms.execute(ref("commas"), "query-block")
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
    for image, what in ((trap, "backing file"), (datafile, "external data file")):
        for overlay in (False, True):
            with pytest.raises(NeedsConfirmation, match=what) as caught:
                await qemu.create("trap", image=str(image), overlay=overlay, accel="tcg")
            assert caught.value.option == "allow_backing"
            assert not (root / "trap").exists()
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
