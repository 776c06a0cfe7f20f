"""Fixtures for the VM import tests, built by the suite itself: OVF descriptors written the
way VirtualBox 7 and VMware (ovftool) export them, a ``.vbox`` machine file, libvirt domain
XML, disks in every format (made with qemu-img), OVAs tarred from them, and one bootable
raw disk: a FAT file system (no partition table) with SYSLINUX in its boot sector, holding
the lab's cloud kernel and busybox initramfs (tests/qemu_guest.py) and booting them with
``console=ttyS0``, so SeaBIOS boots it without any network. Built with mtools and
syslinux (Debian ``mtools``, ``syslinux``, ``syslinux-common``; scripts/setup-lab.sh) and
cached beside the guest kernel."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import qemu_guest

BOOT_VERSION = 1
SYSLINUX_CFG = """DEFAULT linux
PROMPT 0
TIMEOUT 1
SERIAL 0 115200
LABEL linux
  KERNEL /vmlinuz
  INITRD /initrd.gz
  APPEND console=ttyS0 panic=-1
"""


def boot_disk() -> Path:
    """A 48 MiB raw disk SeaBIOS boots into the busybox guest (cached)."""
    kernel, initrd = qemu_guest.guest()
    target = qemu_guest.cache_dir() / f"boot-disk-v{qemu_guest.CACHE_VERSION}.{BOOT_VERSION}.raw"
    if target.exists():
        return target
    for tool in ("mformat", "mcopy", "syslinux"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} is missing (install mtools, syslinux and "
                               f"syslinux-common: scripts/setup-lab.sh)")
    with tempfile.TemporaryDirectory(dir=qemu_guest.cache_dir()) as tmp:
        img = Path(tmp, "boot.raw")
        with open(img, "wb") as f:
            f.truncate(48 << 20)
        cfg = Path(tmp, "syslinux.cfg")
        cfg.write_text(SYSLINUX_CFG)
        env = {**os.environ, "MTOOLS_SKIP_CHECK": "1"}
        for argv in (["mformat", "-i", str(img), "-v", "CORRAL", "::"],
                     ["syslinux", "--install", str(img)],
                     ["mcopy", "-i", str(img), str(kernel), "::/vmlinuz"],
                     ["mcopy", "-i", str(img), str(initrd), "::/initrd.gz"],
                     ["mcopy", "-i", str(img), str(cfg), "::/syslinux.cfg"]):
            subprocess.run(argv, check=True, capture_output=True, env=env)
        os.replace(img, target)
    return target


def qemu_img(*args: str) -> None:
    subprocess.run(["qemu-img", *args], check=True, capture_output=True)


SUBFORMATS = {"vmdk": ["-o", "subformat=streamOptimized"],
              "vmdk-sparse": ["-o", "subformat=monolithicSparse"]}


def convert(raw: Path, out: Path, fmt: str) -> Path:
    """``raw`` converted to ``fmt`` (``vmdk`` is stream-optimised, ``vmdk-sparse``
    monolithicSparse)."""
    qemu_img("convert", "-f", "raw", "-O", fmt.split("-")[0], *SUBFORMATS.get(fmt, []),
             str(raw), str(out))
    return out


def pattern_disk(path: Path, size: int = 8 << 20) -> Path:
    """A raw disk with a recognisable pattern in every MiB (compare copies against it)."""
    with open(path, "wb") as f:
        for i in range(size >> 20):
            f.write((f"corral-import block {i:06d} ".encode() * 40).ljust(1 << 20, b"\0"))
    return path


VMDK_FORMAT = "http://www.vmware.com/interfaces/specifications/vmdk.html#streamOptimized"


def vbox7_ovf(name: str, disks: list[tuple[str, int]], *, cpus: int = 1, memory_mib: int = 256,
              macs: tuple[str, ...] = ("080027A1B2C3",), efi: bool = False,
              os_type: str = "Debian_64", extra_items: str = "") -> bytes:
    """An OVF 1.0 descriptor as VirtualBox 7 exports it: SATA controller, disks as
    stream-optimised VMDKs (``disks``: (href, capacity)), E1000 NICs on NAT whose MACs
    are in the ``vbox:Machine`` section, a USB controller and a sound card."""
    refs = "".join(f'    <File ovf:id="file{i + 1}" ovf:href="{href}"/>\n'
                   for i, (href, _c) in enumerate(disks))
    disk_section = "".join(
        f'    <Disk ovf:capacity="{cap}" ovf:diskId="vmdisk{i + 1}" ovf:fileRef="file{i + 1}" '
        f'ovf:format="{VMDK_FORMAT}" vbox:uuid="0000000{i}-0000-0000-0000-000000000000"/>\n'
        for i, (_h, cap) in enumerate(disks))
    drives = "".join(f"""      <Item>
        <rasd:AddressOnParent>{i}</rasd:AddressOnParent>
        <rasd:Caption>disk{i + 1}</rasd:Caption>
        <rasd:Description>Disk Image</rasd:Description>
        <rasd:ElementName>disk{i + 1}</rasd:ElementName>
        <rasd:HostResource>/disk/vmdisk{i + 1}</rasd:HostResource>
        <rasd:InstanceID>{10 + i}</rasd:InstanceID>
        <rasd:Parent>5</rasd:Parent>
        <rasd:ResourceType>17</rasd:ResourceType>
      </Item>
