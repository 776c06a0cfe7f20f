"""VirtualBox machine folders: the ``.vbox`` file's CPUs, memory, firmware, NICs (MACs by
slot), OS type and the hard disks attached to its storage controllers (in controller,
port and device order), found in its media registry. Pure: reads bytes, touches no
file."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from .ovf import _bounds
from .plan import Described, DiskRef, mac_address
from .xmlsafe import XMLRefused, attr, kid, local, parse, walk

_FORMATS = {"vdi": "vdi", "vmdk": "vmdk", "vhd": "vpc", "vhdx": "vhdx", "raw": "raw",
            "parallels": None, "qcow": None, "qed": None}
_ADAPTER_MODES = ("NAT", "BridgedInterface", "InternalNetwork", "HostOnlyInterface",
                  "GenericInterface", "NATNetwork", "CloudNetwork", "HostOnlyNetwork")


def _int(value: str, default: int) -> int:
    return int(value) if value.strip().isdigit() else default


def describe(data: bytes) -> Described:
    """The VM a ``.vbox`` file describes."""
    d = Described("VirtualBox machine")
    try:
        root = parse(data)
    except XMLRefused as e:
        d.problems.append(f"its .vbox file is refused: {e}")
        return d
    machine = kid(root, "Machine") if local(root.tag) == "VirtualBox" else None
    if machine is None:
        d.problems.append("its .vbox file holds no VirtualBox machine")
        return d
    d.name = attr(machine, "name")
    d.os_type = attr(machine, "OSType")
    if d.os_type:
        d.understood.append(f"OS type: {d.os_type}")
    hardware = kid(machine, "Hardware")
    d.cpus = _int(attr(kid(hardware, "CPU"), "count", "1"), 1)
    d.memory_mib = _int(attr(kid(hardware, "Memory"), "RAMSize", "512"), 512)
    d.understood.append(f"{d.cpus} CPU{'s' if d.cpus != 1 else ''}, "
                        f"{d.memory_mib} MiB of memory")
    firmware = kid(hardware, "Firmware")
    d.firmware = "uefi" if attr(firmware, "type").upper().startswith("EFI") else "bios"
    d.understood.append("firmware: UEFI (OVMF)" if d.firmware == "uefi"
                        else "firmware: BIOS (SeaBIOS)")
    if attr(machine, "currentSnapshot"):
        d.problems.append("the machine has snapshots: its current state is a VirtualBox "
                          "differencing disk, which QEMU cannot read. Delete its snapshots "
                          "in VirtualBox (or clone it without them) first")
    _disks(machine, d)
    _nics(hardware, d)
    _extras(hardware, d)
    _bounds(d)
    return d


def _disks(machine: ET.Element, d: Described) -> None:
    registry = kid(machine, "MediaRegistry")
    media: dict[str, tuple[ET.Element, bool]] = {}
    for top in walk(kid(registry, "HardDisks"), "HardDisk"):
        media.setdefault(attr(top, "uuid"), (top, False))
        for child in list(walk(top, "HardDisk"))[1:]:
            media[attr(child, "uuid")] = (child, True)
    controllers = list(walk(machine, "StorageController"))
    attached: list[tuple[int, int, int, ET.Element, str]] = []
    kinds = set()
    for c_index, controller in enumerate(controllers):
        for dev in walk(controller, "AttachedDevice"):
            port, device = _int(attr(dev, "port", "0"), 0), _int(attr(dev, "device", "0"), 0)
            where = f"{attr(controller, 'name') or attr(controller, 'type')} port {port}"
            kind = attr(dev, "type")
            if kind == "HardDisk":
                kinds.add(attr(controller, "type") or "a controller")
                attached.append((c_index, port, device, dev, where))
            elif kind == "DVD":
                if kid(dev, "Image") is not None or attr(dev, "passthrough") == "true":
                    d.unmapped.append(f"the CD/DVD on {where} (an ISO or the host's drive): "
                                      f"left out")
            elif kind == "Floppy":
                d.unmapped.append(f"the floppy drive on {where}: left out")
    for _c, _p, _dev, dev, where in sorted(attached, key=lambda a: a[:3]):
        uuid = attr(kid(dev, "Image"), "uuid")
        found = media.get(uuid)
        if found is None:
            d.problems.append(f"the disk on {where} is not in the machine's media registry")
            continue
        disk, differencing = found
        if differencing:
            d.problems.append(f"the disk on {where} is a differencing disk (a snapshot's "
                              f"state), which QEMU cannot read")
            continue
        declared = attr(disk, "format").lower()
        if declared and _FORMATS.get(declared) is None:
            d.problems.append(f"the disk on {where} is a {attr(disk, 'format')} disk, "
                              f"which corral does not take")
            continue
        d.disks.append(DiskRef(attr(disk, "location"), _FORMATS.get(declared), where=where))
    if kinds:
        d.unmapped.append(f"disks were on {', '.join(sorted(kinds))}: they attach as "
                          f"virtio-blk, so the guest needs virtio drivers (Linux has them; "
                          f"Windows needs virtio-win)")


def _nics(hardware: ET.Element | None, d: Described) -> None:
    adapters = [a for a in walk(kid(hardware, "Network"), "Adapter")
                if attr(a, "enabled") == "true"]
    adapters.sort(key=lambda a: _int(attr(a, "slot", "0"), 0))
    models, networks = [], []
    for adapter in adapters:
        d.macs.append(mac_address(attr(adapter, "MACAddress")))
        models.append(attr(adapter, "type"))
        mode = next((local(c.tag) for c in adapter if local(c.tag) in _ADAPTER_MODES), "NAT")
        networks.append(mode)
    d.nic_words(models, networks)


def _extras(hardware: ET.Element | None, d: Described) -> None:
    usb = kid(hardware, "USB")
    if usb is not None and (list(walk(usb, "DeviceFilter")) or list(walk(usb, "Controller"))):
        d.unmapped.append("USB: a corral VM has QEMU's own USB controller (with a tablet); "
                          "the original's USB device filters (passthrough) are not kept")
    audio = kid(hardware, "AudioAdapter")
    if audio is not None and attr(audio, "enabled") == "true":
        d.unmapped.append("a sound card: corral VMs have no sound")
    if list(walk(kid(hardware, "SharedFolders"), "SharedFolder")):
        d.unmapped.append("shared folders (VirtualBox Guest Additions): not kept")
    remote = kid(hardware, "RemoteDisplay")
    if remote is not None and attr(remote, "enabled") == "true":
        d.unmapped.append("VirtualBox remote display (VRDE): corral serves the screen "
                          "through its own console instead")
