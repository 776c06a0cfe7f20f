"""What foreign VM descriptors say, read by backends/qemu/vm_import/ without touching a
file: OVF as VirtualBox 7 and VMware export it, a VirtualBox .vbox file, libvirt domain
XML (tests/import_fixtures.py writes them); what is understood, what is not mapped (in
words), and XML with entities or a DOCTYPE refused."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import import_fixtures as fx

from backends.qemu.vm_import import libvirt_xml, ovf, vbox

MiB = 1 << 20


def test_virtualbox7_ovf_is_understood():
    d = ovf.describe(fx.vbox7_ovf("deb", [("deb-disk001.vmdk", 8 * MiB),
                                          ("deb-disk002.vmdk", 4 * MiB)], cpus=2,
                                  memory_mib=1024, macs=("080027A1B2C3", "080027000002"),
                                  efi=True))
    assert not d.problems, d.problems
    assert (d.name, d.cpus, d.memory_mib, d.firmware, d.os_type) == (
        "deb", 2, 1024, "uefi", "Debian_64")
    assert [(r.file, r.format, r.capacity) for r in d.disks] == [
        ("deb-disk001.vmdk", "vmdk", 8 * MiB), ("deb-disk002.vmdk", "vmdk", 4 * MiB)]
    assert d.macs == ["08:00:27:a1:b2:c3", "08:00:27:00:00:02"]
    words = " | ".join(d.unmapped)
    for needle in ("USB", "sound", "CD/DVD", "SATA", "network card 2 (MAC 08:00:27:00:00:02)"):
        assert needle in words, (needle, words)
    assert "firmware: UEFI (OVMF)" in d.understood


def test_vmware_ovf_is_understood():
    d = ovf.describe(fx.vmware_ovf("web", [("web-disk1.vmdk", 16, 12345)], cpus=4,
                                   memory_mib=2048))
    assert not d.problems, d.problems
    assert (d.name, d.cpus, d.memory_mib, d.firmware, d.os_type) == (
        "web", 4, 2048, "uefi", "debian11_64Guest")
    assert [(r.file, r.capacity, r.file_size) for r in d.disks] == [
        ("web-disk1.vmdk", 16 << 30, 12345)]
    assert d.macs == ["00:50:56:ab:cd:ef"]
    words = " | ".join(d.unmapped)
    assert "SCSI" in words and "virtio" in words and "VM Network" in words
    assert "VmxNet3" in " ".join(d.understood)


def test_vbox_file_is_understood():
    d = vbox.describe(fx.vbox_file("vb", [("vb.vdi", "VDI"), ("data.vhd", "VHD")], cpus=2))
    assert not d.problems, d.problems
    assert [(r.file, r.format, r.where) for r in d.disks] == [
        ("vb.vdi", "vdi", "SATA port 0"), ("data.vhd", "vpc", "SATA port 1")]
    assert d.macs == ["08:00:27:d1:e2:f3"] and d.cpus == 2 and d.memory_mib == 256
    words = " | ".join(d.unmapped)
    assert "USB device filters (passthrough)" in words and "sound" in words


def test_libvirt_domain_is_understood():
    d = libvirt_xml.describe(fx.libvirt_domain(
        "lv", [("/var/lib/libvirt/images/b.qcow2", "qcow2"),
               ("/var/lib/libvirt/images/a.raw", "raw")], efi=True))
    assert not d.problems, d.problems
    assert (d.name, d.cpus, d.memory_mib, d.firmware) == ("lv", 2, 256, "uefi")
    assert d.os_type == "http://debian.org/debian/12"
    assert [(r.file, r.format) for r in d.disks] == [
        ("/var/lib/libvirt/images/b.qcow2", "qcow2"), ("/var/lib/libvirt/images/a.raw", "raw")]
    assert d.macs == ["52:54:00:6b:3c:58"]
    words = " | ".join(d.unmapped)
    for needle in ("SPICE-only display", "USB device passed through", "block disk sdb",
                   "qxl", "sound", "USB redirection", "cdrom"):
        assert needle in words, (needle, words)


@pytest.mark.parametrize("parse", [ovf.describe, vbox.describe, libvirt_xml.describe])
def test_entities_and_doctypes_are_refused(parse):
    laughs = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
              b'<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>'
              b'<domain><name>&lol2;</name></domain>')
    external = (b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
                b'<domain><name>&x;</name></domain>')
    for data in (laughs, external):
        d = parse(data)
        assert any("DOCTYPE" in p for p in d.problems), d.problems
        assert not d.disks


def test_huge_declared_sizes_are_refused():
    d = ovf.describe(fx.vmware_ovf("big", [("big.vmdk", 1 << 40, 1)]))
    assert any("more than the 64 TiB" in p for p in d.problems), d.problems
    d = ovf.describe(fx.vbox7_ovf("big", [("a.vmdk", 1)], memory_mib=1 << 40))
    assert any("MiB of memory" in p for p in d.problems), d.problems
