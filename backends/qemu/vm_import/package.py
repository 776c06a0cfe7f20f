"""Where a VM to import comes from, read without trusting it: which kind of source a path
is (an ``.ova``, an OVF folder or ``.ovf``, a VirtualBox machine folder or ``.vbox``, a
libvirt domain XML), its descriptor read from a regular file of bounded size, an OVA
unpacked through the one archive reader (:class:`OVAPolicy`) with its manifest checked,
and each disk's name resolved to a file inside the package."""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tarfile
from pathlib import Path

from ...archive import ArchiveRefused, Policy, shown
from ...errors import InvalidInput
from ...work import Worker
from ..host_paths import NotRegular, open_regular
from .plan import size_words
from .xmlsafe import LIMIT

OVA, OVF, VBOX, LIBVIRT = "OVA", "OVF", "VirtualBox machine", "libvirt domain"
DISK_SUFFIXES = (".vmdk", ".vdi", ".vhd", ".vhdx", ".img", ".raw", ".qcow2", ".bin")
RESERVE = 64 << 20
"""Space an unpacked archive leaves free at least (the VM's own files need some)."""


def read_descriptor(path: str) -> bytes:
    """The bytes of a descriptor file from outside: a regular file (no device is opened)
    of at most :data:`~.xmlsafe.LIMIT` bytes.

    Raises:
        InvalidInput: not a regular file, unreadable or too large.
    """
    try:
        fd = open_regular(path)
    except NotRegular:
        raise InvalidInput(f"{path} is not a regular file.") from None
    except OSError as e:
        raise InvalidInput(f"{path} cannot be read ({e.strerror}).") from None
    with os.fdopen(fd, "rb") as f:
        data = f.read(LIMIT + 1)
    if len(data) > LIMIT:
        raise InvalidInput(f"{path} is larger than a VM descriptor can be ({LIMIT} bytes).")
    return data


def kind_of(path: str) -> tuple[str, str]:
    """(kind, descriptor path) of what the user named; for an OVA the archive itself.

    Raises:
        InvalidInput: it is none of the kinds, or a folder holds none or several.
    """
    try:
        st = os.stat(path)
    except OSError as e:
        raise InvalidInput(f"{path} cannot be used ({e.strerror}).") from None
    if stat.S_ISDIR(st.st_mode):
        for suffix, kind in ((".ovf", OVF), (".vbox", VBOX)):
            found = sorted(n for n in os.listdir(path) if n.lower().endswith(suffix))
            if len(found) > 1:
                raise InvalidInput(f"{path} holds several {suffix} files "
                                   f"({', '.join(found)}): name the one to import.")
            if found:
                return kind, os.path.join(path, found[0])
        raise InvalidInput(f"{path} holds no .ovf descriptor and no VirtualBox .vbox file.")
    if not stat.S_ISREG(st.st_mode):
        raise InvalidInput(f"{path} is not a regular file or a folder.")
    lower = path.lower()
    for suffix, kind in ((".ova", OVA), (".ovf", OVF), (".vbox", VBOX), (".xml", LIBVIRT)):
        if lower.endswith(suffix):
            return kind, path
    try:
        with os.fdopen(open_regular(path), "rb") as f:  # never a device, even if swapped
            head = f.read(512)
    except (OSError, NotRegular):
        raise InvalidInput(f"{path} cannot be read as a regular file.") from None
    if head[257:262] == b"ustar":
        return OVA, path
    text = head.decode("utf-8", "replace")
    for needle, kind in (("<domain", LIBVIRT), ("<VirtualBox", VBOX), ("Envelope", OVF)):
        if needle in text:
            return kind, path
    raise InvalidInput(f"{path} is not something corral imports: give an .ova, an .ovf, a "
                       f"VirtualBox .vbox file or machine folder, or a libvirt domain XML.")


