"""The graphical screen of a libvirt domain against the suite's private libvirtd
(``tests/lab_libvirt.py``): the test guest with a VNC device (listening on a unix socket
libvirt picks) in VGA text mode, read through ``virDomainOpenGraphicsFD`` by corral's
console server. One boot: the frame matches libvirt's own screenshot, keys typed on the
screen reach the guest's tty1, the PNG screenshot is the screen, the server ends with the
domain. Refused in words: a shut-off domain, one without a VNC device, a remote URI
reached without SSH (TCP, TLS)."""

from __future__ import annotations

import asyncio
import time

import pytest
import pytest_asyncio
from PIL import Image, ImageChops

import lab_libvirt
from backends import get_backend
from backends.console import server_alive
from backends.errors import Conflict, Unsupported
from backends.models import Capability, InstanceRef, InstanceStatus, Remote

from .libvirt_helpers import connected, define, virsh
from .test_qemu_display import Sink, typing

live = pytest.mark.asyncio(loop_scope="module")
PREFIX = "lvd-"


@pytest.fixture(scope="module")
def vlab(request):
    return lab_libvirt.session_lab(request)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lv(vlab):
    async with connected(vlab, "lvd", PREFIX) as backend:
        yield backend


class Serial:
    def __init__(self) -> None:
        self.data = b""
        self.reason: str | None = None

    def feed(self, data: bytes) -> None:
        self.data += data

    def closed(self, reason: str) -> None:
        self.reason = reason

    async def until(self, needle: bytes, timeout: float = 60, *, session=None,
                    typed: bytes = b"") -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.data:
            if time.monotonic() > deadline:
                raise AssertionError(f"no {needle!r} on the serial console: "
                                     f"{self.data[-400:]!r}")
            if typed and session is not None:
                await session.send_bytes(typed)
            await asyncio.sleep(1 if typed else 0.1)


def screenshot_of(vlab, name: str, path) -> Image.Image:
    """libvirt's own screenshot of the domain (QEMU's screendump), not through corral."""
    virsh(vlab, "screenshot", name, str(path))
    return Image.open(path).convert("RGB")


def differing(a: Image.Image, b: Image.Image) -> float:
    """The share of pixels that differ (the blinking text cursor may)."""
    diff = ImageChops.difference(a, b).convert("L").point(lambda v: 255 if v else 0)
    return sum(diff.histogram()[1:]) / (a.width * a.height)


@live
async def test_screen_frame_keys_and_screenshot(lv, vlab, guest, tmp_path):
    ref = define(vlab, lv, guest, PREFIX, formats=(), vnc=True)
    stopped = await lv.get_instance(ref)
    assert stopped.extra["vnc"] and Capability.DISPLAY in lv.capabilities
    assert Capability.DISPLAY not in lv.instance_capabilities(stopped)
    with pytest.raises(Conflict, match="is not running: start it to see its screen"):
        await lv.open_display(ref)
    assert lv.display_viewer_argv(ref) == ["virt-viewer", "--connect", vlab.unix_uri,
                                           ref.name]

    await lv.start(ref)
    assert Capability.DISPLAY in lv.instance_capabilities(await lv.get_instance(ref))
    serial = await lv.open_console(ref)
    out = Serial()
    await serial.start(out)
    await out.until(b"k42", session=serial, typed=b"echo k$((6*7))\r")
    # what is typed on tty1 (the screen's keyboard) comes back on the serial console
    # (the lab guest's /init mounts no /dev: its devices first)
    await serial.send_bytes(b"mount -t devtmpfs dev /dev\r")
    await serial.send_bytes(b"(while read -r l; do echo \"tty1: $l\" > /dev/ttyS0; done)"
                            b" < /dev/tty1 > /dev/tty1 2>&1 &\r")
    await serial.send_bytes(b"echo corral on the screen > /dev/tty1\r")

    session = await lv.open_display(ref, fps=10)
    sink = Sink(session)
    await session.start(sink)
    await sink.until(lambda: session.image is not None, "the first frame")
    assert session.image.size == (720, 400)  # QEMU's VGA text mode, 80x25 of 9x16
    await sink.until(lambda: session.image.getbbox() is not None, "text on the screen")

    await session.keys(typing("hello World!\n"))
    await out.until(b"tty1: hello World!", timeout=30)

    # the frame is the screen libvirt sees (but for the cursor, which blinks)
    deadline = time.monotonic() + 20
    while True:
        await asyncio.sleep(0.5)
        theirs = screenshot_of(vlab, ref.name, tmp_path / "virsh.png")
        if theirs.size == session.image.size and differing(theirs, session.image) < 0.01:
            break
        assert time.monotonic() < deadline, "the screen differs from libvirt's screenshot"
    shot = Image.open(session.screenshot(tmp_path / "shot.png"))
    assert shot.format == "PNG" and shot.size == (720, 400)
    assert shot.convert("RGB").tobytes() == session.image.tobytes()

    # a second viewer shares the server's one VNC connection
    second = await lv.open_display(ref)
    sink2 = Sink(second)
    await second.start(sink2)
    await sink2.until(lambda: second.image is not None, "the second viewer's frame")
    await second.close()
    assert await asyncio.wait_for(second.wait(), 5) == "detached"

    # the server ends with the domain
    sock = lv._display_socket((await lv.get_instance(ref)).extra["uuid"])
    assert server_alive(sock)
    await serial.close()
    await lv.stop(ref, force=True)
    assert "stopped" in await asyncio.wait_for(session.wait(), 15)
    with pytest.raises(Conflict):
        await lv.open_display(ref)


@live
async def test_a_domain_without_vnc_has_no_screen(lv, vlab, guest):
    ref = define(vlab, lv, guest, PREFIX, formats=())
    virsh(vlab, "start", "--paused", ref.name)  # QEMU runs, the guest never boots
    try:
        inst = await lv.get_instance(ref)
        assert inst.status is InstanceStatus.FROZEN and not inst.extra["vnc"]
        assert Capability.DISPLAY not in lv.instance_capabilities(inst)
        with pytest.raises(Unsupported, match="has no VNC screen"):
            await lv.open_display(ref)
    finally:
        await lv.stop(ref, force=True)


@live
async def test_a_remote_uri_without_ssh_refuses_the_screen_in_words(vlab):
    """TCP or TLS: no descriptor crosses, no SSH reaches the server's VNC listen (over
    SSH: test_libvirt_display_ssh.py)."""
    uri = "qemu+tcp://127.0.0.1:1/system"
    backend = get_backend(Remote(name="lvd-tcp", kind="libvirt", address=uri))
    assert Capability.DISPLAY not in backend.capabilities
    with pytest.raises(Unsupported, match="cannot cross the network.*virt-viewer --connect"):
        await backend.open_display(InstanceRef(backend.remote.name, "any"))
    with pytest.raises(Unsupported, match="through SSH"):
        backend.display_viewer_argv(InstanceRef(backend.remote.name, "any"))
    ssh = get_backend(Remote(name="lvd-ssh", kind="libvirt", address=vlab.ssh_uri()))
    assert Capability.DISPLAY in ssh.capabilities
