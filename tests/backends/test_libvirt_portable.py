"""``portable_vm`` of the libvirt backend against the suite's private libvirtd
(tests/lab_libvirt.py): a shut-off domain is given as its domain XML and the paths of its
file disks, and nothing of it changes; a running domain, and a remote reached over
``qemu+ssh://`` (its disks are on another machine), are refused in words."""

from __future__ import annotations

import uuid

import libvirt
import pytest

import lab_libvirt
from backends import get_backend
from backends.errors import InvalidInput, Unsupported
from backends.models import Capability, InstanceRef, Remote


@pytest.fixture(scope="module")
def vlab(request):
    return lab_libvirt.session_lab(request)


async def test_a_shut_off_domain_is_given_as_its_xml_and_disks(vlab, guest, tmp_path):
    kernel, initrd = guest
    disk = tmp_path / "d.raw"
    disk.write_bytes(b"\0" * (1 << 20))
    name = f"lvp-{uuid.uuid4().hex[:6]}"
    lab_libvirt.define(vlab, lab_libvirt.guest_xml(name, kernel, initrd, disk=disk))
    conn = libvirt.open(vlab.unix_uri)
    backend = get_backend(Remote(name="virt", kind="libvirt", address=vlab.unix_uri))
    try:
        await backend.connect()
        before = conn.lookupByName(name).XMLDesc(0)
        vm = await backend.portable_vm(InstanceRef("virt", name))
        assert (vm.name, vm.format, vm.disks) == (name, "libvirt-domain", (str(disk),))
        assert f"<name>{name}</name>".encode() in vm.descriptor
        assert conn.lookupByName(name).XMLDesc(0) == before
        conn.lookupByName(name).create()
        with pytest.raises(InvalidInput, match="is not shut off: shut it down first"):
            await backend.portable_vm(InstanceRef("virt", name))
    finally:
        dom = conn.lookupByName(name)
        if dom.isActive():
            dom.destroy()
        dom.undefine()
        conn.close()
        await backend.close()


async def test_a_remote_libvirts_domains_are_refused_in_words(vlab):
    backend = get_backend(Remote(name="far", kind="libvirt", address=vlab.ssh_uri()))
    assert Capability.PORTABLE not in backend.capabilities  # not offered at all
    with pytest.raises(Unsupported, match=r"are on root@127\.0\.0\.1:\d+: corral converts "
                                           "domains of a libvirt on this machine only"):
        await backend.portable_vm(InstanceRef("far", "any"))
    await backend.close()
