"""The one image gate (backends/qemu/image_gate.py) against a hostile corpus built with the
real qemu-img: what it refuses in words, what it asks about (naming each file), and that
it never opens a device or a pipe an image names, nor trusts a header qemu-img reads
differently. The QEMU create and import paths over the same corpus are in
test_security_qemu.py."""

from __future__ import annotations

import asyncio
import os
import struct
import subprocess
from pathlib import Path

import pytest

from backends.errors import InvalidInput, NeedsConfirmation
from backends.qemu import image_gate, image_headers
from backends.qemu.image_gate import inspect_image


def qemu_img(*args):
    subprocess.run(["qemu-img", *args], check=True, capture_output=True)


def secret(tmp_path: Path) -> Path:
    path = tmp_path / "id_ed25519"
    path.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n")
    os.chmod(path, 0o600)
    return path


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


async def refused(path, match, **kw) -> InvalidInput:
    with pytest.raises(InvalidInput, match=match) as caught:
        await inspect_image(str(path), **kw)
    assert type(caught.value) is InvalidInput, caught.value  # no question: refused
    return caught.value


async def test_self_contained_images_pass_with_their_format(tmp_path):
    before = open_fds()
    for fmt in ("raw", "qcow2", "vmdk", "vdi", "vhdx", "vpc"):
        path = tmp_path / f"img.{fmt}"
        qemu_img("create", "-f", fmt, str(path), "1M")
        with await inspect_image(str(path)) as gated:
            assert (gated.format, gated.references) == (fmt, ())
            assert gated.virtual_size >= 1 << 20
            assert gated.needs_conversion is (fmt not in ("raw", "qcow2"))
            assert gated.source == f"/dev/fd/{gated.fd}"  # tools read the checked file
    assert open_fds() == before