""" for i in range(len(disks)))
    nics = "".join(f"""      <Item>
        <rasd:AutomaticAllocation>true</rasd:AutomaticAllocation>
        <rasd:Caption>Ethernet adapter on 'NAT'</rasd:Caption>
        <rasd:Connection>NAT</rasd:Connection>
        <rasd:ElementName>Ethernet adapter on 'NAT'</rasd:ElementName>
        <rasd:InstanceID>{20 + i}</rasd:InstanceID>
        <rasd:ResourceSubType>E1000</rasd:ResourceSubType>
        <rasd:ResourceType>10</rasd:ResourceType>
      </Item>
""" for i in range(len(macs)))
    adapters = "".join(f'          <Adapter slot="{i}" enabled="true" MACAddress="{mac}" '
                       f'type="82540EM">\n            <NAT/>\n          </Adapter>\n'
                       for i, mac in enumerate(macs))
    firmware = '        <Firmware type="EFI"/>\n' if efi else ""
    return f"""<?xml version="1.0"?>
<Envelope ovf:version="1.0" xml:lang="en-US" xmlns="http://schemas.dmtf.org/ovf/envelope/1" xmlns:ovf="http://schemas.dmtf.org/ovf/envelope/1" xmlns:rasd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_ResourceAllocationSettingData" xmlns:vssd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_VirtualSystemSettingData" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:vbox="http://www.virtualbox.org/ovf/machine">
  <References>
{refs}  </References>
  <DiskSection>
    <Info>List of the virtual disks used in the package</Info>
{disk_section}  </DiskSection>
  <NetworkSection>
    <Info>Logical networks used in the package</Info>
    <Network ovf:name="NAT">
      <Description>Logical network used by this appliance.</Description>
    </Network>
  </NetworkSection>
  <VirtualSystem ovf:id="{name}">
    <Info>A virtual machine</Info>
    <OperatingSystemSection ovf:id="96">
      <Info>The kind of installed guest operating system</Info>
      <Description>{os_type}</Description>
      <vbox:OSType ovf:required="false">{os_type}</vbox:OSType>
    </OperatingSystemSection>
    <VirtualHardwareSection>
      <Info>Virtual hardware requirements for a virtual machine</Info>
      <System>
        <vssd:ElementName>Virtual Hardware Family</vssd:ElementName>
        <vssd:InstanceID>0</vssd:InstanceID>
        <vssd:VirtualSystemIdentifier>{name}</vssd:VirtualSystemIdentifier>
        <vssd:VirtualSystemType>virtualbox-2.2</vssd:VirtualSystemType>
      </System>
      <Item>
        <rasd:Caption>{cpus} virtual CPU</rasd:Caption>
        <rasd:Description>Number of virtual CPUs</rasd:Description>
        <rasd:ElementName>{cpus} virtual CPU</rasd:ElementName>
        <rasd:InstanceID>1</rasd:InstanceID>
        <rasd:ResourceType>3</rasd:ResourceType>
        <rasd:VirtualQuantity>{cpus}</rasd:VirtualQuantity>
      </Item>
      <Item>
        <rasd:AllocationUnits>MegaBytes</rasd:AllocationUnits>
        <rasd:Caption>{memory_mib} MB of memory</rasd:Caption>
        <rasd:Description>Memory Size</rasd:Description>
        <rasd:ElementName>{memory_mib} MB of memory</rasd:ElementName>
        <rasd:InstanceID>2</rasd:InstanceID>
        <rasd:ResourceType>4</rasd:ResourceType>
        <rasd:VirtualQuantity>{memory_mib}</rasd:VirtualQuantity>
      </Item>
      <Item>
        <rasd:Address>0</rasd:Address>
        <rasd:Caption>ideController0</rasd:Caption>
        <rasd:Description>IDE Controller</rasd:Description>
        <rasd:ElementName>ideController0</rasd:ElementName>
        <rasd:InstanceID>3</rasd:InstanceID>
        <rasd:ResourceSubType>PIIX4</rasd:ResourceSubType>
        <rasd:ResourceType>5</rasd:ResourceType>
      </Item>
      <Item>
        <rasd:Address>0</rasd:Address>
        <rasd:Caption>sataController0</rasd:Caption>
        <rasd:Description>SATA Controller</rasd:Description>
        <rasd:ElementName>sataController0</rasd:ElementName>
        <rasd:InstanceID>5</rasd:InstanceID>
        <rasd:ResourceSubType>AHCI</rasd:ResourceSubType>
        <rasd:ResourceType>20</rasd:ResourceType>
      </Item>
      <Item ovf:required="false">
        <rasd:Address>0</rasd:Address>
        <rasd:Caption>usb</rasd:Caption>
        <rasd:Description>USB Controller</rasd:Description>
        <rasd:ElementName>usb</rasd:ElementName>
        <rasd:InstanceID>6</rasd:InstanceID>
        <rasd:ResourceType>23</rasd:ResourceType>
      </Item>
      <Item ovf:required="false">
        <rasd:AddressOnParent>3</rasd:AddressOnParent>
        <rasd:AutomaticAllocation>false</rasd:AutomaticAllocation>
        <rasd:Caption>sound</rasd:Caption>
        <rasd:Description>Sound Card</rasd:Description>
        <rasd:ElementName>sound</rasd:ElementName>
        <rasd:InstanceID>7</rasd:InstanceID>
        <rasd:ResourceSubType>ensoniq1371</rasd:ResourceSubType>
        <rasd:ResourceType>35</rasd:ResourceType>
      </Item>
{drives}      <Item>
        <rasd:AddressOnParent>0</rasd:AddressOnParent>
        <rasd:AutomaticAllocation>false</rasd:AutomaticAllocation>
        <rasd:Caption>cdrom1</rasd:Caption>
        <rasd:Description>CD-ROM Drive</rasd:Description>
        <rasd:ElementName>cdrom1</rasd:ElementName>
        <rasd:InstanceID>9</rasd:InstanceID>
        <rasd:Parent>3</rasd:Parent>
        <rasd:ResourceType>15</rasd:ResourceType>
      </Item>
{nics}{extra_items}    </VirtualHardwareSection>
    <vbox:Machine ovf:required="false" version="1.19-linux" uuid="{{6a3c4b2e-0000-4000-8000-000000000001}}" name="{name}" OSType="{os_type}" snapshotFolder="Snapshots">
      <ovf:Info>Complete VirtualBox machine configuration in VirtualBox format</ovf:Info>
      <Hardware>
        <CPU count="{cpus}"/>
        <Memory RAMSize="{memory_mib}"/>
{firmware}        <Network>
{adapters}        </Network>
      </Hardware>
    </vbox:Machine>
  </VirtualSystem>
