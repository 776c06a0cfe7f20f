"""The XML of a new libvirt domain (``backends/libvirt/domain_xml.py``) for host facts the
lab's daemon does not have: KVM (``host-passthrough``), a q35 machine (the CD drive on
SATA: q35 has no IDE), UEFI through libvirt's firmware choice. The lab's own (TCG, i440fx,
BIOS and UEFI) is checked on the real daemon in tests/backends/test_libvirt_create.py."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from backends.libvirt.domain_xml import HostFacts, Plan, domain_xml

KVM_Q35 = HostFacts(domain_type="kvm", kvm=True, emulator="/usr/bin/qemu-system-x86_64",
                    machine="pc-q35-8.2", arch="x86_64", max_vcpus=255, host_cpus=8,
                    uefi=True, passthrough=True)
TCG_PC = HostFacts(domain_type="qemu", kvm=False, emulator="", machine="pc-i440fx-7.2",
                   arch="x86_64", max_vcpus=255, host_cpus=2, uefi=False, passthrough=False)


def test_kvm_passes_the_host_cpu_through_and_q35_puts_the_cd_on_sata():
    xml = ET.fromstring(domain_xml(Plan(name="web", cpus=2, memory_kib=1048576,
                                        firmware="uefi", disk="/p/web.qcow2",
                                        cdrom="/iso/debian.iso", boot=("cdrom", "hd"),
                                        nic=("bridge", "br0")), KVM_Q35))
    assert xml.get("type") == "kvm"
    assert xml.find("cpu").get("mode") == "host-passthrough"
    assert xml.find("os").get("firmware") == "efi"
    assert xml.find("os/firmware/feature").attrib == {"enabled": "no", "name": "secure-boot"}
    assert xml.find("os/type").get("machine") == "pc-q35-8.2"
    cdrom = next(d for d in xml.iterfind("devices/disk") if d.get("device") == "cdrom")
    assert cdrom.find("target").attrib == {"dev": "sda", "bus": "sata"}
    assert [b.get("dev") for b in xml.iterfind("os/boot")] == ["cdrom", "hd"]
    nic = xml.find("devices/interface")
    assert nic.get("type") == "bridge" and nic.find("source").get("bridge") == "br0"
    assert nic.find("alias").get("name") == "ua-eth0"


def test_tcg_keeps_qemus_cpu_model_and_a_kernel_boot_has_no_boot_devices():
    xml = ET.fromstring(domain_xml(Plan(name="k", cpus=1, memory_kib=131072,
                                        kernel="/boot/vmlinuz", initrd="/boot/initrd",
                                        cmdline="console=ttyS0", boot=()), TCG_PC))
    assert xml.get("type") == "qemu" and xml.find("cpu") is None
    assert xml.find("os").get("firmware") is None and xml.find("os/boot") is None
    assert xml.findtext("os/kernel") == "/boot/vmlinuz"
    assert xml.find("devices/emulator") is None  # libvirt's own choice
    assert xml.find("devices/disk") is None and xml.find("devices/interface") is None
    assert xml.find("devices/console/target").get("type") == "serial"
    assert xml.find("devices/graphics/listen").get("type") == "socket"
