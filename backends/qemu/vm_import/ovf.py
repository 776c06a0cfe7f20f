"""OVF descriptors (``.ovf``, alone or inside an ``.ova``), as VirtualBox 7, VMware and
other exporters write them: the virtual hardware section's CPUs, memory, disk drives (in
controller and address order) and Ethernet adapters; the firmware from VMware's
``vmw:Config firmware`` or VirtualBox's own ``vbox:Machine`` section (which also holds
the adapters' MACs); the OS type. Pure: reads bytes, touches no file."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from .plan import MAX_CAPACITY, MAX_CPUS, MAX_MEMORY_MIB, Described, DiskRef, mac_address
from .xmlsafe import XMLRefused, attr, kid, kids, local, parse, text, walk

CPU, MEMORY, IDE, SCSI, ETHERNET, OTHER_NIC, FLOPPY, CD, DVD, DISK = (
    3, 4, 5, 6, 10, 11, 14, 15, 16, 17)
SATA, SERIAL, PARALLEL, USB, GRAPHICS, SOUND = 20, 21, 22, 23, 24, 35
_CONTROLLERS = {IDE: "IDE", SCSI: "SCSI", SATA: "SATA"}
_LEFT_OUT = {
    FLOPPY: "a floppy drive: left out",
    CD: "a CD/DVD drive: left out (corral VMs made from disks have none)",
    DVD: "a CD/DVD drive: left out (corral VMs made from disks have none)",
    SERIAL: "a serial port: a corral VM has its own serial console instead",
    PARALLEL: "a parallel port: QEMU VMs here have none",
    USB: "a USB controller: a corral VM has QEMU's own (with a tablet); USB devices "
         "of the original are not passed through",
    SOUND: "a sound card: corral VMs have no sound",
}


def units(spec: str) -> int | None:
    """Bytes per unit of an OVF allocation unit (``byte * 2^30``, ``MegaBytes``, …);
    None when not understood."""
    s = spec.strip().lower().replace(" ", "")
    named = {"": 1, "byte": 1, "bytes": 1, "kilobytes": 1 << 10, "megabytes": 1 << 20,
             "gigabytes": 1 << 30, "terabytes": 1 << 40, "kb": 1 << 10, "mb": 1 << 20,
             "gb": 1 << 30}
    if s in named:
        return named[s]
    m = re.fullmatch(r"bytes?\*(\d+)\^(\d+)", s)
    if m and int(m[2]) <= 60:
        return int(m[1]) ** int(m[2])
    return None


def _number(value: str, what: str, d: Described) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        d.problems.append(f"its {what} is {value!r}, not a number")
        return 0
    if n < 0:
        d.problems.append(f"its {what} is negative")
        return 0
    return n


def _format(url: str) -> str | None:
    u = url.lower()
    for needle, fmt in (("vmdk", "vmdk"), ("qcow", "qcow2"), ("vhdx", "vhdx"),
                        ("vhd", "vpc"), ("vdi", "vdi"), ("raw", "raw")):
        if needle in u:
            return fmt
    return None


def _disk_id(host_resource: str) -> tuple[str, str]:
    """(``disk`` or ``file``, id) of a HostResource such as ``ovf:/disk/vmdisk1``."""
    m = re.fullmatch(r"(?:ovf:)?/(disk|file)/(.+)", host_resource.strip())
    return (m[1], m[2]) if m else ("", "")


def describe(data: bytes) -> Described:
    """The VM an OVF descriptor describes."""
    d = Described("OVF")
    try:
        root = parse(data)
    except XMLRefused as e:
        d.problems.append(f"its descriptor is refused: {e}")
        return d
    if local(root.tag) != "Envelope":
        d.problems.append("its descriptor is not an OVF envelope")
        return d
    systems = list(walk(root, "VirtualSystem"))
    if len(systems) != 1:
        d.problems.append(f"it describes {len(systems)} virtual machines; corral imports "
                          f"exactly one at a time" if systems else
                          "it describes no virtual machine")
        return d
    system = systems[0]
    d.name = text(system, "Name") or attr(system, "id")
    files = {attr(f, "id"): f for f in walk(kid(root, "References"), "File")}
    disks = {attr(x, "diskId"): x for x in walk(root, "Disk")}
    _os(system, d)
    hardware = kid(system, "VirtualHardwareSection")
    if hardware is None:
        d.problems.append("its descriptor has no virtual hardware section")
        return d
    items = [i for i in kids(hardware, "Item") + kids(hardware, "StorageItem")
             + kids(hardware, "EthernetPortItem")]
    vbox = next(walk(system, "Machine"), None)  # VirtualBox's own section
    _firmware(hardware, vbox, d)
    position = {text(i, "InstanceID"): n for n, i in enumerate(items)}
    by_id = {text(i, "InstanceID"): i for i in items}
    drives: list[tuple[int, int, int, ET.Element]] = []
    nic_models: list[str] = []
    networks: list[str] = []
    controllers: set[str] = set()
    for n, item in enumerate(items):
        kind = _number(text(item, "ResourceType") or "0", "resource type", d)
        if kind == CPU:
            d.cpus = _number(text(item, "VirtualQuantity") or "1", "CPU count", d)
        elif kind == MEMORY:
            unit = units(text(item, "AllocationUnits") or "MegaBytes")
            amount = _number(text(item, "VirtualQuantity") or "0", "memory size", d)
            if unit is None:
                d.problems.append(f"its memory is given in {text(item, 'AllocationUnits')!r}, "
                                  f"a unit corral does not know")
            else:
                d.memory_mib = amount * unit >> 20
        elif kind == DISK:
            parent = text(item, "Parent")
            controller = by_id.get(parent)
            ctype = _number(text(controller, "ResourceType") or "0", "resource type", d) \
                if controller is not None else 0
            if ctype in _CONTROLLERS:
                controllers.add(_CONTROLLERS[ctype])
            address = text(item, "AddressOnParent") or "0"
            drives.append((position.get(parent, -1), int(address) if address.isdigit()
                           else 0, n, item))
        elif kind in (ETHERNET, OTHER_NIC):
            d.macs.append(mac_address(text(item, "Address")))
            nic_models.append(text(item, "ResourceSubType"))
            networks.append(text(item, "Connection"))
        elif kind in _LEFT_OUT and _LEFT_OUT[kind] not in d.unmapped:
            d.unmapped.append(_LEFT_OUT[kind])
    if vbox is not None:
        _vbox_macs(vbox, d)
    d.understood.append(f"{d.cpus} CPU{'s' if d.cpus != 1 else ''}, "
                        f"{d.memory_mib} MiB of memory")
    for _parent, _address, _n, item in sorted(drives, key=lambda x: x[:3]):
        ref = _disk(item, disks, files, d)
        if ref is not None:
            d.disks.append(ref)
    if controllers:
        d.unmapped.append(f"disks were on {', '.join(sorted(controllers))}: they attach "
                          f"as virtio-blk, so the guest needs virtio drivers (Linux has "
                          f"them; Windows needs virtio-win)")
    d.nic_words(nic_models, networks)
    _bounds(d)
    return d


def _os(system: ET.Element, d: Described) -> None:
    section = kid(system, "OperatingSystemSection")
    if section is None:
        return
    d.os_type = (attr(section, "osType") or text(section, "OSType")
                 or text(section, "Description") or attr(section, "id"))
    if d.os_type:
        d.understood.append(f"OS type: {d.os_type}")


def _firmware(hardware: ET.Element, vbox: ET.Element | None, d: Described) -> None:
    for config in walk(hardware, "Config"):
        if attr(config, "key") == "firmware":
            d.firmware = "uefi" if attr(config, "value").lower() == "efi" else "bios"
    if vbox is not None:
        fw = next(walk(vbox, "Firmware"), None)
        if fw is not None:
            d.firmware = "uefi" if attr(fw, "type").upper().startswith("EFI") else "bios"
    d.understood.append("firmware: UEFI (OVMF)" if d.firmware == "uefi"
                        else "firmware: BIOS (SeaBIOS)")


def _vbox_macs(vbox: ET.Element, d: Described) -> None:
    """VirtualBox keeps the MACs in its own section: its enabled adapters, by slot, are
    the descriptor's Ethernet items in order."""
    adapters = [a for a in walk(vbox, "Adapter") if attr(a, "enabled", "true") == "true"]
    adapters.sort(key=lambda a: int(attr(a, "slot", "0")) if attr(a, "slot", "0").isdigit()
                  else 0)
    for i, adapter in enumerate(adapters[:len(d.macs)]):
        if not d.macs[i]:
            d.macs[i] = mac_address(attr(adapter, "MACAddress"))


