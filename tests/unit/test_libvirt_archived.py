"""The domain XML of a libvirt archive as hostile input (``backends/libvirt/archived.py``),
without a daemon: each class of element that would reach the host (a device, a file, a
socket, a program) is refused naming it, what only named the old host is dropped, and the
lab guest's own definition passes. The real import of such archives, with nothing left
on the daemon, is ``tests/backends/test_libvirt_export.py``."""

from __future__ import annotations

import json

import pytest

from backends.archive import ArchiveRefused
from backends.libvirt.archived import (
    ArchivedDisk,
    DomainArchive,
    checked_domain,
    checked_snapshot,
    host_file_problems,
    manifest_json,
    read_manifest,
)

DOMAIN = """<domain type='qemu' id='3'>
  <name>web</name><uuid>0b4c5d3e-8a0f-4c1e-9a43-4b51d6f1e0aa</uuid>
  <memory unit='KiB'>131072</memory><vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type><kernel>/srv/k</kernel>
    <cmdline>console=ttyS0</cmdline><nvram>/var/lib/libvirt/qemu/nvram/web.fd</nvram></os>
  <seclabel type='none'/>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'><driver name='qemu' type='qcow2'/>
      <source file='/var/lib/libvirt/images/web.qcow2'/><backingStore/>
      <target dev='vda' bus='virtio'/></disk>
    <disk type='file' device='cdrom'><target dev='sda' bus='sata'/><readonly/></disk>
    <interface type='network'><mac address='52:54:00:11:22:33'/><source network='default'/>
      <target dev='vnet7'/><model type='virtio'/></interface>
    <serial type='pty'><target port='0'/></serial>
    <console type='pty'><target type='serial' port='0'/></console>
    <channel type='unix'><source mode='bind'/><target type='virtio' name='org.qemu.guest_agent.0'/></channel>
    <graphics type='vnc' port='5900' listen='0.0.0.0'><listen type='address' address='0.0.0.0'/></graphics>
    <input type='tablet' bus='usb'/><audio id='1' type='none'/>
    <rng model='virtio'><backend model='random'>/dev/urandom</backend></rng>
    <memballoon model='virtio'/>
  </devices>
</domain>"""


def with_device(xml: str) -> bytes:
    return DOMAIN.replace("</devices>", xml + "</devices>").encode()


def test_the_guest_passes_and_what_named_the_old_host_is_dropped():
    checked = checked_domain(DOMAIN.encode(), {"vda"})
    root = checked.root
    assert root.get("id") is None and root.find("uuid") is None
    assert root.find("seclabel") is None and root.find("os/nvram") is None
    assert root.find("devices/emulator") is None
    assert root.find("devices/interface/mac") is None
    assert root.find("devices/interface/target") is None
    graphics = root.find("devices/graphics")
    assert dict(graphics.attrib) == {"type": "vnc", "autoport": "yes"} and len(graphics) == 0
    assert root.find("devices/disk/backingStore") is None
    assert set(checked.disks) == {"vda"}
    assert checked.host_files == {"/srv/k": "kernel"}
    assert host_file_problems(checked, {"/srv/k"}) == []
    assert host_file_problems(checked, set()) == ["<kernel> /srv/k"]