class OVAPolicy(Policy):
    """An OVA: the descriptor first (as the OVF standard requires), then only the files
    it names, a manifest (``.mf``) and a certificate (``.cert``), all plain files at the
    top; each no larger than the free space it would take."""

    where = "the import's private folder"

    def __init__(self, into: Path) -> None:
        self.into = into
        self.ovf = ""
        self.named: set[str] = set()
        self.first = True

    def check(self, name: str, member: tarfile.TarInfo) -> str | None:
        first, self.first = self.first, False
        if "/" in name:
            return f"it holds '{name}' in a folder; an OVA holds its files at the top"
        if not member.isreg():
            return f"its member '{name}' is not a plain file (a link, device or folder)"
        lower = name.lower()
        if first and not lower.endswith(".ovf"):
            return f"its first member is '{name}', not the .ovf descriptor"
        if not first and lower.endswith(".ovf"):
            return f"it holds a second descriptor '{name}'"
        if not (first or lower.endswith((".mf", ".cert")) or name in self.named):
            return f"it holds '{name}', which its descriptor does not name"
        st = os.statvfs(self.into)
        free = st.f_bavail * st.f_frsize - RESERVE
        if member.size > free:
            return (f"its member '{name}' is {size_words(member.size)}, more than the "
                    f"{size_words(max(0, free))} free in {self.into.parent}")
        return None

    def keep(self, name: str) -> bool:
        return name.lower().endswith((".ovf", ".mf", ".cert"))

    def kept(self, name: str, data: bytes) -> None:
        if name.lower().endswith(".ovf"):
            self.ovf = name
            # every href, before the files come: only those may follow
            self.named = {m.decode("utf-8", "replace") for m in
                          re.findall(rb'href\s*=\s*["\']([^"\']*)["\']', data)}


def read_ova(worker: Worker, path: str, into: Path) -> tuple[str, bytes, dict[str, bytes]]:
    """Unpack the OVA ``path`` into the private folder ``into`` (run in a thread):
    (descriptor name, its bytes, the other kept members). The manifest's digests are
    checked against what was unpacked.

    Raises:
        ArchiveRefused: in words.
    """
    from ...archive import read_archive

    policy = OVAPolicy(into)
    kept = read_archive(worker, path, into, policy, label="unpacking the OVA")
    if not policy.ovf:
        raise ArchiveRefused("it holds no .ovf descriptor")
    descriptor = kept.pop(policy.ovf)
    for name, data in kept.items():
        if name.lower().endswith(".mf"):
            check_manifest(worker, data, into, {policy.ovf: descriptor})
    return policy.ovf, descriptor, kept


_MF_LINE = re.compile(r"^\s*(SHA1|SHA256|SHA512|MD5)\s*\((.+)\)\s*=\s*([0-9a-fA-F]+)\s*$")


def check_manifest(worker: Worker, data: bytes, folder: Path,
                   in_memory: dict[str, bytes]) -> None:
    """Every digest of the manifest ``data`` matches its file (in ``folder``, or among
    ``in_memory``).

    Raises:
        ArchiveRefused: a line not understood, a file missing or a digest differs.
    """
    for line in data.decode("utf-8", "replace").splitlines():
        if not line.strip():
            continue
        m = _MF_LINE.match(line)
        if not m:
            raise ArchiveRefused(f"its manifest has a line corral does not understand: "
                                 f"{shown(line[:80])!r}")
        algo, name, digest = m[1].lower(), m[2], m[3].lower()
        h = hashlib.new(algo)
        if name in in_memory:
            h.update(in_memory[name])
        else:
            if "/" in name or name in ("", ".", "..") or not (folder / name).is_file():
                raise ArchiveRefused(f"its manifest names '{shown(name)}', which it does "
                                     f"not hold")
            with open(folder / name, "rb") as f:
                while chunk := f.read(4 << 20):
                    worker.check()
                    h.update(chunk)
        if h.hexdigest() != digest:
            raise ArchiveRefused(f"'{shown(name)}' does not match its manifest's {m[1]} "
                                 f"digest (damaged or changed)")


def disk_path(kind: str, base: str, name: str) -> str:
    """The file a descriptor's disk name ``name`` means, checked: inside the package
    folder ``base`` for OVF and VirtualBox (no ``..``, no way out through a link); for a
    libvirt domain an absolute path.

    Raises:
        InvalidInput: in words, naming the disk.
    """
    if not name or any(ord(c) < 32 for c in name):
        raise InvalidInput(f"the disk name {shown(name)!r} is empty or holds control "
                           f"characters")
    if kind == LIBVIRT:
        if not os.path.isabs(name):
            raise InvalidInput(f"the disk {shown(name)!r} is not an absolute path")
        return os.path.normpath(name)
    if kind in (OVF, OVA) and ("/" in name or "\\" in name or name in (".", "..")):
        raise InvalidInput(f"the disk {shown(name)!r} is not a file name inside the "
                           f"package (OVF disks are files beside the descriptor)")
    if ".." in re.split(r"[/\\]", name):
        raise InvalidInput(f"the disk {shown(name)!r} leaves the machine folder ('..')")
    full = os.path.normpath(os.path.join(base, name))
    real_base = os.path.realpath(base)
    if os.path.commonpath([os.path.realpath(full), real_base]) != real_base:
        raise InvalidInput(f"the disk {shown(name)!r} is outside the "
                           f"{'package' if kind in (OVF, OVA) else 'machine folder'} "
                           f"{base} (move it there, or convert it yourself)")
    return full