</Envelope>
""".encode()


def vmware_ovf(name: str, disks: list[tuple[str, int, int]], *, cpus: int = 2,
               memory_mib: int = 1024, mac: str = "00:50:56:ab:cd:ef", efi: bool = True,
               os_type: str = "debian11_64Guest") -> bytes:
    """An OVF descriptor as VMware's ovftool exports it: ``disks`` are (href, capacity in
    GiB, file size); capacities in ``byte * 2^30``, memory in ``byte * 2^20``, an LSI
    Logic SCSI controller, a VMXNET3 NIC with its MAC in ``rasd:Address``, firmware in
    ``vmw:Config``."""
    refs = "".join(f'    <File ovf:href="{href}" ovf:id="file{i + 1}" ovf:size="{size}"/>\n'
                   for i, (href, _c, size) in enumerate(disks))
    disk_section = "".join(
        f'    <Disk ovf:capacity="{cap}" ovf:capacityAllocationUnits="byte * 2^30" '
        f'ovf:diskId="vmdisk{i + 1}" ovf:fileRef="file{i + 1}" ovf:format="{VMDK_FORMAT}" '
        f'ovf:populatedSize="{size}"/>\n' for i, (_h, cap, size) in enumerate(disks))
    drives = "".join(f"""      <Item>
        <rasd:AddressOnParent>{i}</rasd:AddressOnParent>
        <rasd:ElementName>Hard disk {i + 1}</rasd:ElementName>
        <rasd:HostResource>ovf:/disk/vmdisk{i + 1}</rasd:HostResource>
        <rasd:InstanceID>{4 + i}</rasd:InstanceID>
        <rasd:Parent>3</rasd:Parent>
        <rasd:ResourceType>17</rasd:ResourceType>
        <vmw:Config ovf:required="false" vmw:key="backing.writeThrough" vmw:value="false"/>
      </Item>
