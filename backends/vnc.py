"""A small asyncio RFB (VNC) client: what corral needs of QEMU's built-in VNC server.

It speaks RFB 3.8 over a unix socket (QEMU's ``-vnc unix:PATH``, no authentication: the
socket is private to the user), keeps the framebuffer as 32-bit BGRX pixels, and applies
the updates the server sends — Raw and CopyRect rectangles, and the DesktopSize
pseudo-rectangle when the guest changes its resolution. Updates come only when asked for
(``request``) and QEMU answers an incremental request only once something changed, so a
still screen costs nothing on either side. Keys are X keysyms (QEMU maps them to scan
codes with its keyboard layout); the pointer is absolute (a tablet device in the guest).

Facts relied on (RFC 6143, and QEMU's ``ui/vnc.c``): the server sends the version string
first; 3.8 sends a list of security types and a SecurityResult even for "None";
``FramebufferUpdate`` rectangles carry a signed 32-bit encoding; DesktopSize is -223.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from dataclasses import dataclass

RAW, COPYRECT, DESKTOP_SIZE = 0, 1, -223

# X keysyms of the keys corral sends by name.
KEYSYMS = {
    "enter": 0xFF0D, "escape": 0xFF1B, "tab": 0xFF09, "backspace": 0xFF08,
    "delete": 0xFFFF, "insert": 0xFF63, "home": 0xFF50, "end": 0xFF57,
    "pageup": 0xFF55, "pagedown": 0xFF56, "up": 0xFF52, "down": 0xFF54,
    "left": 0xFF51, "right": 0xFF53, "space": 0x20, "print": 0xFF61, "sysrq": 0xFF15,
    "pause": 0xFF13, "menu": 0xFF67,
    **{f"f{n}": 0xFFBE + n - 1 for n in range(1, 13)},
    "shift": 0xFFE1, "ctrl": 0xFFE3, "alt": 0xFFE9, "meta": 0xFFE7, "super": 0xFFEB,
}
MODIFIERS = ("shift", "ctrl", "alt", "meta", "super")


class RFBError(Exception):
    """The VNC server refused us or spoke something else."""


@dataclass
class Rect:
    x: int
    y: int
    w: int
    h: int

    def union(self, other: Rect | None) -> Rect:
        if other is None:
            return self
        x0, y0 = min(self.x, other.x), min(self.y, other.y)
        x1 = max(self.x + self.w, other.x + other.w)
        y1 = max(self.y + self.h, other.y + other.h)
        return Rect(x0, y0, x1 - x0, y1 - y0)


class RFBClient:
    """One connection to a VNC server. :meth:`connect`, then :meth:`request` and
    :meth:`read_update` in turn; :attr:`pixels` holds the screen (BGRX, row-major)."""

    def __init__(self) -> None:
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.width = 0
        self.height = 0
        self.name = ""
        self.pixels = bytearray()
        self._write_lock = asyncio.Lock()

    async def connect(self, path: str | None = None, *, sock: socket.socket | None = None
                      ) -> None:
        """Open the socket (or take ``sock``, already connected: libvirt's
        ``virDomainOpenGraphicsFD``), agree on RFB 3.8 without authentication and 32-bit
        pixels.

        Raises:
            OSError: no socket / nobody listening.
            RFBError: the server is not a VNC server we can use.
        """
        if sock is not None:
            self.reader, self.writer = await asyncio.open_unix_connection(sock=sock)
        else:
            self.reader, self.writer = await asyncio.open_unix_connection(path)
        r, w = self.reader, self.writer
        version = await r.readexactly(12)
        if not version.startswith(b"RFB 003."):
            raise RFBError(f"not a VNC server (it said {version!r})")
        w.write(b"RFB 003.008\n")
        (count,) = await r.readexactly(1)
        if count == 0:
            (n,) = struct.unpack(">I", await r.readexactly(4))
            raise RFBError((await r.readexactly(n)).decode(errors="replace"))
        types = await r.readexactly(count)
        if 1 not in types:
            raise RFBError("the VNC server wants a password (corral uses a private socket)")
        w.write(b"\x01")
        (result,) = struct.unpack(">I", await r.readexactly(4))
        if result != 0:
            raise RFBError("the VNC server refused the connection")
        w.write(b"\x01")  # ClientInit: shared, other viewers stay connected
        head = await r.readexactly(24)
        self.width, self.height = struct.unpack(">HH", head[:4])
        (n,) = struct.unpack(">I", head[20:24])
        self.name = (await r.readexactly(n)).decode(errors="replace")
        self.pixels = bytearray(self.width * self.height * 4)
        # SetPixelFormat: 32 bpp, depth 24, little endian, true colour, 8 bits each,
        # red at bit 16, green 8, blue 0 -> bytes B, G, R, X in memory.
        w.write(struct.pack(">B3xBBBBHHHBBB3x", 0, 32, 24, 0, 1, 255, 255, 255, 16, 8, 0))
        encodings = (COPYRECT, RAW, DESKTOP_SIZE)
        w.write(struct.pack(f">BxH{len(encodings)}i", 2, len(encodings), *encodings))
        await w.drain()

    async def request(self, incremental: bool = True) -> None:
        """Ask for the changes since the last update (or the whole screen)."""
        await self._send(struct.pack(">BBHHHH", 3, int(incremental), 0, 0,
                                     self.width, self.height))

    async def read_update(self) -> Rect | None:
        """Read server messages until one framebuffer update has been applied; returns
        the region it changed (None if it changed nothing, e.g. a bell).

        Raises:
            asyncio.IncompleteReadError: the server closed the connection.
            RFBError: a message we cannot read.
        """
        assert self.reader is not None
        r = self.reader
        while True:
            (kind,) = await r.readexactly(1)
            if kind == 0:
                return await self._update()
            if kind == 1:  # SetColourMapEntries: not used with true colour
                _, _, n = struct.unpack(">BHH", await r.readexactly(5))
                await r.readexactly(n * 6)
            elif kind == 2:  # Bell
                continue
            elif kind == 3:  # ServerCutText
                _, n = struct.unpack(">3sI", await r.readexactly(7))
                await r.readexactly(n)
            else:
                raise RFBError(f"unknown VNC server message {kind}")

    async def _update(self) -> Rect | None:
        assert self.reader is not None
        r = self.reader
        _, count = struct.unpack(">BH", await r.readexactly(3))
        dirty: Rect | None = None
        for _ in range(count):
            x, y, w, h, encoding = struct.unpack(">HHHHi", await r.readexactly(12))
            if encoding == RAW:
                data = await r.readexactly(w * h * 4)
                self._blit(data, x, y, w, h)
            elif encoding == COPYRECT:
                sx, sy = struct.unpack(">HH", await r.readexactly(4))
                self._copy(sx, sy, x, y, w, h)
            elif encoding == DESKTOP_SIZE:
                self.width, self.height = w, h
                self.pixels = bytearray(w * h * 4)
                dirty = Rect(0, 0, w, h)
                continue
            else:
                raise RFBError(f"the VNC server used encoding {encoding}, not asked for")
            dirty = Rect(x, y, w, h).union(dirty)
        return dirty

    def _blit(self, data: bytes, x: int, y: int, w: int, h: int) -> None:
        stride, row = self.width * 4, w * 4
        if x == 0 and w == self.width:
            self.pixels[y * stride:(y + h) * stride] = data
            return
        view = memoryview(data)
        for i in range(h):
            start = (y + i) * stride + x * 4
            self.pixels[start:start + row] = view[i * row:(i + 1) * row]

    def _copy(self, sx: int, sy: int, x: int, y: int, w: int, h: int) -> None:
        stride, row = self.width * 4, w * 4
        rows = [bytes(self.pixels[(sy + i) * stride + sx * 4:(sy + i) * stride + sx * 4 + row])
                for i in range(h)]
        for i, data in enumerate(rows):
            start = (y + i) * stride + x * 4
            self.pixels[start:start + row] = data

    async def key(self, keysym: int, down: bool) -> None:
        await self._send(struct.pack(">BBxxI", 4, int(down), keysym))

    async def pointer(self, x: int, y: int, buttons: int) -> None:
        """Move the pointer to (x, y) with ``buttons`` held (bit 0 left, 1 middle, 2
        right, 3/4 wheel up/down)."""
        x = max(0, min(x, max(0, self.width - 1)))
        y = max(0, min(y, max(0, self.height - 1)))
        await self._send(struct.pack(">BBHH", 5, buttons & 0xFF, x, y))

    async def _send(self, data: bytes) -> None:
        if self.writer is None:
            return
        async with self._write_lock:
            self.writer.write(data)
            await self.writer.drain()

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except OSError:
                pass
            self.writer = None


def keysym_for_char(ch: str) -> int:
    """The keysym of a typed character (Latin-1 keysyms equal the code point; others are
    0x01000000 + the code point)."""
    code = ord(ch)
    if ch == "\n" or ch == "\r":
        return KEYSYMS["enter"]
    if ch == "\t":
        return KEYSYMS["tab"]
    if 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF:
        return code
    return 0x01000000 + code


SHIFTED = set('~!@#$%^&*()_+{}|:"<>?') | {chr(c) for c in range(ord("A"), ord("Z") + 1)}
"""Characters typed with shift on a US keyboard: QEMU turns keysyms into scan codes
without adding the shift itself, so the client holds it."""
