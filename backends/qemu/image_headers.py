"""corral's own reading of a disk image's header, before any tool opens the image
(:mod:`.image_gate`): its format by magic number (never QEMU's probing), and the other
files the header makes QEMU open — a qcow2 backing file and external data file, a VMDK
parent, a VMDK descriptor's extents. Blocking file reads: call from a thread."""

from __future__ import annotations

import dataclasses
import os
import re
import struct

from .host_paths import NotRegular, open_regular

USABLE = ("raw", "qcow2")
"""Formats a VM's disk may be, or be an overlay of."""
CONVERTED = ("vmdk", "vdi", "vhdx", "vpc")
"""Formats corral converts into a fresh qcow2 before use."""

_MAGICS = ((0, b"QFI\xfb", "qcow2"), (0, b"KDMV", "vmdk"), (0, b"vhdxfile", "vhdx"),
           (0, b"conectix", "vpc"), (64, b"\x7f\x10\xda\xbe", "vdi"))
_REFUSED = ((0, b"QED\0", "QED"), (0, b"LUKS\xba\xbe", "LUKS (encrypted)"),
            (0, b"COWD", "VMDK version 3"), (0, b"WithoutFreeSpace", "Parallels"),
            (0, b"WithouFreSpacExt", "Parallels"), (0, b"Bochs Virtual HD Image", "Bochs"),
            (0, b"#!/bin/sh\n#V2.0 Format\nmodprobe cloop", "cloop"))
_EXTENT = re.compile(r'^\s*(?:RW|RDONLY|NOACCESS)\s+\d+\s+(\w+)(?:\s+"([^"]*)")?', re.M)
_QCOW2_BACKING_FORMAT, _QCOW2_DATA_FILE = 0xE2792ACA, 0x44415441
_QCOW2_INCOMPAT_DATA_FILE = 1 << 2


@dataclasses.dataclass(frozen=True)
class Header:
    format: str
    backing: str | None = None
    """The backing file's name as the header holds it (relative to the image's folder
    unless absolute)."""
    backing_format: str | None = None
    data_file: str | None = None
    problem: str = ""
    """Why it is refused outright ("" for none), in words."""


def _vmdk_descriptor(head: bytes) -> bool:
    """A text VMDK descriptor, as QEMU's own probe decides (comments and blank lines,
    then ``version=N``), or anything carrying the descriptor's signature line."""
    text = head[:2048].decode("latin-1")
    if "# Disk DescriptorFile" in text:
        return True
    for line in text.split("\n"):
        if line.startswith("#") or not line.strip(" \r"):
            continue
        return line.rstrip("\r") in ("version=1", "version=2", "version=3")
    return False


def _descriptor_problem(head: bytes) -> str:
    text = head.decode("latin-1")
    named = [f'{kind} "{name}"' if name else kind for kind, name in _EXTENT.findall(text)]
    parent = re.search(r'parentFileNameHint\s*=\s*"([^"]*)"', text)
    if parent:
        named.append(f'parent "{parent[1]}"')
    return ("is a VMDK descriptor: its data are in other files or devices"
            + (f" ({', '.join(named)})" if named else "")
            + ", which corral does not open. Convert it to one qcow2 file yourself, "
              "as a user who may read those files (qemu-img convert -f vmdk -O qcow2 …), "
              "or give the format raw if it is really a raw disk")


def _sniff(head: bytes) -> tuple[str, str]:
    """(format, problem) by magic number; unknown content is raw."""
    for offset, magic, fmt in _MAGICS:
        if head[offset:offset + len(magic)] == magic:
            return fmt, ""
    for offset, magic, name in _REFUSED:
        if head[offset:offset + len(magic)] == magic:
            return "", (f"is a {name} image, which corral does not take (it takes raw, "
                        f"qcow2, vmdk, vdi, vhdx, vhd): convert it first, or give the "
                        f"format raw if it is really a raw disk")
    if _vmdk_descriptor(head):
        return "vmdk", _descriptor_problem(head)
    return "raw", ""


