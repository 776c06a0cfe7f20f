"""libvirt domain XML (``virsh dumpxml``): vCPUs, memory, firmware (``<os
firmware='efi'>`` or an OVMF ``<loader>``), the file disks (boot order first, then as
listed), the interfaces' MACs, and in words what a corral VM will not have (USB
passthrough, a SPICE-only display, block/network disks, host devices, shared
filesystems…). Pure: reads bytes, touches no file."""

from __future__ import annotations

from ...units import libvirt_bytes
from .ovf import _bounds
from .plan import FORMATS, Described, DiskRef, mac_address
from .xmlsafe import XMLRefused, attr, kid, kids, local, parse, text, walk



def describe(data: bytes) -> Described:
    """The VM a libvirt domain XML describes."""
    d = Described("libvirt domain")
    try:
        root = parse(data)
    except XMLRefused as e:
        d.problems.append(f"its domain XML is refused: {e}")
        return d
    if local(root.tag) != "domain":
        d.problems.append("it is not a libvirt domain XML (no <domain>)")
        return d
    d.name = text(root, "name")
    vcpu = text(root, "vcpu") or "1"
    d.cpus = int(vcpu) if vcpu.isdigit() else 0
    memory = kid(root, "memory")
    amount = text(memory) or "0"
    size = libvirt_bytes(amount, attr(memory, "unit") or None)
    if size is None:
        d.problems.append(f"its memory ({amount} {attr(memory, 'unit')}) is not understood")
    else:
        d.memory_mib = size >> 20
    d.understood.append(f"{d.cpus} CPU{'s' if d.cpus != 1 else ''}, "
                        f"{d.memory_mib} MiB of memory")
    os_el = kid(root, "os")
    loader = text(os_el, "loader")
    efi = attr(os_el, "firmware") == "efi" or "OVMF" in loader.upper() \
        or "EDK2" in loader.upper()
    d.firmware = "uefi" if efi else "bios"
    d.understood.append("firmware: UEFI (OVMF)" if efi else "firmware: BIOS (SeaBIOS)")
    for info in walk(kid(root, "metadata"), "os"):
        d.os_type = attr(info, "id")
    if d.os_type:
        d.understood.append(f"OS type: {d.os_type}")
    if attr(root, "type") not in ("kvm", "qemu"):
        d.unmapped.append(f"the domain is of type '{attr(root, 'type')}': it becomes a "
                          f"QEMU VM")
    devices = kid(root, "devices")
    _disks(devices, d)
    _nics(devices, d)
    _others(devices, d)
    _bounds(d)
    return d


def _disks(devices, d: Described) -> None:  # an Element or None
    found: list[tuple[int, int, DiskRef]] = []
    buses = set()
    for n, disk in enumerate(kids(devices, "disk")):
        target = kid(disk, "target")
        where = f"{attr(target, 'dev')} on {attr(target, 'bus') or 'its bus'}"
        device = attr(disk, "device", "disk")
        if device in ("cdrom", "floppy"):
            d.unmapped.append(f"the {device} {where}: left out")
            continue
        if device not in ("disk", "lun"):
            d.unmapped.append(f"the {device} device {where}: left out")
            continue
        source = kid(disk, "source")
        if attr(disk, "type") != "file" or not attr(source, "file"):
            what = attr(source, "dev") or attr(source, "name") or attr(source, "pool")
            d.unmapped.append(f"the {attr(disk, 'type')} disk {where}"
                              + (f" ({what})" if what else "")
                              + ": only disks in files are copied; this one is left out")
            continue
        driver = attr(kid(disk, "driver"), "type")
        fmt = driver if driver in FORMATS else None
        if driver and fmt is None:
            d.problems.append(f"the disk {where} is a {driver} file, which corral does not "
                              f"take")
            continue
        if attr(target, "bus") and attr(target, "bus") != "virtio":
            buses.add(attr(target, "bus"))
        order = attr(kid(disk, "boot"), "order")
        found.append((int(order) if order.isdigit() else 1 << 30, n,
                      DiskRef(attr(source, "file"), fmt, where=where)))
    d.disks = [ref for _o, _n, ref in sorted(found, key=lambda x: x[:2])]
    if buses:
        d.unmapped.append(f"disks were on {', '.join(sorted(buses))}: they attach as "
                          f"virtio-blk, so the guest needs virtio drivers (Linux has "
                          f"them; Windows needs virtio-win)")


def _nics(devices, d: Described) -> None:
    models, networks = [], []
    for nic in kids(devices, "interface"):
        d.macs.append(mac_address(attr(kid(nic, "mac"), "address")))
        model = attr(kid(nic, "model"), "type")
        models.append(model if model and model != "virtio" else "")
        source = kid(nic, "source")
        networks.append(attr(source, "network") or attr(source, "bridge")
                        or attr(nic, "type"))
    d.nic_words(models, networks)


def _others(devices, d: Described) -> None:
    graphics = [attr(g, "type") for g in kids(devices, "graphics")]
    if graphics and "vnc" not in graphics and "spice" in graphics:
        d.unmapped.append("a SPICE-only display: corral serves the screen over its own "
                          "console (VNC) instead")
    for video in kids(devices, "video"):
        model = attr(kid(video, "model"), "type")
        if model and model not in ("vga", "bochs", "cirrus", "none"):
            d.unmapped.append(f"a {model} video card: a corral VM has QEMU's standard VGA; "
                              f"the guest needs its driver for it (all do)")
    for host in kids(devices, "hostdev"):
        what = attr(host, "type") or "host"
        d.unmapped.append(f"a {what.upper() if what in ('usb', 'pci') else what} device "
                          f"passed through from the host: left out")
    if kids(devices, "redirdev"):
        d.unmapped.append("USB redirection (SPICE): left out")
    if kids(devices, "sound"):
        d.unmapped.append("a sound card: corral VMs have no sound")
    for fs in kids(devices, "filesystem"):
        d.unmapped.append(f"the shared folder {attr(kid(fs, 'target'), 'dir')!r} "
                          f"({attr(kid(fs, 'driver'), 'type') or 'virtio-9p'}): left out")
    if kids(devices, "tpm"):
        d.unmapped.append("a TPM: QEMU VMs here have none")
    for channel in kids(devices, "channel"):
        name = attr(kid(channel, "target"), "name")
        if "spice" in (attr(channel, "type") + name):
            d.unmapped.append("the SPICE agent channel: left out")
