"""What an import understood: :class:`Described` is a foreign VM as its descriptor says
(written by the parsers :mod:`.ovf`, :mod:`.vbox` and :mod:`.libvirt_xml`, which touch no
file), :class:`ImportPlan` the same with each disk found, gated and measured, the target
size and the free space — what the summary shows before anything is written into the VM
directory, in words."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

from ..image_gate import GatedImage

FORMATS = ("raw", "qcow2", "vmdk", "vdi", "vhdx", "vpc")
MAX_CAPACITY = 64 << 40
"""The largest disk an import takes (64 TiB; a bigger declared capacity is refused)."""
MAX_MEMORY_MIB = 16 << 20  # 16 TiB
MAX_CPUS = 1024


@dataclasses.dataclass
class DiskRef:
    """A disk as the descriptor names it."""

    file: str
    """The file's name as written (an OVF ``href``, a ``.vbox`` location, a libvirt
    source path)."""
    format: str | None = None
    """The format the descriptor declares (one of :data:`FORMATS`), None: read it from
    the file's header."""
    capacity: int = 0
    """The virtual size the descriptor declares (0: not said)."""
    file_size: int = 0
    """The file's size the descriptor declares (0: not said)."""
    where: str = ""
    """Where it was attached, in words ("SATA port 0", "vda on virtio")."""


@dataclasses.dataclass
class Described:
    """A VM as its descriptor says, and what of it corral can and cannot map."""

    kind: str
    """``OVF`` (an OVA or an OVF folder), ``VirtualBox machine`` or ``libvirt domain``."""
    name: str = ""
    cpus: int = 1
    memory_mib: int = 512
    firmware: str = "bios"
    os_type: str = ""
    disks: list[DiskRef] = dataclasses.field(default_factory=list)
    macs: list[str] = dataclasses.field(default_factory=list)
    """MACs of the NICs, in order (normalised ``aa:bb:cc:dd:ee:ff``; "" where none)."""
    understood: list[str] = dataclasses.field(default_factory=list)
    unmapped: list[str] = dataclasses.field(default_factory=list)
    """What the VM has and a corral VM will not, in words."""
    problems: list[str] = dataclasses.field(default_factory=list)
    """Why it cannot be imported at all, in words (empty: it can)."""

    def nic_words(self, models: list[str], networks: list[str]) -> None:
        """Note the NICs: the first becomes corral's one virtio NIC with its MAC (QEMU's
        user networking), the others are not kept."""
        if not self.macs:
            self.understood.append("no network card: the VM gets none")
            return
        first = self.macs[0]
        self.understood.append(
            "network card 1" + (f" (MAC {first})" if first else "")
            + (f", a {models[0]}" if models and models[0] else "")
            + " becomes a virtio NIC on QEMU's user networking (NAT), same MAC")
        if networks and networks[0] and networks[0].lower() not in ("nat", "user"):
            self.unmapped.append(f"network card 1 was on '{networks[0]}': corral VMs use "
                                 f"QEMU's user networking (NAT) instead")
        for i in range(1, len(self.macs)):
            self.unmapped.append(f"network card {i + 1}"
                                 + (f" (MAC {self.macs[i]})" if self.macs[i] else "")
                                 + ": a corral VM has one NIC, this one is left out")


def mac_address(value: str) -> str:
    """A MAC in corral's spelling, from ``080027A1B2C3``, ``08-00-27-…`` or
    ``08:00:27:…``; "" for anything else (or a multicast address)."""
    digits = re.sub(r"[:\-.]", "", value.strip()).lower()
    if not re.fullmatch(r"[0-9a-f]{12}", digits) or int(digits[1], 16) & 1:
        return ""
    return ":".join(digits[i:i + 2] for i in range(0, 12, 2))


@dataclasses.dataclass
class PlannedDisk:
    ref: DiskRef
    path: str
    """Absolute path of the file read (inside the package or scratch copy)."""
    gated: GatedImage | None = None
    required: int = 0
    """Bytes its qcow2 copy needs (``qemu-img measure``)."""
    confirm: tuple[str, ...] = ()
    """Files it refers to that the summary names and the user agrees to (libvirt
    overlays' backing files)."""

    def words(self, number: int) -> str:
        g = self.gated
        what = f"{g.format}, {_size(g.virtual_size)}" if g else "not read"
        extra = (f"; its backing files {', '.join(self.confirm)} are copied in"
                 if self.confirm else "")
        return (f"disk {number}: {self.ref.file}"
                + (f" ({self.ref.where})" if self.ref.where else "")
                + f" — {what}, about {_size(self.required)} as qcow2{extra}")


@dataclasses.dataclass
class ImportPlan:
    """Everything the summary says; what :meth:`Importer.import_vm` carries out."""

    source: str
    """The path the user gave (absolute)."""
    described: Described
    disks: list[PlannedDisk]
    target_bytes: int
    """What the new VM's disks need."""
    free_bytes: int
    """Free space where the VM is made (after any unpacking)."""
    directory: str
    """Where the VM is made (the VMs' directory)."""
    scratch: Path | None = None
    """A private directory an archive was unpacked into (removed by :meth:`close`)."""
    stamp: tuple[int, int, int] = (0, 0, 0)
    """The source's (device, inode, modification time) when planned."""

    @property
    def problems(self) -> list[str]:
        problems = [p.rstrip(".") for p in self.described.problems]
        if not self.disks and not problems:
            problems.append("it has no disk corral can import")
        if self.target_bytes > self.free_bytes:
            problems.append(f"its disks need about {_size(self.target_bytes)}, but only "
                            f"{_size(self.free_bytes)} are free in {self.directory}")
        return problems

    def summary(self) -> list[str]:
        """The summary page, one line each."""
        d = self.described
        lines = [f"{d.kind}: {self.source}"]
        lines += [f"understood: {line}" for line in d.understood]
        lines += [f"disk order: {p.words(i + 1)}" for i, p in enumerate(self.disks)]
        lines += [f"not mapped: {line}" for line in d.unmapped]
        lines.append(f"target size on disk: about {_size(self.target_bytes)}; free in "
                     f"{self.directory}: {_size(self.free_bytes)}")
        lines += [f"cannot import: {line}" for line in self.problems]
        return lines

    def close(self) -> None:
        """Close the gated disks and remove an unpacked archive."""
        for disk in self.disks:
            if disk.gated:
                disk.gated.close()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    def __enter__(self) -> ImportPlan:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _size(n: int) -> str:
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} bytes"


size_words = _size
