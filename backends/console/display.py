"""The graphical screen in the console server: one VNC connection to QEMU, many viewers.

The console server (:mod:`backends.console.server`) started with ``--vnc PATH`` holds one
:class:`~backends.vnc.RFBClient` on QEMU's private VNC socket and keeps the screen. It asks
QEMU for changes at most ``fps`` times a second (the highest rate a viewer asked for);
QEMU answers an incremental request only once something changed, so a still screen costs
no CPU on either side; while no viewer is attached nothing is asked of QEMU at all (the
next viewer gets a fresh whole screen). Each viewer has its own dirty region: the changes since its last
frame, merged while it is busy, so a slow viewer gets fewer, larger updates and never a
growing queue.

The viewer protocol, on the server's websocket:

- server → viewer, binary: ``b"F"`` + ``>HHHHHH`` (screen width, height, x, y, w, h) +
  the rectangle's pixels as RGB, row after row. A rectangle is cut into bands of at most
  :data:`BAND_BYTES`. A viewer that attaches gets the whole screen first.
- viewer → server, JSON text: ``{"command": "key", "args": {"keysym": K, "down": B}}``,
  ``"pointer"`` (``x``, ``y``, ``buttons``: bit 0 left, 1 middle, 2 right, 3/4 wheel),
  ``"keys"`` (``name``: a chord of :data:`SPECIAL_CHORDS`), ``"fps"`` (``fps``) and
  ``"refresh"`` (send the whole screen again).
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from collections.abc import Callable
from typing import Any

from PIL import Image
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from ..vnc import KEYSYMS, Rect, RFBClient

BAND_BYTES = 1 << 20
"""Largest pixel payload of one websocket message."""

HEADER = struct.Struct(">HHHHHH")

SPECIAL_CHORDS: dict[str, list[str]] = {
    "ctrl+alt+del": ["ctrl", "alt", "delete"],
    "ctrl+alt+backspace": ["ctrl", "alt", "backspace"],
    **{f"ctrl+alt+f{n}": ["ctrl", "alt", f"f{n}"] for n in range(1, 13)},
    "sysrq": ["alt", "sysrq"],
    "print": ["print"],
    "super": ["super"],
}
"""Key chords a viewer can ask for by name (pressed in order, released in reverse)."""


def rgb_bands(pixels: bytes | bytearray, width: int, height: int,
              rect: Rect) -> list[bytes]:
    """The wire messages carrying ``rect`` of a BGRX screen (as RGB)."""
    row = rect.w * 3
    rows_per_band = max(1, BAND_BYTES // max(1, row))
    out = []
    stride = width * 4
    view = memoryview(pixels)
    for top in range(rect.y, rect.y + rect.h, rows_per_band):
        h = min(rows_per_band, rect.y + rect.h - top)
        if rect.x == 0 and rect.w == width:
            raw = bytes(view[top * stride:(top + h) * stride])
        else:
            raw = b"".join(bytes(view[(top + i) * stride + rect.x * 4:
                                      (top + i) * stride + (rect.x + rect.w) * 4])
                           for i in range(h))
        rgb = Image.frombuffer("RGB", (rect.w, h), raw, "raw", "BGRX", 0, 1).tobytes()
        out.append(b"F" + HEADER.pack(width, height, rect.x, top, rect.w, h) + rgb)
    return out


class _Viewer:
    def __init__(self, ws: ServerConnection, fps: float) -> None:
        self.ws = ws
        self.fps = fps
        self.dirty: Rect | None = None
        self.wake = asyncio.Event()


class DisplayHub:
    """The VNC connection and the viewers of one VM's screen.

    Args:
        path: QEMU's VNC unix socket (with ``fd``: what it is, for messages).
        fps: the default frame rate (a viewer may ask for another).
        finish: called with the reason when the screen ends (QEMU went away).
    """

    def __init__(self, path: str, fps: float, finish: Callable[[str], None], *,
                 fd: int | None = None) -> None:
        self.path = path
        self.fd = fd
        """An already connected VNC socket (``--vnc-fd``: libvirt's openGraphicsFD)."""
        self.fps = fps
        self.finish = finish
        self.rfb = RFBClient()
        self.viewers: dict[ServerConnection, _Viewer] = {}
        self._watched = asyncio.Event()
        """Set while a viewer is attached: nobody watching, nothing is asked of QEMU."""
        self._task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        try:
            if self.fd is not None:
                sock = socket.socket(fileno=self.fd)
                sock.setblocking(False)
                await asyncio.wait_for(self.rfb.connect(sock=sock), 10)
            else:
                await asyncio.wait_for(self.rfb.connect(self.path), 10)
            await self.rfb.request(incremental=False)
            await asyncio.wait_for(self.rfb.read_update(), 10)
        except Exception as e:
            await self.rfb.close()
            raise RuntimeError(f"cannot reach the VM's screen ({self.path}): {e}") from e
        self._task = asyncio.ensure_future(self._run())

    def rate(self) -> float:
        rates = [v.fps for v in self.viewers.values()]
        return max(rates) if rates else self.fps

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            incremental = True
            while True:
                if not self.viewers:
                    await self._watched.wait()
                    incremental = False  # the screen may have changed meanwhile
                started = loop.time()
                await self.rfb.request(incremental=incremental)
                incremental = True
                rect = await self.rfb.read_update()
                if rect is not None:
                    for viewer in self.viewers.values():
                        viewer.dirty = rect.union(viewer.dirty)
                        viewer.wake.set()
                # at most rate() frames a second; the request above waited for a change
                await asyncio.sleep(max(0.0, started + 1 / self.rate() - loop.time()))
        except asyncio.CancelledError:
            raise
        except Exception:  # the socket closed: QEMU ended
            self.finish("the VM stopped")

    async def _sender(self, viewer: _Viewer) -> None:
        try:
            await self._send_frames(viewer)
        except ConnectionClosed:
            pass  # the viewer left; its reader ends the same way

    async def _send_frames(self, viewer: _Viewer) -> None:
        while True:
            await viewer.wake.wait()
            viewer.wake.clear()
            rect, viewer.dirty = viewer.dirty, None
            if rect is None:
                continue
            rfb = self.rfb
            rect = _clip(rect, rfb.width, rfb.height)
            if rect is None:
                continue
            for message in rgb_bands(rfb.pixels, rfb.width, rfb.height, rect):
                await viewer.ws.send(message)

    async def viewer(self, ws: ServerConnection) -> None:
        viewer = _Viewer(ws, self.fps)
        viewer.dirty = Rect(0, 0, self.rfb.width, self.rfb.height)
        viewer.wake.set()
        self.viewers[ws] = viewer
        self._watched.set()
        sender = asyncio.ensure_future(self._sender(viewer))
        try:
            async for message in ws:
                if isinstance(message, str):
                    await self.control(viewer, message)
        except ConnectionClosed:
            pass
        finally:
            self.viewers.pop(ws, None)
            if not self.viewers:
                self._watched.clear()
            sender.cancel()

    async def control(self, viewer: _Viewer, text: str) -> None:
        try:
            message = json.loads(text)
            command, args = message.get("command"), message.get("args") or {}
            if not isinstance(args, dict):
                return
            if command == "key":
                await self.rfb.key(int(args["keysym"]) & 0xFFFFFFFF, bool(args["down"]))
            elif command == "pointer":
                await self.rfb.pointer(int(args["x"]), int(args["y"]),
                                       int(args.get("buttons", 0)))
            elif command == "keys":
                chord = SPECIAL_CHORDS.get(str(args.get("name", "")))
                for name in chord or ():
                    await self.rfb.key(KEYSYMS[name], True)
                for name in reversed(chord or ()):
                    await self.rfb.key(KEYSYMS[name], False)
            elif command == "fps":
                viewer.fps = max(1.0, min(60.0, float(args["fps"])))
            elif command == "refresh":
                viewer.dirty = Rect(0, 0, self.rfb.width, self.rfb.height)
                viewer.wake.set()
        except (ValueError, KeyError, TypeError, AttributeError):
            return  # a malformed message is ignored, like any unknown command

    async def close(self, code: int, reason: str) -> None:
        if self._task is not None:
            self._task.cancel()
        await asyncio.gather(*(ws.close(code, reason) for ws in list(self.viewers)),
                             return_exceptions=True)
        await self.rfb.close()


def _clip(rect: Rect, width: int, height: int) -> Rect | None:
    x0, y0 = max(0, rect.x), max(0, rect.y)
    x1, y1 = min(width, rect.x + rect.w), min(height, rect.y + rect.h)
    if x1 <= x0 or y1 <= y0:
        return None
    return Rect(x0, y0, x1 - x0, y1 - y0)


def parse_frame(message: bytes) -> tuple[int, int, int, int, int, int, Any] | None:
    """A server frame as (screen width, height, x, y, w, h, RGB bytes), or None."""
    if len(message) < 1 + HEADER.size or message[:1] != b"F":
        return None
    width, height, x, y, w, h = HEADER.unpack_from(message, 1)
    data = memoryview(message)[1 + HEADER.size:]
    if len(data) != w * h * 3 or x + w > width or y + h > height:
        return None
    return width, height, x, y, w, h, data