def _qcow2(f, head: bytes) -> Header:  # a binary file
    if len(head) < 72:
        return Header("qcow2", problem="is a truncated qcow2 file")
    version, backing_offset, backing_size, cluster_bits = struct.unpack(">IQII", head[4:24])
    crypt = struct.unpack(">I", head[32:36])[0]
    if version not in (2, 3):
        return Header("qcow2", problem=f"is a qcow version {version} file, which corral "
                                       f"does not take")
    if crypt:
        return Header("qcow2", problem="is an encrypted qcow2 file, which corral does "
                                       "not take")
    if not 9 <= cluster_bits <= 21:
        return Header("qcow2", problem="is a damaged qcow2 file (cluster size)")
    cluster = 1 << cluster_bits
    if len(head) < cluster:
        head += f.read(cluster - len(head))
    incompatible, ext_start = 0, 72
    if version == 3:
        if len(head) < 104:
            return Header("qcow2", problem="is a truncated qcow2 file")
        incompatible = struct.unpack(">Q", head[72:80])[0]
        ext_start = struct.unpack(">I", head[100:104])[0]
    backing = None
    if backing_offset:
        if backing_offset > cluster or backing_size > 1023:
            return Header("qcow2", problem="is a damaged qcow2 file (backing file name)")
        backing = head[backing_offset:backing_offset + backing_size].decode(
            errors="replace")
    backing_format = data_file = None
    offset = ext_start
    while offset + 8 <= min(len(head), cluster):
        kind, length = struct.unpack(">II", head[offset:offset + 8])
        if kind == 0:
            break
        data = head[offset + 8:offset + 8 + length]
        if kind == _QCOW2_BACKING_FORMAT:
            backing_format = data.decode(errors="replace")
        elif kind == _QCOW2_DATA_FILE:
            data_file = data.decode(errors="replace")
        offset += 8 + ((length + 7) & ~7)
    if incompatible & _QCOW2_INCOMPAT_DATA_FILE and not data_file:
        return Header("qcow2", problem="is a qcow2 file that needs an external data file "
                                       "it does not name")
    if backing_format is not None and backing_format not in USABLE + CONVERTED:
        return Header("qcow2", problem=f"names a backing file of the format "
                                       f"{backing_format!r}, which corral does not take")
    return Header("qcow2", backing, backing_format, data_file)


def _vmdk_sparse(f, head: bytes) -> Header:  # a binary file
    if len(head) < 36:
        return Header("vmdk", problem="is a truncated VMDK file")
    capacity, _grain, desc_offset = struct.unpack("<QQQ", head[12:36])
    if capacity == 0 and desc_offset:
        # QEMU then reads the embedded descriptor (at desc_offset sectors) instead, and
        # its extents, like a descriptor file's, are other files or devices
        f.seek(desc_offset << 9)
        return Header("vmdk", problem=_descriptor_problem(f.read(65536)))
    # QEMU reads a sparse VMDK's embedded descriptor at 0x200 for its parent
    desc = head[0x200:0x200 + 20 * 512]
    at = desc.find(b"parentFileNameHint")
    if at < 0:
        return Header("vmdk")
    rest = desc[at + len(b"parentFileNameHint") + 2:]
    end = rest.find(b'"')
    if end < 0:
        return Header("vmdk", problem="is a damaged VMDK file (its parent's name)")
    return Header("vmdk", backing=rest[:end].decode(errors="replace"))


def read_header(path: str, fmt: str | None = None, fd: int | None = None) -> Header:
    """The header of the image at ``path`` (or open on ``fd``, which stays open), read
    as ``fmt`` when given (the user's or corral's own word), else as its magic number
    says (unknown content: raw).

    Raises:
        OSError: it cannot be read.
    """
    if fd is not None:
        fd = os.dup(fd)
        os.lseek(fd, 0, os.SEEK_SET)
    else:
        try:
            fd = open_regular(path)
        except NotRegular:
            return Header(fmt or "", problem="is not a regular file (a device, pipe or "
                                             "directory)")
    with os.fdopen(fd, "rb") as f:
        head = f.read(65536)
        if fmt == "raw":
            return Header("raw")  # raw is read as bytes: nothing in it names a file
        found, problem = _sniff(head)
        if fmt is not None and found != fmt:
            return Header(fmt, problem=f"is not a {fmt} file")
        if problem:
            return Header(found, problem=problem)
        if found == "qcow2":
            return _qcow2(f, head)
        if found == "vmdk":
            return _vmdk_sparse(f, head)
        return Header(found)