""" for i in range(len(disks)))
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!--Generated by VMware ovftool 4.4.3 (build-18663434), UTC time: 2026-11-30T10:00:00.000Z-->
<Envelope vmw:buildId="build-18663434" xmlns="http://schemas.dmtf.org/ovf/envelope/1" xmlns:cim="http://schemas.dmtf.org/wbem/wscim/1/common" xmlns:ovf="http://schemas.dmtf.org/ovf/envelope/1" xmlns:rasd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_ResourceAllocationSettingData" xmlns:vmw="http://www.vmware.com/schema/ovf" xmlns:vssd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_VirtualSystemSettingData" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <References>
{refs}  </References>
  <DiskSection>
    <Info>Virtual disk information</Info>
{disk_section}  </DiskSection>
  <NetworkSection>
    <Info>The list of logical networks</Info>
    <Network ovf:name="VM Network">
      <Description>The VM Network network</Description>
    </Network>
  </NetworkSection>
  <VirtualSystem ovf:id="{name}">
    <Info>A virtual machine</Info>
    <Name>{name}</Name>
    <OperatingSystemSection ovf:id="96" vmw:osType="{os_type}">
      <Info>The kind of installed guest operating system</Info>
    </OperatingSystemSection>
    <VirtualHardwareSection>
      <Info>Virtual hardware requirements</Info>
      <System>
        <vssd:ElementName>Virtual Hardware Family</vssd:ElementName>
        <vssd:InstanceID>0</vssd:InstanceID>
        <vssd:VirtualSystemIdentifier>{name}</vssd:VirtualSystemIdentifier>
        <vssd:VirtualSystemType>vmx-19</vssd:VirtualSystemType>
      </System>
      <Item>
        <rasd:AllocationUnits>hertz * 10^6</rasd:AllocationUnits>
        <rasd:Description>Number of Virtual CPUs</rasd:Description>
        <rasd:ElementName>{cpus} virtual CPU(s)</rasd:ElementName>
        <rasd:InstanceID>1</rasd:InstanceID>
        <rasd:ResourceType>3</rasd:ResourceType>
        <rasd:VirtualQuantity>{cpus}</rasd:VirtualQuantity>
        <vmw:CoresPerSocket ovf:required="false">1</vmw:CoresPerSocket>
      </Item>
      <Item>
        <rasd:AllocationUnits>byte * 2^20</rasd:AllocationUnits>
        <rasd:Description>Memory Size</rasd:Description>
        <rasd:ElementName>{memory_mib}MB of memory</rasd:ElementName>
        <rasd:InstanceID>2</rasd:InstanceID>
        <rasd:ResourceType>4</rasd:ResourceType>
        <rasd:VirtualQuantity>{memory_mib}</rasd:VirtualQuantity>
      </Item>
      <Item>
        <rasd:Address>0</rasd:Address>
        <rasd:Description>SCSI Controller</rasd:Description>
        <rasd:ElementName>SCSI Controller 0</rasd:ElementName>
        <rasd:InstanceID>3</rasd:InstanceID>
        <rasd:ResourceSubType>lsilogic</rasd:ResourceSubType>
        <rasd:ResourceType>6</rasd:ResourceType>
      </Item>
{drives}      <Item>
        <rasd:AddressOnParent>7</rasd:AddressOnParent>
        <rasd:AutomaticAllocation>true</rasd:AutomaticAllocation>
        <rasd:Address>{mac}</rasd:Address>
        <rasd:Connection>VM Network</rasd:Connection>
        <rasd:Description>VmxNet3 ethernet adapter on &quot;VM Network&quot;</rasd:Description>
        <rasd:ElementName>Network adapter 1</rasd:ElementName>
        <rasd:InstanceID>10</rasd:InstanceID>
        <rasd:ResourceSubType>VmxNet3</rasd:ResourceSubType>
        <rasd:ResourceType>10</rasd:ResourceType>
      </Item>
      <Item ovf:required="false">
        <rasd:AutomaticAllocation>false</rasd:AutomaticAllocation>
        <rasd:ElementName>Video card</rasd:ElementName>
        <rasd:InstanceID>11</rasd:InstanceID>
        <rasd:ResourceType>24</rasd:ResourceType>
      </Item>
      <Item ovf:required="false">
        <rasd:Address>0</rasd:Address>
        <rasd:ElementName>USB controller</rasd:ElementName>
        <rasd:InstanceID>12</rasd:InstanceID>
        <rasd:ResourceSubType>vmware.usb.ehci</rasd:ResourceSubType>
        <rasd:ResourceType>23</rasd:ResourceType>
      </Item>
      <vmw:Config ovf:required="false" vmw:key="firmware" vmw:value="{'efi' if efi else 'bios'}"/>
      <vmw:Config ovf:required="false" vmw:key="tools.syncTimeWithHost" vmw:value="false"/>
    </VirtualHardwareSection>
  </VirtualSystem>
</Envelope>
""".encode()


