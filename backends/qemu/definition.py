"""VM definitions of the QEMU backend: one JSON file per VM, written atomically, and the
QEMU command line that runs one."""

from __future__ import annotations

import json
import os
import re
import struct
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from ..errors import InvalidInput
from ..paths import read_owned
from .files import PendingWrite, write_durably
from .monitors import monitor_args

QEMU = "qemu-system-x86_64"
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

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    def save(self, directory: Path) -> None:
        """Write ``vm.json`` atomically and durably (see :mod:`.files`).

        Raises:
            OperationFailed: it could not be written (disk full, ...); the old file stands.
        """
        write_durably(directory / "vm.json", self.to_json().encode())

    def prepare_save(self, directory: Path) -> PendingWrite:
        """Write the new ``vm.json`` beside the old one, to be put in place by ``commit``:
        a full disk shows before anything else changes."""
        return PendingWrite(directory / "vm.json", self.to_json().encode())

    @classmethod
    def load(cls, directory: Path) -> VMDefinition:
        """The definition in ``directory``. The VM's name is the directory's name, whatever
        the file says: a rename interrupted between moving the directory and saving the
        file must not make the VM boot the disks of another directory. A ``vm.json`` that
        is not this user's own is refused (:func:`~backends.paths.read_owned`)."""
        data = json.loads(read_owned(directory / "vm.json"))
        if not isinstance(data, dict):
            raise TypeError("vm.json does not hold an object")
        known = {f.name for f in fields(cls)}
        d = cls(**{k: v for k, v in data.items() if k in known})
        d.name = directory.name
        return d


DISK_RE = re.compile(r"^disk[0-9]{1,3}\.qcow2$")


def archived_definition(data: bytes, path: str) -> VMDefinition:
    """The ``vm.json`` of an archive, checked: only the fields and values a VM here
    can have (its disks named ``disk<N>.qcow2``, inside the VM's directory)."""
    try:
        raw = json.loads(data)
        if not isinstance(raw, dict):
            raise ValueError("not an object")
        known = {f.name: f for f in fields(VMDefinition)}
        d = VMDefinition(**{k: v for k, v in raw.items() if k in known})
        for name, f in known.items():
            value = getattr(d, name)
            expected = {"int": int, "str": str}.get(str(f.type))
            if expected and (not isinstance(value, expected) or isinstance(value, bool)):
                raise ValueError(f"{name} is not a{'n' if expected is int else ''} "
                                 f"{expected.__name__}")
        if not isinstance(d.disks, list) or not all(
                isinstance(x, str) and DISK_RE.match(x) for x in d.disks):
            raise ValueError("disks must be named disk<N>.qcow2")
        if len(set(d.disks)) != len(d.disks):
            raise ValueError("a disk is listed twice")
        if not isinstance(d.io_limits, dict):
            raise ValueError("io_limits is not an object")
        if d.firmware not in ("bios", "uefi") or d.accel not in ("auto", "kvm", "tcg"):
            raise ValueError("unknown firmware or accelerator")
        if d.network not in ("user", "none") or d.cpus < 1 or d.memory_mib < 32:
            raise ValueError("unknown network, or too few CPUs or too little memory")
    except (ValueError, TypeError) as e:
        raise InvalidInput(f"{path} is not a corral QEMU export: its vm.json is not "
                           f"usable ({e}).") from e
    return d


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


def opt(value: object) -> str:
    """A value inside a QEMU option string (``-drive``, ``-chardev``…): QEMU reads a
    doubled comma as a literal one, a single comma as the start of the next option."""
    return str(value).replace(",", ",,")


def command_line(d: VMDefinition, directory: Path, run: Path, accel: str) -> list[str]:
    """The argv that runs ``d`` detached (``-daemonize``): disks from ``directory``,
    sockets, serial log and pid file in ``run``. QMP monitors (one client each, see
    ``docs/protocols.md``, section "QMP"): ``qmp.sock`` and ``qmp-<N>.sock`` for the
    corrals following the VM (:mod:`.monitors`), ``console-qmp.sock`` for the VGA console
    server. The screen is served on a private VNC socket (``vnc.sock``) for the console
    server's graphical view, with a USB tablet so the pointer is absolute. Every file in an
    option string has its commas escaped and an explicit format (the ISO is ``raw``: never
    probed, so a file that looks like qcow2 cannot name a backing file)."""
    run_ = opt(run)
    argv = [
        QEMU, "-name", d.name, "-machine", "q35", "-accel", accel,
        "-cpu", "host" if accel == "kvm" else "max",
        "-smp", f"{d.cpus},maxcpus={max(d.cpus, d.max_cpus)}", "-m", f"{d.memory_mib}M",
        "-nodefaults", "-display", "none", "-vga", "std",
        "-chardev", f"socket,id=ser0,path={run_}/serial.sock,server=on,wait=off,"
                    f"logfile={run_}/serial.log,logappend=on",
        "-serial", "chardev:ser0",
        *monitor_args(run),  # one per corral following the VM (see .monitors)
        # a second monitor, for the VGA console server (QMP takes one client each)
        "-qmp", f"unix:{run_}/console-qmp.sock,server=on,wait=off",
        "-device", "virtio-balloon-pci,id=balloon0",
        # the screen, for corral's graphical console (and external VNC viewers)
        "-vnc", f"unix:{run_}/vnc.sock",
        "-device", "qemu-xhci,id=xhci0", "-device", "usb-tablet,bus=xhci0.0,id=tablet0",
        "-pidfile", str(run / "qemu.pid"), "-daemonize",
    ]
    if d.firmware == "uefi":
        argv += ["-drive", "if=pflash,format=raw,readonly=on,"
                           "file=/usr/share/OVMF/OVMF_CODE_4M.fd",
                 "-drive", f"if=pflash,format=raw,file={opt(directory)}/OVMF_VARS.fd"]
    for i, disk in enumerate(d.disks):
        argv += ["-drive", f"if=none,id=drive{i},node-name=disk{i},format=qcow2,"
                           f"file={opt(directory / disk)}",
                 "-device", f"virtio-blk-pci,drive=drive{i},id=vblk{i}"
                 + (",bootindex=1" if i == 0 and d.boot == "disk" else "")]
    if d.iso:
        argv += ["-drive", f"if=none,id=cd0,media=cdrom,readonly=on,format=raw,file={opt(d.iso)}",
                 "-device", "ide-cd,drive=cd0" + (",bootindex=0" if d.boot == "cdrom"
                                                  else "")]
    if d.network == "user":
        argv += ["-netdev", "user,id=net0",
                 "-device", "virtio-net-pci,netdev=net0"
                 + (f",mac={d.mac}" if MAC_RE.match(d.mac) else "")
                 + (",bootindex=0" if d.boot == "network" else "")]
    if d.kernel:
        argv += ["-kernel", d.kernel]
        if d.initrd:
            argv += ["-initrd", d.initrd]
        if d.cmdline:
            argv += ["-append", d.cmdline]
    return argv
