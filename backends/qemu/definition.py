"""VM definitions of the QEMU backend: one JSON file per VM, written atomically."""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from ..errors import InvalidInput

NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


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
