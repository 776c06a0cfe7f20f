"""Usage figures of a running libvirt domain (``get_states``) on the suite's private libvirtd
(``tests/lab_libvirt.py``): beside CPU and memory, the size of the disks' files on the host (and
their capacity) and the bytes its NICs moved, from the same ``domainListGetStats`` round
trip. The guest (virtio net and block drivers loaded by its /init) is made to send on its
NIC and write its disk on the serial console; the figures grow, the disk's as ``virsh domblkinfo`` says."""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid

import pytest
import pytest_asyncio

import lab_libvirt

from backends.models import InstanceRef

from .libvirt_helpers import connected, image

live = pytest.mark.asyncio(loop_scope="module")
PREFIX = "lvu-"
NIC = "<interface type='ethernet'><model type='virtio'/></interface>"


class Sink:
    def __init__(self) -> None:
        self.data = b""

    def feed(self, data: bytes) -> None:
        self.data += data

    def closed(self, reason: str) -> None:
        pass


@pytest.fixture(scope="module")
def vlab(request):
    return lab_libvirt.session_lab(request)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lv(vlab):
    async with connected(vlab, "lvu", PREFIX) as backend:
        yield backend


async def _typed_until(session, sink: Sink, line: bytes, wanted: bytes, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await session.send_bytes(line)
        for _ in range(30):
            if wanted in sink.data:
                return
            await asyncio.sleep(0.1)
    raise AssertionError(f"{wanted!r} never came; the console showed {sink.data[-800:]!r}")


def _physical(vlab, name: str) -> int:
    out = subprocess.run(["virsh", "-c", vlab.unix_uri, "domblkinfo", name, "vda"],
                         capture_output=True, text=True, check=True).stdout
    return int(next(line.split()[1] for line in out.splitlines()
                    if line.startswith("Physical:")))


@live
async def test_disk_and_network_usage_are_there_and_grow(lv, vlab, guest):
    ref = InstanceRef(lv.remote.name, f"{PREFIX}{uuid.uuid4().hex[:6]}")
    disk = image(vlab, ref.name)  # 16 MiB qcow2
    xml = lab_libvirt.guest_xml(ref.name, *guest, disks=((disk, "qcow2"),))
    lab_libvirt.define(vlab, xml.replace("</devices>", NIC + "</devices>"))
    await lv.start(ref)
    try:
        first = (await lv.get_states([ref]))[ref]
        assert first.disk_usage and first.disk_usage > 0
        assert first.disk_limit == 16 * 2**20
        session = await lv.open_console(ref)
        sink = Sink()
        await session.start(sink)
        try:
            await _typed_until(session, sink, b"echo up$((40+2))\r", b"up42")
            await session.send_bytes(
                b"mount -t devtmpfs dev /dev; ip link set eth0 up; "
                b"ip addr add 10.216.0.2/24 dev eth0; ping -c 3 -W 1 10.216.0.1; "
                b"dd if=/dev/urandom of=/dev/vda bs=64k count=64 conv=fsync; "
                b"echo did$((40+2))\r")
            await _typed_until(session, sink, b"", b"did42", timeout=60)
        finally:
            await session.close()
        later = (await lv.get_states([ref]))[ref]
        assert later.tx_bytes > first.tx_bytes, (first, later)  # ARP and ping sent
        assert later.disk_usage > first.disk_usage + 2 * 2**20, (first, later)  # 4 MiB
        assert abs(later.disk_usage - _physical(vlab, ref.name)) < 2**20  # the same file
        assert later.sampled_at > first.sampled_at
    finally:
        await lv.stop(ref, force=True)
