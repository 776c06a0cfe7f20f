"""What a new libvirt domain is made of (``create.py``): the host's facts as libvirt's
domain capabilities report them, files on the libvirt host found through the daemon, and
the XML of the domain and its new volumes.

- :func:`host_facts`: the domain type (``kvm`` where the daemon offers KVM, else ``qemu``,
  TCG), the emulator and default machine type, the vCPU maximum, and whether UEFI can be
  chosen (the daemon lists ``efi`` among its firmware values: it has firmware descriptors
  of OVMF and picks the firmware and the NVRAM template itself).
- :func:`host_file`: a path on the libvirt host is read by the daemon, never by corral (on
  ``qemu+ssh://`` it is the server's; on a local URI the daemon's view of this machine):
  a volume of a pool that holds it, else of a transient directory pool defined on its
  directory for the look and destroyed after it (nothing is written there).
- :func:`domain_xml`: virtio disks and NIC, a serial console (``pty``) for corral's
  console, a VNC screen on a unix socket libvirt picks (``V``), a virtio balloon;
  ``host-passthrough`` CPU under KVM only (TCG keeps QEMU's default model).

Everything here blocks or is pure: ``create.py`` calls it in the remote's thread.
"""

from __future__ import annotations

import contextlib
import os
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Iterator

import libvirt

from ..errors import InvalidInput

ACCELS = ("auto", "kvm", "qemu")


@dataclass(frozen=True)
class HostFacts:
    """What the daemon reports for a new domain of one domain type."""

    domain_type: str
    """``kvm`` or ``qemu`` (TCG)."""
    kvm: bool
    """The daemon offers KVM at all (whatever was chosen)."""
    emulator: str
    machine: str
    arch: str
    max_vcpus: int
    host_cpus: int
    uefi: bool
    """``efi`` is among the daemon's firmware values (OVMF descriptors)."""
    passthrough: bool
    """``host-passthrough`` is a supported CPU mode (KVM)."""


def _domcaps(conn: libvirt.virConnect, virttype: str) -> ET.Element | None:
    try:
        return ET.fromstring(conn.getDomainCapabilities(None, None, None, virttype, 0))
    except libvirt.libvirtError:
        return None


def host_facts(conn: libvirt.virConnect, accel: str, remote: str,
               known: dict[str, ET.Element | None] | None = None) -> HostFacts:
    """The facts for ``accel`` (``auto``: KVM when the daemon offers it, else TCG).
    ``known`` keeps the domain capabilities read, by domain type, for the next call."""
    known = {} if known is None else known

    def domcaps(virttype: str) -> ET.Element | None:
        if virttype not in known:
            known[virttype] = _domcaps(conn, virttype)
        return known[virttype]

    if accel not in ACCELS:
        raise InvalidInput(f"The accelerator is one of {', '.join(ACCELS)} ('qemu' is TCG "
                           f"emulation), not '{accel}'.")
    kvm = domcaps("kvm")
    if accel == "kvm" and kvm is None:
        raise InvalidInput(f"The libvirt daemon of {remote} offers no KVM (no /dev/kvm there, "
                           f"or its QEMU cannot use it): choose TCG emulation ('qemu').")
    caps = kvm if accel != "qemu" and kvm is not None else domcaps("qemu")
    if caps is None:
        raise InvalidInput(f"The libvirt daemon of {remote} reports no QEMU domains "
                           f"(getDomainCapabilities failed): it cannot run a new domain.")
    vcpu = caps.find("vcpu")
    firmware = {v.text for v in caps.iterfind("os/enum[@name='firmware']/value")}
    passthrough = caps.find("cpu/mode[@name='host-passthrough']")
    return HostFacts(
        domain_type=caps.findtext("domain", "qemu"), kvm=kvm is not None,
        emulator=caps.findtext("path", ""), machine=caps.findtext("machine", "pc"),
        arch=caps.findtext("arch", "x86_64"),
        max_vcpus=int(vcpu.get("max", "1")) if vcpu is not None else 1,
        host_cpus=int(conn.getInfo()[2] or 1), uefi="efi" in firmware,
        passthrough=passthrough is not None and passthrough.get("supported") == "yes")


# -- files on the libvirt host ------------------------------------------------------------

@dataclass(frozen=True)
class HostFile:
    """A file on the libvirt host, as the daemon sees it."""

    path: str
    fmt: str
    """The format libvirt reads from its header (``raw``, ``qcow2``, …)."""
    capacity: int
    """Its virtual size in bytes (a raw file's size)."""
    volume: libvirt.virStorageVol
    mode: int = 0o644
    """Its permission bits as the daemon reads them."""