def vbox_file(name: str, disks: list[tuple[str, str]], *, cpus: int = 1, memory_mib: int = 256,
              mac: str = "080027D1E2F3", efi: bool = False, usb_filter: bool = True) -> bytes:
    """A VirtualBox 7 ``.vbox`` machine file: ``disks`` are (location, format) attached to a
    SATA controller in order, plus an empty DVD drive, a NAT NIC, a USB device filter."""
    media = "".join(f'        <HardDisk uuid="{{0000000{i}-1111-2222-3333-444444444444}}" '
                    f'location="{loc}" format="{fmt}" type="Normal"/>\n'
                    for i, (loc, fmt) in enumerate(disks))
    attached = "".join(
        f'          <AttachedDevice type="HardDisk" hotpluggable="false" port="{i}" '
        f'device="0">\n            <Image uuid="{{0000000{i}-1111-2222-3333-444444444444}}"/>'
        f'\n          </AttachedDevice>\n' for i in range(len(disks)))
    usb = ('      <USB>\n        <Controllers>\n          <Controller name="OHCI" type="OHCI"/>'
           '\n        </Controllers>\n        <DeviceFilters>\n          <DeviceFilter name='
           '"stick" active="true" vendorId="0781"/>\n        </DeviceFilters>\n      </USB>\n'
           if usb_filter else "")
    return f"""<?xml version="1.0"?>
<!--
** DO NOT EDIT THIS FILE.
-->
<VirtualBox xmlns="http://www.virtualbox.org/" version="1.19-linux">
  <Machine uuid="{{9b1d7c2e-0000-4000-8000-000000000002}}" name="{name}" OSType="Debian_64" snapshotFolder="Snapshots" lastStateChange="2026-11-30T10:00:00Z">
    <MediaRegistry>
      <HardDisks>
{media}      </HardDisks>
    </MediaRegistry>
    <Hardware>
      <CPU count="{cpus}">
        <PAE enabled="true"/>
      </CPU>
      <Memory RAMSize="{memory_mib}"/>
{'      <Firmware type="EFI"/>' + chr(10) if efi else ''}      <Display controller="VMSVGA" VRAMSize="16"/>
{usb}      <Network>
        <Adapter slot="0" enabled="true" MACAddress="{mac}" type="82540EM">
          <NAT/>
        </Adapter>
        <Adapter slot="1" type="Am79C973"/>
      </Network>
      <AudioAdapter driver="Pulse" enabled="true" enabledIn="false" enabledOut="true"/>
      <StorageControllers>
        <StorageController name="SATA" type="AHCI" PortCount="{max(2, len(disks) + 1)}" useHostIOCache="false" Bootable="true" IDE0MasterEmulationPort="0">
{attached}          <AttachedDevice passthrough="false" type="DVD" hotpluggable="false" port="{len(disks)}" device="0"/>
        </StorageController>
      </StorageControllers>
    </Hardware>
  </Machine>
</VirtualBox>
""".encode()


