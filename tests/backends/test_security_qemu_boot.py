"""The ISO, kernel and initrd a QEMU VM names are judged at every start, on the descriptors
QEMU is then given (backends/qemu/host_paths.py): a link or file swapped after import or
creation to lead to a private host file is refused in words, and QEMU never runs."""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

import pytest

from backends.errors import InvalidInput
from backends.models import InstanceRef

NOBODY = 65534


def ref(name):
    return InstanceRef("qemu", name)


@pytest.fixture
def public_dir():
    """A directory every user can read (pytest's tmp_path is private to us)."""
    path = Path(tempfile.mkdtemp(prefix="corral-boot-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def shadow(tmp_path: Path) -> Path:
    """A stand-in for /etc/shadow: root's, readable by root only."""
    path = tmp_path / "shadow"
    path.write_text("root:$6$secret:19000:0:99999:7:::\n")
    os.chmod(path, 0o600)
    return path


def public_copy(src: Path, into: Path) -> Path:
    out = into / src.name
    shutil.copyfile(src, out)
    os.chmod(out, 0o644)
    return out


def rewrite(archive: Path, out: Path, **changes) -> Path:
    with tarfile.open(archive) as src, tarfile.open(out, "w") as dst:
        for member in src:
            data = src.extractfile(member).read()
            if member.name == "vm.json":
                data = json.dumps({**json.loads(data), **changes}).encode()
            member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
    return out


def swap_link(link: Path, target: Path) -> None:
    new = link.with_name(link.name + ".new")
    new.symlink_to(target)
    os.replace(new, link)


async def refused_at_start(qemu, name, match):
    with pytest.raises(InvalidInput, match=match):
        await qemu.start(ref(name))
    assert qemu.vms.pid(name) is None  # QEMU never ran


async def test_a_kernel_link_swapped_after_import_is_refused_at_start(qemu, guest, tmp_path,
                                                                     public_dir):
    kernel, initrd = guest
    await qemu.create("src", kernel=str(kernel), initrd=str(initrd), memory_mib=256,
                      cmdline="console=ttyS0", accel="tcg")
    archive = tmp_path / "src.tar"
    await qemu.export_instance(ref("src"), str(archive))
    # a local user's directory, holding public files and a link to one
    theirs = public_dir / "theirs"
    theirs.mkdir()
    vmlinuz = public_copy(kernel, theirs)
    initramfs = public_copy(initrd, theirs)
    link = theirs / "current-kernel"
    link.symlink_to(vmlinuz)
    os.lchown(link, NOBODY, NOBODY)
    os.chown(theirs, NOBODY, NOBODY)
    os.chmod(theirs, 0o755)
    imported = rewrite(archive, tmp_path / "imp.tar", kernel=str(link),
                       initrd=str(initramfs))
    await qemu.import_instance(str(imported), "imp")  # public files: accepted
    await qemu.start(ref("imp"))  # and started, reading them
    pid = qemu.vms.pid("imp")
    held = {os.readlink(f"/proc/{pid}/fd/{n}") for n in os.listdir(f"/proc/{pid}/fd")}
    assert {str(vmlinuz), str(initramfs)} <= held
    await qemu.stop(ref("imp"), force=True)
    # the user points the link at a file only root may read
    secret = shadow(tmp_path)
    swap_link(link, secret)
    await refused_at_start(qemu, "imp", f"imp was not started: its kernel {link} leads to "
                                        f"a file not every user may read, and the directory "
                                        f"{theirs} belongs to another user .*/etc/shadow")
    # or replaces the initrd itself with a link to it
    swap_link(link, vmlinuz)
    initramfs.unlink()
    initramfs.symlink_to(secret)
    await refused_at_start(qemu, "imp", f"its initrd {initramfs} leads to a file not "
                                        f"every user may read")
    # or with a device
    initramfs.unlink()
    initramfs.symlink_to("/dev/zero")
    await refused_at_start(qemu, "imp", "its initrd .* is not a regular file")


async def test_an_iso_swapped_after_creation_is_refused_at_start(qemu, guest, tmp_path,
                                                                public_dir):
    """The same at creation: the admin named a public ISO in a shared, sticky directory
    (like /tmp); its owner later replaces it with a link to a private file."""
    kernel, initrd = guest
    os.chmod(public_dir, 0o1777)
    iso = public_dir / "install.iso"
    iso.write_bytes(b"\0" * 2048)
    os.chmod(iso, 0o644)
    os.chown(iso, NOBODY, NOBODY)
    await qemu.create("cd", kernel=str(kernel), initrd=str(initrd), iso=str(iso),
                      memory_mib=256, accel="tcg")
    secret = shadow(tmp_path)
    iso.unlink()
    iso.symlink_to(secret)
    os.lchown(iso, NOBODY, NOBODY)
    with pytest.raises(InvalidInput, match=f"The VM cd2 was not created: its ISO {iso} "
                                           f"leads to a file not every user may read"):
        await qemu.create("cd2", kernel=str(kernel), initrd=str(initrd), iso=str(iso),
                          memory_mib=256, accel="tcg")
    assert not qemu.vms.dir("cd2").exists()
    await refused_at_start(qemu, "cd", f"its ISO {iso} leads to a file not every user may "
                                       f"read, and the directory {public_dir} may be written "
                                       f"by other users")
    # a private file of ours, reached only through what root and we control: started
    mine = tmp_path / "mine.iso"
    mine.write_bytes(b"\0" * 2048)
    os.chmod(mine, 0o600)
    iso.unlink()
    d = qemu.vms.definition("cd")
    d.iso = str(mine)
    d.save(qemu.vms.dir("cd"))
    await qemu.start(ref("cd"))
    assert qemu.vms.pid("cd") is not None