async def test_protocols_json_devices_pipes_and_descriptors_are_refused(tmp_path):
    key = secret(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opening it would hang: the gate must never open it
    cases = []
    for name, backing in (("json", 'json:{"driver":"raw","file":{"driver":"file",'
                                   '"filename":"/etc/shadow"}}'),
                          ("nbd", "nbd:127.0.0.1:10809"), ("http", "http://127.0.0.1/x"),
                          ("dev", "/dev/zero"), ("fifo", str(fifo)),
                          ("missing", str(tmp_path / "nothing-here"))):
        path = tmp_path / f"{name}.qcow2"
        qemu_img("create", "-f", "qcow2", "-u", "-F", "raw", "-b", backing, str(path), "1M")
        cases.append((path, {"json": "protocol or json: options", "nbd": "protocol",
                             "http": "protocol", "dev": "/dev/zero, which is a device",
                             "fifo": "fifo, which is not a regular file",
                             "missing": "nothing-here, which cannot be used"}[name]))
    flat = tmp_path / "flat.vmdk"
    flat.write_text('# Disk DescriptorFile\nversion=1\nCID=fffffffe\nparentCID=ffffffff\n'
                    f'createType="monolithicFlat"\n\nRW 1 FLAT "{key}" 0\n'
                    'RW 8 FLAT "/dev/sda" 0\n')
    cases.append((flat, f'VMDK descriptor.*FLAT "{key}", FLAT "/dev/sda"'))
    bare = tmp_path / "bare.img"  # what QEMU's own probe takes for a descriptor
    bare.write_text(f'version=1\nRW 1 FLAT "{key}" 0\n')
    cases.append((bare, "VMDK descriptor"))
    embedded = tmp_path / "embedded.vmdk"  # a sparse header of capacity 0: QEMU reads
    header = b"KDMV" + struct.pack("<IIQQQQIQQQ", 1, 3, 0, 128, 1, 20, 512, 0, 0, 0)
    embedded.write_bytes(header.ljust(512, b"\0") + (  # its embedded descriptor instead
        f'# Disk DescriptorFile\nversion=1\nCID=fffffffe\nparentCID=ffffffff\n'
        f'createType="monolithicFlat"\nRW 1 FLAT "{key}" 0\n').encode().ljust(10240, b"\0"))
    cases.append((embedded, f'VMDK descriptor.*FLAT "{key}"'))
    parent = tmp_path / "child.vmdk"  # a sparse VMDK naming a json: parent
    qemu_img("create", "-f", "vmdk", str(parent), "1M")
    data = bytearray(parent.read_bytes())
    at = data.index(b'parentCID=ffffffff\n') + len(b'parentCID=ffffffff\n')
    hint = b'parentFileNameHint="json:{}"\n'
    data[at:at + len(hint)] = hint
    parent.write_bytes(data)
    cases.append((parent, "it names its backing file as 'json:"))
    qed = tmp_path / "x.qed"
    qemu_img("create", "-f", "qed", str(qed), "1M")
    cases.append((qed, "QED image"))
    mid = tmp_path / "mid.qcow2"  # the json: name one layer down
    qemu_img("create", "-f", "qcow2", "-u", "-F", "raw", "-b", "json:{}", str(mid), "1M")
    top = tmp_path / "top.qcow2"
    qemu_img("create", "-f", "qcow2", "-u", "-F", "qcow2", "-b", str(mid), str(top), "1M")
    cases.append((top, "its backing file .*mid.qcow2 names its backing file as 'json:"))
    loop, other = tmp_path / "loop.qcow2", tmp_path / "other.qcow2"
    qemu_img("create", "-f", "qcow2", "-u", "-F", "qcow2", "-b", str(other), str(loop), "1M")
    qemu_img("create", "-f", "qcow2", "-u", "-F", "qcow2", "-b", str(loop), str(other), "1M")
    cases.append((loop, "loops"))
    before = open_fds()
    for path, why in cases:
        for confirmed in (False, True):  # no agreement lets these through
            await asyncio.wait_for(refused(path, why, confirmed=confirmed), 20)
    await refused(fifo, "not a regular file")
    await refused("/dev/zero", "not a regular file")
    assert open_fds() == before


async def test_backing_and_data_files_are_asked_about_by_name(tmp_path):
    key = secret(tmp_path)
    data = tmp_path / "ext.data"
    base = tmp_path / "base.qcow2"
    qemu_img("create", "-f", "qcow2", "-o", f"data_file={data}", str(base), "1M")
    top = tmp_path / "top.qcow2"
    qemu_img("create", "-f", "qcow2", "-F", "qcow2", "-b", str(base), str(top))
    trap = tmp_path / "disk.raw"  # named raw, really a qcow2 backed by the secret
    qemu_img("create", "-f", "qcow2", "-F", "raw", "-b", str(key), str(trap), "1M")
    with pytest.raises(NeedsConfirmation) as caught:
        await inspect_image(str(top))
    assert caught.value.option == "allow_backing"
    assert f"the backing file {base}" in caught.value.message
    assert f"the external data file {data} (named by {base})" in caught.value.message
    # agreement to exactly what was shown passes; a different set is asked again
    with await inspect_image(str(top), confirmed={str(base), str(data)}) as gated:
        assert [(r.kind, r.path, r.format) for r in gated.references] == [
            ("backing file", str(base), "qcow2"), ("external data file", str(data), "raw")]
        assert gated.source.startswith("json:")  # the chain over the checked files
        assert str(tmp_path) not in gated.source and len(gated.pass_fds) == 3
    with pytest.raises(NeedsConfirmation):
        await inspect_image(str(top), confirmed={str(base)})
    with pytest.raises(NeedsConfirmation, match=f"backing file {key}.*format raw"):
        await inspect_image(str(trap))
    # the user's word that it is raw: read as bytes, nothing referenced
    with await inspect_image(str(trap), fmt="raw") as gated:
        assert (gated.format, gated.references) == ("raw", ())


async def test_a_confirmed_chain_is_read_as_checked_after_its_names_change(tmp_path):
    """The check/use boundary of an image with references: once checked (and agreed
    to), the image and its backing file are swapped for qcow2 files backed by a secret;
    the copy still holds the checked files' bytes, read through their descriptors, with
    the formats corral read them as."""
    key = secret(tmp_path)
    base = tmp_path / "base.raw"
    base.write_bytes(b"checked-base".ljust(1 << 20, b"\0"))
    top = tmp_path / "top.qcow2"
    qemu_img("create", "-f", "qcow2", "-F", "raw", "-b", str(base), str(top))
    before = open_fds()
    out = tmp_path / "out.qcow2"
    with await inspect_image(str(top), confirmed=True) as gated:
        for name in (top, base):
            name.rename(name.with_suffix(".old"))
            qemu_img("create", "-f", "qcow2", "-F", "raw", "-b", str(key), str(name), "1M")
        await image_gate.copy_to_qcow2(gated, str(out))
    assert open_fds() == before
    flat = tmp_path / "out.raw"
    qemu_img("convert", "-f", "qcow2", "-O", "raw", str(out), str(flat))
    content = flat.read_bytes()
    assert content.startswith(b"checked-base") and b"secret" not in content


async def test_a_chain_other_users_may_rewrite_is_not_read(tmp_path):
    """Its descriptors pin each layer's backing, but not what a header rewritten in place
    could add (an external data file, opened by name): a layer others may write is
    refused when the chain is to be read; raw bytes name nothing and may be."""
    base = tmp_path / "base.raw"
    base.write_bytes(b"\0" * (1 << 20))
    top = tmp_path / "top.qcow2"
    qemu_img("create", "-f", "qcow2", "-F", "raw", "-b", str(base), str(top))
    base.chmod(0o666)
    with await inspect_image(str(top), confirmed=True) as gated:
        assert await image_gate.settled(gated, str(tmp_path / "s")) is gated
    top.chmod(0o666)
    with await inspect_image(str(top), confirmed=True) as gated:
        with pytest.raises(InvalidInput, match="may be rewritten by other users"):
            await image_gate.settled(gated, str(tmp_path / "s"))
    assert not (tmp_path / "s").exists()


async def test_a_header_qemu_img_reads_differently_is_refused(tmp_path, monkeypatch):
    """The check/use boundary: corral's header reading and qemu-img's must agree (here
    corral's reading is made to miss the backing file, as if the file changed between)."""
    key = secret(tmp_path)
    image = tmp_path / "changed.qcow2"
    qemu_img("create", "-f", "qcow2", "-F", "raw", "-b", str(key), str(image), "1M")
    real = image_headers.read_header

    def blind(path, fmt=None, fd=None):
        return image_headers.Header(real(path, fmt, fd).format)

    monkeypatch.setattr(image_gate, "read_header", blind)
    await refused(image, "qemu-img.*(refers to|reads its chain)")


async def test_a_descriptor_is_not_taken_for_another_format(tmp_path):
    """Formats are corral's word or the header's, never QEMU's probing."""
    key = secret(tmp_path)
    flat = tmp_path / "flat.qcow2"
    flat.write_text(f'version=1\nRW 1 FLAT "{key}" 0\n')
    await refused(flat, "is not a qcow2 file", fmt="qcow2")
    with await inspect_image(str(flat), fmt="raw") as gated:  # the user says raw: bytes
        assert gated.references == ()
    await refused(flat, "Unknown image format", fmt="host_device")