def _no_volume(e: libvirt.libvirtError) -> bool:
    return e.get_error_code() in (libvirt.VIR_ERR_NO_STORAGE_VOL,
                                  libvirt.VIR_ERR_NO_STORAGE_POOL)


def _lookup(conn: libvirt.virConnect, path: str) -> libvirt.virStorageVol | None:
    try:
        return conn.storageVolLookupByPath(path)
    except libvirt.libvirtError as e:
        if _no_volume(e):
            return None
        raise


def pool_path(pool: libvirt.virStoragePool) -> str:
    return ET.fromstring(pool.XMLDesc(0)).findtext("target/path", "")


@contextlib.contextmanager
def host_file(conn: libvirt.virConnect, path: str, label: str, host: str
              ) -> Iterator[HostFile]:
    """``path`` on the libvirt host (see the module docstring); a transient pool made to
    find it is destroyed when the block ends.

    Raises:
        InvalidInput: not an absolute path, no such file or directory, a directory, or
            a directory of an inactive pool.
    """
    if not path.startswith("/"):
        raise InvalidInput(f"Give the {label} as an absolute path on {host}'s libvirt host "
                           f"(it is read there, by the daemon): '{path}' is not one.")
    path = os.path.normpath(path)
    directory, base = os.path.split(path)
    missing = InvalidInput(f"The {label} {path} does not exist on {host}'s libvirt host.")
    probe: libvirt.virStoragePool | None = None
    try:
        volume = _lookup(conn, path)
        if volume is None:
            for pool in conn.listAllStoragePools(0):
                if pool_path(pool) != directory:
                    continue
                if not pool.isActive():
                    raise InvalidInput(f"{directory} is the directory of the storage pool "
                                       f"'{pool.name()}' on {host}, which is not active: "
                                       f"start it (virsh pool-start {pool.name()}).")
                pool.refresh(0)  # a file put there since the pool last looked
                volume = _lookup(conn, path)
                if volume is None:
                    raise missing
        if volume is None:
            try:
                probe = conn.storagePoolCreateXML(
                    f"<pool type='dir'><name>corral-probe-{uuid.uuid4().hex[:12]}</name>"
                    f"<target><path>{_escaped(directory)}</path></target></pool>", 0)
            except libvirt.libvirtError as e:
                if e.get_error_code() == libvirt.VIR_ERR_SYSTEM_ERROR:
                    raise InvalidInput(f"The directory of the {label}, {directory}, cannot "
                                       f"be read on {host}'s libvirt host: "
                                       f"{(e.get_error_message() or '').strip()}") from None
                raise
            try:
                volume = probe.storageVolLookupByName(base)
            except libvirt.libvirtError as e:
                if _no_volume(e):
                    raise missing from None
                raise
        kind, capacity, _ = volume.info()
        if kind == libvirt.VIR_STORAGE_VOL_DIR:
            raise InvalidInput(f"The {label} {path} is a directory on {host}'s libvirt host.")
        target = ET.fromstring(volume.XMLDesc(0)).find("target")
        fmt = target.find("format") if target is not None else None
        mode = target.findtext("permissions/mode", "0644") if target is not None else "0644"
        yield HostFile(volume.path(), fmt.get("type", "raw") if fmt is not None else "raw",
                       int(capacity), volume, int(mode, 8) if mode.isdigit() else 0o644)
    finally:
        if probe is not None:
            with contextlib.suppress(libvirt.libvirtError):
                probe.destroy()


def _escaped(text: str) -> str:
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("'", "&apos;"))


# -- XML ---------------------------------------------------------------------------------

def volume_xml(name: str, capacity: int, *, backing: HostFile | None = None) -> str:
    """A new qcow2 volume of ``capacity`` bytes (an overlay on ``backing``)."""
    root = ET.Element("volume")
    ET.SubElement(root, "name").text = name
    ET.SubElement(root, "capacity", unit="bytes").text = str(capacity)
    target = ET.SubElement(root, "target")
    ET.SubElement(target, "format", type="qcow2")
    ET.SubElement(target, "compat").text = "1.1"
    if backing is not None:
        store = ET.SubElement(root, "backingStore")
        ET.SubElement(store, "path").text = backing.path
        ET.SubElement(store, "format", type=backing.fmt)
    return ET.tostring(root, encoding="unicode")