def _disk(item: ET.Element, disks: dict, files: dict, d: Described) -> DiskRef | None:
    label = text(item, "ElementName") or text(item, "Caption") or "a disk drive"
    kind, ident = _disk_id(text(item, "HostResource"))
    disk = disks.get(ident) if kind == "disk" else None
    file = files.get(attr(disk, "fileRef") if disk is not None else ident)
    if file is None:
        if disk is not None and not attr(disk, "fileRef"):
            d.unmapped.append(f"{label} is a new empty disk in the descriptor: left out")
        else:
            d.problems.append(f"{label} names a disk the descriptor does not list")
        return None
    if attr(file, "compression") or attr(file, "chunkSize"):
        d.problems.append(f"{label} is stored compressed or in chunks "
                          f"({attr(file, 'compression') or 'chunked'}), which corral does "
                          f"not unpack")
        return None
    capacity = 0
    if disk is not None:
        unit = units(attr(disk, "capacityAllocationUnits", "byte"))
        amount = _number(attr(disk, "capacity", "0"), "disk capacity", d)
        if unit is None:
            d.problems.append(f"{label}'s capacity is given in a unit corral does not know")
        else:
            capacity = amount * unit
    fmt = _format(attr(disk, "format")) if disk is not None else None
    return DiskRef(attr(file, "href"), fmt, capacity,
                   _number(attr(file, "size", "0"), "file size", d), label)


def _bounds(d: Described) -> None:
    if not 1 <= d.cpus <= MAX_CPUS:
        d.problems.append(f"it declares {d.cpus} CPUs (corral takes 1 to {MAX_CPUS})")
    if not 32 <= d.memory_mib <= MAX_MEMORY_MIB:
        d.problems.append(f"it declares {d.memory_mib} MiB of memory (corral takes 32 MiB "
                          f"to {MAX_MEMORY_MIB >> 20} TiB)")
    for ref in d.disks:
        if ref.capacity > MAX_CAPACITY:
            d.problems.append(f"{ref.where or ref.file} declares a capacity of "
                              f"{ref.capacity} bytes, more than the 64 TiB corral takes")
