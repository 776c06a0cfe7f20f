"""The graphical screen of a QEMU VM, against real QEMU (TCG): a UEFI guest whose kernel
switches to a framebuffer (``display_guest()`` of ``tests/qemu_guest.py``), read through
corral's console server from QEMU's VNC socket."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import qemu_guest
from qemu_guest import wait_serial

from backends.console import server_alive
from backends.console.client import server_pid
from backends.errors import Conflict
from backends.models import Capability, InstanceRef
from backends.vnc import KEYSYMS, SHIFTED, keysym_for_char


class Sink:
    def __init__(self, session) -> None:
        self.session = session
        self.frames: list[tuple[int, int, int, int]] = []
        self.reason: str | None = None

    def frame(self, x, y, w, h) -> None:
        self.frames.append((x, y, w, h))

    def closed(self, reason: str) -> None:
        self.reason = reason

    async def until(self, check, what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            await asyncio.sleep(0.05)


def typing(text: str) -> list[tuple[int, bool]]:
    events = []
    for ch in text:
        sym = keysym_for_char(ch)
        if ch in SHIFTED:
            events += [(KEYSYMS["shift"], True), (sym, True), (sym, False),
                       (KEYSYMS["shift"], False)]
        else:
            events += [(sym, True), (sym, False)]
    return events


@pytest.fixture(scope="session")
def display_guest(guest):
    return qemu_guest.display_guest()


async def start_display_vm(qemu, name: str, display_guest) -> InstanceRef:
    kernel, initrd = display_guest
    await qemu.create(name, kernel=str(kernel), initrd=str(initrd), memory_mib=256,
                      cmdline=qemu_guest.DISPLAY_CMDLINE, accel="tcg", firmware="uefi")
    ref = InstanceRef("qemu", name)
    await qemu.start(ref)
    await wait_serial(qemu, name, "corral-guest ready", timeout=120)
    return ref


async def screendump(qemu, ref: InstanceRef, path: Path) -> Image.Image:
    await qemu.monitor.execute(ref, "screendump", filename=str(path), format="png")
    return Image.open(path).convert("RGB")


async def test_screen_pixels_keys_pointer_screenshot(qemu, display_guest, tmp_path):
    """The framebuffer reaches the viewer and matches QEMU's own screendump; pixels the
    guest writes to /dev/fb0 arrive as a dirty rectangle; typed keys (shift included)
    arrive on tty1; a click lands at the absolute coordinates sent (QEMU's input layer,
    traced); the PNG screenshot equals the screendump; a second viewer shares the
    screen, and the server ends with the VM."""
    ref = await start_display_vm(qemu, "gfx1", display_guest)
    caps = qemu.instance_capabilities(await qemu.get_instance(ref))
    assert Capability.DISPLAY in caps and Capability.VGA not in caps  # UEFI

    session = await qemu.open_display(ref, fps=10)
    sink = Sink(session)
    await session.start(sink)
    await sink.until(lambda: session.image is not None, "the first frame")
    assert session.image.size == (1280, 800)

    # the guest paints the top red: the viewer's copy changes, and only that region
    serial = await qemu.open_console(ref)

    class Quiet:
        def feed(self, data): pass
        def closed(self, reason): pass
    await serial.start(Quiet())
    sink.frames.clear()
    await serial.send_bytes(b"cat /red.raw > /dev/fb0\r")
    # the whole band, to its last pixel: a guest under TCG on a busy machine is still
    # writing its lower rows when the first red ones reach the viewer
    await sink.until(lambda: session.image.getpixel((640, 100)) == (255, 0, 0)
                     and session.image.getpixel((1279, 199)) == (255, 0, 0),
                     "red pixels from the guest")
    assert all(y < 210 for _, y, _, _ in sink.frames)  # dirty rectangles, not full frames
    dump = await screendump(qemu, ref, tmp_path / "dump.png")
    shot = Image.open(session.screenshot(tmp_path / "shot.png")).convert("RGB")
    assert shot.size == dump.size and shot.tobytes() == dump.tobytes()

    # keys through the VNC path, shift held for capitals and symbols
    await session.keys(typing("hello World!\n"))
    await wait_serial(qemu, "gfx1", "tty1: hello World!", timeout=30)
    # a special chord is accepted (ctrl+alt+f1 keeps the guest on tty1)
    await session.send_special("ctrl+alt+f1")

    # the pointer: absolute, through the USB tablet corral adds
    log = tmp_path / "trace.log"
    await qemu.monitor.execute(ref, "human-monitor-command", **{"command-line": f"logfile {log}"})
    await qemu.monitor.execute(ref, "human-monitor-command",
                           **{"command-line": "log trace:input_event_*"})
    # the test kernel has no USB drivers, so its PS/2 mouse is the current one; a guest
    # with USB (any distribution) drives the tablet, which this makes current by hand
    tablet = next(m for m in await qemu.monitor.execute(ref, "query-mice") if m["absolute"])
    await qemu.monitor.execute(ref, "human-monitor-command",
                           **{"command-line": f"mouse_set {tablet['index']}"})
    await session.pointer(640, 200, 1)
    await session.pointer(640, 200, 0)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and "input_event_abs" not in (
            log.read_text() if log.exists() else ""):
        await asyncio.sleep(0.1)
    axes = dict(re.findall(r"input_event_abs con \d+, axis (\w+), value (0x[0-9a-f]+|\d+)",
                           log.read_text()))
    # QEMU scales the absolute position to 0..0x7fff of the screen's size
    assert int(axes["x"], 0) == 640 * 0x7FFF // 1280
    assert int(axes["y"], 0) == 200 * 0x7FFF // 800

    # a second viewer gets the whole current screen at once
    second = await qemu.open_display(ref)
    sink2 = Sink(second)
    await second.start(sink2)
    await sink2.until(lambda: second.image is not None
                      and second.image.tobytes() == session.image.tobytes(), "second viewer")
    await second.close()
    assert await asyncio.wait_for(second.wait(), 5) == "detached"

    # an external viewer is pointed at the same socket
    argv = qemu.display_viewer_argv(ref)
    assert argv[-1].endswith("vnc.sock") and argv[0] in ("remote-viewer", "vncviewer")

    # the server outlives a viewer that detaches; the VM's end ends it
    sock = str(qemu.vms.run_dir("gfx1") / "display.ws")
    assert server_alive(sock) and server_pid(sock)
    await serial.close()
    await qemu.stop(ref, force=True)
    reason = await asyncio.wait_for(session.wait(), 15)
    assert "stopped" in reason
    with pytest.raises(Conflict):
        await qemu.open_display(ref)


async def test_a_still_screen_sends_the_viewer_nothing(qemu, display_guest):
    """A screen that does not change costs the console server no work: once the guest's
    boot output has settled, not one update reaches the viewer. (What a still screen costs
    in CPU is a speed target, measured by tests/bench/bench_screen.py, "Idle CPU": a
    wall-clock share of a core flakes on a busy machine.)"""
    ref = await start_display_vm(qemu, "gfx2", display_guest)
    session = await qemu.open_display(ref, fps=10)
    sink = Sink(session)
    await session.start(sink)
    await sink.until(lambda: session.image is not None, "the first frame")
    assert server_pid(str(qemu.vms.run_dir("gfx2") / "display.ws"))
    # settled: a whole second (10 frame periods) without an update; the deadline only
    # stops a guest that never settles
    seen, since = len(sink.frames), time.monotonic()

    def settled() -> bool:
        nonlocal seen, since
        if len(sink.frames) != seen:
            seen, since = len(sink.frames), time.monotonic()
        return time.monotonic() - since >= 1.0

    await sink.until(settled, "the boot output to settle", timeout=60)
    # a busy machine can only delay updates, never make them: nothing may arrive
    await asyncio.sleep(3)
    assert sink.frames[seen:] == [], "a still screen sent updates"
    assert sink.reason is None
    await session.close()
    os.kill(qemu.vms.pid("gfx2"), signal.SIGKILL)


async def test_a_changing_screen_is_rate_limited(qemu, display_guest):
    """A guest repainting as fast as it can: the viewer gets at most ``fps`` updates a
    second (each the union of what changed meanwhile), not every change."""
    ref = await start_display_vm(qemu, "gfx3", display_guest)
    serial = await qemu.open_console(ref)

    class Quiet:
        def feed(self, data): pass
        def closed(self, reason): pass
    await serial.start(Quiet())
    await serial.send_bytes(b"while :; do cat /red.raw > /dev/fb0; "
                            b"dd if=/dev/zero of=/dev/fb0 bs=5120 count=200 2>/dev/null; "
                            b"done &\r")
    session = await qemu.open_display(ref, fps=4)
    sink = Sink(session)
    await session.start(sink)
    await sink.until(lambda: session.image is not None, "the first frame")
    await asyncio.sleep(1)
    start = session.frames
    await asyncio.sleep(5)
    updates = session.frames - start
    assert 5 <= updates <= 4 * 5 + 3, f"{updates} updates in 5 s at 4 fps"
    await session.close()
    await serial.close()
    os.kill(qemu.vms.pid("gfx3"), signal.SIGKILL)


async def test_resolution_changes_follow_the_guest(qemu, display_guest, tmp_path):
    """The guest sets another resolution (800x600 through the std VGA's bochs registers,
    from /dev/mem): QEMU announces it (VNC DesktopSize), the viewer's picture follows and
    ends with QEMU's own pixels."""
    ref = await start_display_vm(qemu, "gfx4", display_guest)
    serial = await qemu.open_console(ref)

    class Quiet:
        def feed(self, data): pass
        def closed(self, reason): pass
    await serial.start(Quiet())
    session = await qemu.open_display(ref, fps=10)
    sink = Sink(session)
    await session.start(sink)
    await sink.until(lambda: session.image is not None, "the first frame")
    assert session.image.size == (1280, 800)
    # BAR2 of the VGA device holds the bochs registers at 0x500 (index * 2): ENABLE (4)
    # off, XRES (1), YRES (2), BPP (3), ENABLE on with the linear framebuffer
    await serial.send_bytes(
        b"B=$(sed -n 3p /sys/bus/pci/devices/0000:00:01.0/resource | cut -d' ' -f1); "
        b"devmem $((B+0x508)) 16 0; devmem $((B+0x502)) 16 800; "
        b"devmem $((B+0x504)) 16 600; devmem $((B+0x506)) 16 32; "
        b"devmem $((B+0x508)) 16 0x41\r")
    await sink.until(lambda: session.image.size == (800, 600), "the new resolution")
    await serial.send_bytes(b"cat /red.raw > /dev/fb0\r")  # efifb still writes: a change
    await asyncio.sleep(3)
    dump = await screendump(qemu, ref, tmp_path / "after.png")
    assert dump.size == (800, 600) and session.image.tobytes() == dump.tobytes()
    await session.close()
    await serial.close()
    os.kill(qemu.vms.pid("gfx4"), signal.SIGKILL)
