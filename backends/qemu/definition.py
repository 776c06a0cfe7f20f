"""VM definitions of the QEMU backend: one JSON file per VM, written atomically."""

from __future__ import annotations

import json
import os
import re
import struct
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from ..errors import InvalidInput

NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


MAC_RE = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")


def new_mac() -> str:
    """A random MAC in QEMU's 52:54:00 range."""
    return "52:54:00:" + ":".join(f"{b:02x}" for b in os.urandom(3))


def check_name(name: str) -> None:
    if not NAME_RE.match(name):
        raise InvalidInput(
            f"'{name}' is not a valid VM name: use lower-case letters, digits and '-', "
            f"starting and ending with a letter or digit, at most 63 characters.")


@dataclass
class VMDefinition:
    name: str
    cpus: int = 1
    max_cpus: int = 4
    memory_mib: int = 512
    accel: str = "auto"
    """``kvm``, ``tcg`` or ``auto`` (KVM when /dev/kvm is usable)."""
    firmware: str = "bios"
    """``bios`` (SeaBIOS) or ``uefi`` (OVMF with a private variables file)."""
    disks: list[str] = field(default_factory=list)
    """qcow2 files, relative to the VM's directory."""
    iso: str = ""
    kernel: str = ""
    initrd: str = ""
    cmdline: str = ""
    boot: str = "disk"
    """``disk``, ``cdrom``, ``network`` or ``kernel``."""
    network: str = "user"
    """``user`` (QEMU's NAT) or ``none``."""
    description: str = ""
    created_at: str = ""
    memory_target_mib: int = 0
    """Balloon target (0: all of ``memory_mib``)."""
    io_limits: dict[str, int] = field(default_factory=dict)
    """Disk IO limits: read_bps, write_bps, read_iops, write_iops (0: none)."""
    mac: str = ""
    """MAC address of the NIC ("": QEMU's default, 52:54:00:12:34:56). Clones get a new
    one."""
    linked_to: str = ""
    """A linked clone: the name of the VM (in the same directory) whose disks back this
    VM's disks (qcow2 backing files). That VM must then stay unchanged: it is not started,
    restored, renamed without rebasing or deleted while this clone exists."""

    def save(self, directory: Path) -> None:
        path = directory / "vm.json"
        tmp = directory / ".vm.json.tmp"
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        os.replace(tmp, path)

    @classmethod
    def load(cls, directory: Path) -> VMDefinition:
        data = json.loads((directory / "vm.json").read_text())
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


DISK_RE = re.compile(r"^disk[0-9]{1,3}\.qcow2$")


def qcow2_backing(path: Path) -> str | None:
    """The backing file a qcow2 file's header names (made absolute against the file's
    directory), read directly: no qemu-img, so cheap enough for every start."""
    try:
        with open(path, "rb") as f:
            head = f.read(20)
            if len(head) < 20 or head[:4] != b"QFI\xfb":
                return None
            offset, size = struct.unpack(">QI", head[8:20])
            if not offset or not 0 < size <= 4096:
                return None
            f.seek(offset)
            name = f.read(size).decode(errors="replace")
    except OSError:
        return None
    if name.startswith("json:"):
        return name
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), name))