@dataclass(frozen=True)
class Plan:
    """Everything the new domain's XML holds (the volumes are made before)."""

    name: str
    cpus: int
    memory_kib: int
    firmware: str = "bios"
    disk: str = ""
    """The path of its virtio disk (a new qcow2 volume), or none."""
    cdrom: str = ""
    kernel: str = ""
    initrd: str = ""
    cmdline: str = ""
    boot: tuple[str, ...] = ("hd",)
    """libvirt's boot devices in order (``cdrom``, ``network``, ``hd``); none with a kernel."""
    nic: tuple[str, str] | None = None
    """``(type, source)``: ``network``/``bridge`` and its name, ``user`` and ""."""
    description: str = ""


def domain_xml(plan: Plan, facts: HostFacts) -> str:
    root = ET.Element("domain", type=facts.domain_type)
    ET.SubElement(root, "name").text = plan.name
    if plan.description:
        ET.SubElement(root, "description").text = plan.description
    ET.SubElement(root, "memory", unit="KiB").text = str(plan.memory_kib)
    ET.SubElement(root, "currentMemory", unit="KiB").text = str(plan.memory_kib)
    ET.SubElement(root, "vcpu").text = str(plan.cpus)
    os_ = ET.SubElement(root, "os", {"firmware": "efi"} if plan.firmware == "uefi" else {})
    ET.SubElement(os_, "type", arch=facts.arch, machine=facts.machine).text = "hvm"
    if plan.firmware == "uefi":  # libvirt picks OVMF and the NVRAM template (descriptors)
        firmware = ET.SubElement(os_, "firmware")
        ET.SubElement(firmware, "feature", enabled="no", name="secure-boot")
    if plan.kernel:
        ET.SubElement(os_, "kernel").text = plan.kernel
        if plan.initrd:
            ET.SubElement(os_, "initrd").text = plan.initrd
        if plan.cmdline:
            ET.SubElement(os_, "cmdline").text = plan.cmdline
    else:
        for dev in plan.boot:
            ET.SubElement(os_, "boot", dev=dev)
    features = ET.SubElement(root, "features")
    ET.SubElement(features, "acpi")
    ET.SubElement(features, "apic")
    if facts.domain_type == "kvm" and facts.passthrough:
        ET.SubElement(root, "cpu", mode="host-passthrough", check="none")
    ET.SubElement(root, "clock", offset="utc")
    for event, action in (("on_poweroff", "destroy"), ("on_reboot", "restart"),
                          ("on_crash", "destroy")):
        ET.SubElement(root, event).text = action
    devices = ET.SubElement(root, "devices")
    if facts.emulator:
        ET.SubElement(devices, "emulator").text = facts.emulator
    if plan.disk:
        disk = ET.SubElement(devices, "disk", type="file", device="disk")
        ET.SubElement(disk, "driver", name="qemu", type="qcow2", discard="unmap")
        ET.SubElement(disk, "source", file=plan.disk)
        ET.SubElement(disk, "target", dev="vda", bus="virtio")
    if plan.cdrom:
        q35 = "q35" in facts.machine  # no IDE there; i440fx has it built in
        disk = ET.SubElement(devices, "disk", type="file", device="cdrom")
        ET.SubElement(disk, "driver", name="qemu", type="raw")
        ET.SubElement(disk, "source", file=plan.cdrom)
        ET.SubElement(disk, "target", dev="sda" if q35 else "hdc", bus="sata" if q35 else "ide")
        ET.SubElement(disk, "readonly")
    if plan.nic is not None:
        kind, source = plan.nic
        iface = ET.SubElement(devices, "interface", type=kind)
        if kind == "network":
            ET.SubElement(iface, "source", network=source)
        elif kind == "bridge":
            ET.SubElement(iface, "source", bridge=source)
        ET.SubElement(iface, "model", type="virtio")
        ET.SubElement(iface, "alias", name="ua-eth0")  # named eth0 in corral (nics.py)
    serial = ET.SubElement(devices, "serial", type="pty")
    ET.SubElement(serial, "target", port="0")
    console = ET.SubElement(devices, "console", type="pty")
    ET.SubElement(console, "target", type="serial", port="0")
    graphics = ET.SubElement(devices, "graphics", type="vnc")
    ET.SubElement(graphics, "listen", type="socket")
    ET.SubElement(devices, "memballoon", model="virtio")
    return ET.tostring(root, encoding="unicode")
