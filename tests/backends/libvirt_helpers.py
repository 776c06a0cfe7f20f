"""What the libvirt backend's tests share: a connected backend on the private libvirtd
(``tests/lab_libvirt.py``), domains of the test guest defined as an admin would, and
``virsh`` on the same daemon to read back what the backend did without it."""

from __future__ import annotations

import contextlib
import subprocess
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import libvirt

import lab_libvirt
from backends import get_backend
from backends.base import Backend
from backends.errors import NotFound
from backends.models import InstanceRef, Remote


@contextlib.asynccontextmanager
async def connected(vlab: lab_libvirt.LibvirtLab, name: str, prefix: str):
    """A connected backend on the lab's unix socket; at the end the domains named
    ``prefix…`` are deleted and their disks with them."""
    backend = get_backend(Remote(name=name, kind="libvirt", address=vlab.unix_uri), timeout=10)
    await backend.connect()
    try:
        yield backend
    finally:
        for inst in await backend.list_instances():
            if inst.name.startswith(prefix):
                with contextlib.suppress(NotFound):
                    await backend.delete(inst.ref, force=True)
        for disk in vlab.root.glob(f"{prefix}*"):
            disk.unlink()
        await backend.close()


def virsh(vlab: lab_libvirt.LibvirtLab, *args: str, check: bool = True
          ) -> subprocess.CompletedProcess:
    return subprocess.run(["virsh", "-c", vlab.unix_uri, *args], capture_output=True,
                          text=True, check=check)


def image(vlab: lab_libvirt.LibvirtLab, name: str, fmt: str = "qcow2") -> Path:
    """A new 16 MiB disk image in the lab's directory (seen by its daemon too)."""
    path = vlab.root / f"{name}.{fmt}"
    subprocess.run(["qemu-img", "create", "-q", "-f", fmt, str(path), "16M"], check=True)
    return path


def define(vlab: lab_libvirt.LibvirtLab, backend: Backend, guest, prefix: str, *,
           formats: tuple[str, ...] = ("qcow2",), **xml) -> InstanceRef:
    """A new shut-off domain of the test guest with a disk of each of ``formats``."""
    name = f"{prefix}{uuid.uuid4().hex[:6]}"
    disks = tuple((image(vlab, f"{name}-{i}", fmt), fmt) for i, fmt in enumerate(formats))
    lab_libvirt.define(vlab, lab_libvirt.guest_xml(name, *guest, disks=disks, **xml))
    return InstanceRef(backend.remote.name, name)


def disk_snapshots(path: Path) -> list[str]:
    """The internal snapshots ``qemu-img`` finds in a qcow2 file (not through libvirt)."""
    out = subprocess.run(["qemu-img", "snapshot", "-l", "-U", str(path)], capture_output=True,
                         text=True, check=True).stdout
    return [line.split()[1] for line in out.splitlines()[2:] if line.split()]


def domain_xml(vlab: lab_libvirt.LibvirtLab, name: str, *, saved: bool = False) -> ET.Element:
    """The domain's XML as libvirt has it: the running definition, or the saved one."""
    conn = libvirt.open(vlab.unix_uri)
    try:
        flags = libvirt.VIR_DOMAIN_XML_INACTIVE if saved else 0
        return ET.fromstring(conn.lookupByName(name).XMLDesc(flags))
    finally:
        conn.close()