HOSTILE = {
    "hostdev": ("<hostdev mode='subsystem' type='pci'><source><address bus='0' slot='2'/>"
                "</source></hostdev>", "<hostdev>"),
    "filesystem": ("<filesystem type='mount'><source dir='/'/><target dir='r'/></filesystem>",
                   "<filesystem>"),
    "shmem": ("<shmem name='x'><model type='ivshmem-plain'/></shmem>", "<shmem>"),
    "nvdimm": ("<memory model='nvdimm'><source><path>/etc/shadow</path></source></memory>",
               "<memory>"),
    "smartcard": ("<smartcard mode='host'/>", "<smartcard>"),
    "host block disk": ("<disk type='block' device='disk'><source dev='/dev/sda'/>"
                        "<target dev='vdb'/></disk>", "/dev/sda"),
    "iso": ("<disk type='file' device='cdrom'><source file='/etc/shadow'/><target dev='sdb'/>"
            "</disk>", "/etc/shadow"),
    "network disk": ("<disk type='network' device='disk'><source protocol='nbd' name='x'>"
                     "<host name='10.0.0.1'/></source><target dev='vdc'/></disk>", "vdc"),
    "disk secret": ("<disk type='file' device='disk'><source file='/x'/><target dev='vdd'/>"
                    "<auth username='u'><secret type='ceph' usage='x'/></auth></disk>", "<auth>"),
    "serial file": ("<serial type='file'><source path='/etc/cron.d/x'/></serial>",
                    "serial type='file'"),
    "serial dev": ("<serial type='dev'><source path='/dev/ttyS0'/></serial>", "type='dev'"),
    "console pipe": ("<console type='pipe'><source path='/tmp/p'/></console>", "type='pipe'"),
    "serial tcp": ("<serial type='tcp'><source mode='bind' host='0.0.0.0' service='23'/>"
                   "</serial>", "type='tcp'"),
    "serial log": ("<serial type='pty'><log file='/etc/passwd'/></serial>", "<log>"),
    "channel path": ("<channel type='unix'><source mode='bind' path='/run/x.sock'/></channel>",
                     "/run/x.sock"),
    "nic ethernet": ("<interface type='ethernet'><script path='/tmp/x'/></interface>",
                     "type='ethernet'"),
    "nic vhostuser": ("<interface type='vhostuser'><source type='unix' path='/x' "
                      "mode='client'/></interface>", "type='vhostuser'"),
    "nic hostdev": ("<interface type='hostdev'><source><address type='pci' bus='1'/></source>"
                    "</interface>", "type='hostdev'"),
    "nic script": ("<interface type='bridge'><source bridge='br0'/><script path='/x'/>"
                   "</interface>", "<script>"),
    "nic tap": ("<interface type='network'><source network='default'/>"
                "<backend tap='/dev/net/tun'/></interface>", "<backend>"),
    "input evdev": ("<input type='evdev'><source dev='/dev/input/event0'/></input>", "evdev"),
    "input passthrough": ("<input type='passthrough'><source evdev='/dev/input/e'/></input>",
                          "passthrough"),
    "rng device": ("<rng model='virtio'><backend model='random'>/dev/sda</backend></rng>",
                   "/dev/sda"),
    "rng egd": ("<rng model='virtio'><backend model='egd' type='tcp'><source mode='connect' "
                "host='1.2.3.4' service='1'/></backend></rng>", "egd"),
    "tpm passthrough": ("<tpm model='tpm-tis'><backend type='passthrough'><device "
                        "path='/dev/tpm0'/></backend></tpm>", "<tpm>"),
    "graphics sdl": ("<graphics type='sdl' display=':0'/>", "type='sdl'"),
    "audio file": ("<audio id='2' type='file' path='/etc/x'/>", "type='file'"),
    "redirdev tcp": ("<redirdev bus='usb' type='tcp'><source mode='connect' host='h' "
                     "service='1'/></redirdev>", "redirdev"),
    "unknown": ("<crypto model='virtio' type='qemu'><backend model='lkcf'/></crypto>",
                "<crypto>"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_device_that_reaches_the_host_refuses_the_archive(case):
    xml, words = HOSTILE[case]
    with pytest.raises(ArchiveRefused) as refused:
        checked_domain(with_device(xml), {"vda"})
    assert words in str(refused.value), refused.value


@pytest.mark.parametrize("extra, words", [
    ("<qemu:commandline xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>"
     "<qemu:arg value='-chardev'/></qemu:commandline>", "qemu:commandline"),
    ("<qemu:override xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'/>",
     "qemu:override"),
    ("<sysinfo type='fwcfg'><entry name='opt/x' file='/etc/shadow'/></sysinfo>", "fwcfg"),
    ("<blkiotune><device><path>/dev/sda</path><weight>1</weight></device></blkiotune>",
     "blkiotune"),
    ("<bootloader>/usr/bin/pygrub</bootloader>", "<bootloader>"),
    ("<idmap><uid start='0' target='1000' count='10'/></idmap>", "<idmap>"),
])
def test_a_domain_element_that_reaches_the_host_refuses_the_archive(extra, words):
    with pytest.raises(ArchiveRefused, match=words):
        checked_domain(DOMAIN.replace("</domain>", extra + "</domain>").encode(), {"vda"})


def test_host_files_other_than_a_used_kernel_or_a_firmware_directory_are_named():
    xml = DOMAIN.replace("<kernel>/srv/k</kernel>", "<kernel>/etc/shadow</kernel>"
                         "<initrd>/srv/../etc/x</initrd>"
                         "<loader readonly='yes' type='pflash'>/usr/share/OVMF/OVMF_CODE.fd"
                         "</loader><acpi><table type='slic'>/etc/x</table></acpi>")
    with pytest.raises(ArchiveRefused) as refused:
        checked_domain(xml.encode(), {"vda"})
    assert "<acpi>" in str(refused.value) and "/srv/../etc/x" in str(refused.value)
    with pytest.raises(ArchiveRefused, match="smbios mode='host'"):
        checked_domain(DOMAIN.replace("<cmdline>", "<smbios mode='host'/><cmdline>").encode(),
                       {"vda"})
    checked = checked_domain(xml.replace("<initrd>/srv/../etc/x</initrd>", "").replace(
        "<acpi><table type='slic'>/etc/x</table></acpi>", "").encode(), {"vda"})
    assert host_file_problems(checked, {"/srv/k"}) == ["<kernel> /etc/shadow"]


def test_entities_and_odd_documents_are_refused():
    for text, words in (
            (b"<!DOCTYPE d [<!ENTITY x SYSTEM 'file:///etc/shadow'>]><domain type='qemu'>"
             b"<name>&x;</name></domain>", "document type or entities"),
            (b"<domain type='xen'><name>a</name></domain>", "not a QEMU domain"),
            (b"<domain", "not well-formed")):
        with pytest.raises(ArchiveRefused, match=words):
            checked_domain(text, set())
    with pytest.raises(ArchiveRefused, match="disk files for vdb"):
        checked_domain(DOMAIN.encode(), {"vda", "vdb"})


def test_a_snapshot_is_checked_as_its_domain_and_must_be_internal():
    inner = DOMAIN.replace("<domain type='qemu' id='3'>", "<domain type='qemu'>")
    snap = f"<domainsnapshot><name>one</name><state>shutoff</state><memory snapshot='no'/>" \
           f"<disks><disk name='vda' snapshot='internal'/></disks>{inner}</domainsnapshot>"
    checked = checked_snapshot(snap.encode(), "snapshot-001.xml", {"vda"})
    assert len(checked.domains) == 1 and checked.domains[0].root.find("uuid") is None
    for bad, words in (
            (snap.replace("<memory snapshot='no'/>",
                          "<memory snapshot='external' file='/etc/x'/>"), "external"),
            (snap.replace("<disk name='vda' snapshot='internal'/>",
                          "<disk name='vda' snapshot='external'><source file='/x'/></disk>"),
             "external"),
            (snap.replace("</devices>", "<hostdev mode='subsystem' type='usb'/></devices>"),
             "in its saved definition, <hostdev>")):
        with pytest.raises(ArchiveRefused, match=words):
            checked_snapshot(bad.encode(), "snapshot-001.xml", {"vda"})


def test_the_manifest_must_name_exactly_what_the_archive_holds():
    disks = [ArchivedDisk("vda", "disk-vda.qcow2", "qcow2")]
    good = manifest_json("web", disks, ["snapshot-001.xml"], "snapshot-001.xml")
    found = read_manifest(good, {"disk-vda.qcow2", "snapshot-001.xml"})
    assert found.disks == disks and found.current == "snapshot-001.xml"
    for members in ({"disk-vda.qcow2"}, {"disk-vda.qcow2", "disk-vdb.raw", "snapshot-001.xml"}):
        with pytest.raises(ArchiveRefused):
            read_manifest(good, members)
    data = json.loads(good)
    for change in ({"format": "other"}, {"version": 2},
                   {"disks": [{"target": "vda", "member": "../x", "format": "qcow2"}]},
                   {"disks": [{"target": "vdb", "member": "disk-vda.qcow2", "format": "qcow2"}]}):
        with pytest.raises(ArchiveRefused):
            read_manifest(json.dumps({**data, **change}).encode(),
                          {"disk-vda.qcow2", "snapshot-001.xml"})


def test_the_definitions_kept_in_memory_are_bounded_together():
    policy = DomainArchive()
    for n in range(15):
        policy.kept(f"snapshot-{n:03d}.xml", bytes(1 << 20))
    with pytest.raises(ArchiveRefused, match="implausibly large together"):
        policy.kept("snapshot-015.xml", bytes(1 << 20) + b"x")
