"""``portable_vm``: a stopped domain of a libvirt on this machine as its domain XML and
the files of its disks, for another backend to make a VM from (``backends.portable``).
Only reads: the domain and its disks are left as they are."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import libvirt

from ..base import Backend
from ..errors import InvalidInput, Unsupported
from ..models import InstanceRef, InstanceStatus
from ..portable import PortableVM
from .connection import Connection
from .uri import host_of, is_remote


class Portable(Backend):
    """The ``portable`` ability of a libvirt remote."""

    portable_format = "libvirt-domain"
    lv: Connection

    async def portable_vm(self, ref: InstanceRef) -> PortableVM:
        if is_remote(self.remote.address):
            # not declared for such a remote (see the backend): refused as any undeclared verb
            raise Unsupported(f"The disks of {ref} are on {host_of(self.remote.address)}: "
                              f"corral converts domains of a libvirt on this machine only.")
        dom = await self.lv.domain(ref)
        if await self.lv.status(dom) is not InstanceStatus.STOPPED:
            raise InvalidInput(f"{ref} is not shut off: shut it down first (its disks "
                               f"change while it runs).")
        xml = await self.lv.call(dom.XMLDesc, libvirt.VIR_DOMAIN_XML_INACTIVE,
                                 what=f"reading the definition of {ref}")
        disks = []
        for disk in ET.fromstring(xml).iterfind("devices/disk"):
            source = disk.find("source")
            path = source.get("file", "") if source is not None else ""
            if disk.get("type") == "file" and disk.get("device", "disk") in ("disk", "lun") \
                    and path:
                if not os.access(path, os.R_OK):
                    raise InvalidInput(f"The disk {path} of {ref} cannot be read here.")
                disks.append(path)
        return PortableVM(ref.name, self.portable_format, xml.encode(), tuple(disks))