def libvirt_domain(name: str, disks: list[tuple[str, str]], *, efi: bool = False,
                   spice_only: bool = True, usb_hostdev: bool = True,
                   mac: str = "52:54:00:6b:3c:58") -> bytes:
    """``virsh dumpxml`` of a q35 domain: ``disks`` are (source file, driver type) on
    virtio with boot order 1 for the first, plus a block disk, a CD-ROM, a SPICE display,
    a QXL card, a USB host device and a sound card."""
    items = "".join(f"""    <disk type='file' device='disk'>
      <driver name='qemu' type='{fmt}' discard='unmap'/>
      <source file='{src}'/>
      <target dev='vd{chr(97 + i)}' bus='virtio'/>
{"      <boot order='1'/>" + chr(10) if i == 0 else ""}    </disk>
""" for i, (src, fmt) in enumerate(disks))
    loader = ("    <loader readonly='yes' type='pflash'>/usr/share/OVMF/OVMF_CODE_4M.fd</loader>\n"
              "    <nvram>/var/lib/libvirt/qemu/nvram/x_VARS.fd</nvram>\n" if efi else "")
    graphics = "    <graphics type='spice' autoport='yes'/>\n" if spice_only else \
        "    <graphics type='vnc' port='-1'/>\n"
    hostdev = ("    <hostdev mode='subsystem' type='usb' managed='yes'>\n      <source>\n"
               "        <vendor id='0x0781'/>\n        <product id='0x5567'/>\n      </source>\n"
               "    </hostdev>\n" if usb_hostdev else "")
    return f"""<domain type='kvm'>
  <name>{name}</name>
  <uuid>3e7c3bd2-9a3b-4d5e-8f00-000000000003</uuid>
  <metadata>
    <libosinfo:libosinfo xmlns:libosinfo="http://libosinfo.org/xmlns/libvirt/domain/1.0">
      <libosinfo:os id="http://debian.org/debian/12"/>
    </libosinfo:libosinfo>
  </metadata>
  <memory unit='KiB'>262144</memory>
  <currentMemory unit='KiB'>262144</currentMemory>
  <vcpu placement='static'>2</vcpu>
  <os>
    <type arch='x86_64' machine='pc-q35-7.2'>hvm</type>
{loader}  </os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
{items}    <disk type='block' device='disk'>
      <driver name='qemu' type='raw'/>
      <source dev='/dev/sdz'/>
      <target dev='sdb' bus='sata'/>
    </disk>
    <disk type='file' device='cdrom'>
      <driver name='qemu' type='raw'/>
      <target dev='sda' bus='sata'/>
      <readonly/>
    </disk>
    <interface type='network'>
      <mac address='{mac}'/>
      <source network='default'/>
      <model type='virtio'/>
    </interface>
{graphics}    <video>
      <model type='qxl' ram='65536' vram='65536' vgamem='16384' heads='1' primary='yes'/>
    </video>
{hostdev}    <sound model='ich9'/>
    <redirdev bus='usb' type='spicevmc'/>
  </devices>
</domain>
""".encode()


def make_ova(path: Path, members: list[tuple[str, bytes | Path]], *,
             manifest: bool = True, tweak=None) -> Path:
    """An OVA (a ustar archive) of ``members`` in order (name → bytes or file), with a
    SHA256 manifest ``<first>.mf`` after them when ``manifest``. ``tweak(info)`` may change
    each TarInfo (hostile variants)."""
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        digests = []
        for name, source in members:
            data = source if isinstance(source, bytes) else Path(source).read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 1764500000
            if tweak:
                tweak(info)
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
            digests.append(f"SHA256({name}) = {hashlib.sha256(data).hexdigest()}\n")
        if manifest:
            mf = "".join(digests).encode()
            info = tarfile.TarInfo(members[0][0].rsplit(".", 1)[0] + ".mf")
            info.size, info.mode = len(mf), 0o644
            tar.addfile(info, io.BytesIO(mf))
    return path
