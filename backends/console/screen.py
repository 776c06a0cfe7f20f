"""A viewer of a VM's graphical screen held by the console server (:mod:`.display`).

:class:`ScreenSession` keeps its own copy of the screen as a Pillow RGB image, applies the
server's rectangles to it and tells its sink which region changed; keys (X keysyms), the
pointer (absolute screen pixels) and special chords go back as JSON control messages.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from PIL import Image
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidHandshake, WebSocketException

from ..errors import OperationFailed, Unsupported
from ..screen import ScreenSink
from .display import SPECIAL_CHORDS, parse_frame

Opener = Callable[[], Awaitable[ClientConnection]]


class ScreenSession:
    """One attached graphical screen.

    Args:
        title: what it is, for messages ("qemu:vm1 screen").
        open_data: connects the websocket to the console server.
        fps: the frame rate to ask the server for.
    """

    special_keys: tuple[str, ...] = tuple(SPECIAL_CHORDS)

    def __init__(self, title: str, open_data: Opener, *, fps: float = 10.0,
                 vnc_path: str = "") -> None:
        self.title = title
        self.vnc_path = vnc_path
        """QEMU's own VNC socket (an external viewer can connect to it too)."""
        self.fps = fps
        self._open = open_data
        self._ws: ClientConnection | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = asyncio.Event()
        self._detached = False
        self.exit_reason = ""
        self.image: Image.Image | None = None
        """The screen as last received (RGB); None until the first frame."""
        self.frames = 0

    async def start(self, sink: ScreenSink) -> None:
        try:
            self._ws = await self._open()
        except (TimeoutError, OSError, InvalidHandshake, WebSocketException) as e:
            raise OperationFailed(f"Cannot attach to {self.title}: {e}") from e
        await self._control("fps", fps=self.fps)
        self._task = asyncio.ensure_future(self._pump(sink))

    async def _pump(self, sink: ScreenSink) -> None:
        assert self._ws is not None
        reason = ""
        try:
            async for message in self._ws:
                if isinstance(message, bytes):
                    self._apply(message, sink)
        except ConnectionClosed:
            pass
        except Exception as e:  # any failure ends the session, in words
            reason = f"the connection failed: {e}"
        if self._detached:
            reason = "detached"
        elif not reason:
            rcvd = self._ws.protocol.close_rcvd
            reason = (rcvd.reason if rcvd is not None and rcvd.reason else
                      f"the console server of {self.title} stopped without a word")
        self.exit_reason = reason
        self._closed.set()
        sink.closed(reason)

    def _apply(self, message: bytes, sink: ScreenSink) -> None:
        frame = parse_frame(message)
        if frame is None:
            return
        width, height, x, y, w, h, data = frame
        resized = self.image is None or self.image.size != (width, height)
        if resized:
            self.image = Image.new("RGB", (width, height))
        assert self.image is not None
        self.image.paste(Image.frombuffer("RGB", (w, h), data, "raw", "RGB", 0, 1), (x, y))
        self.frames += 1
        sink.frame(0, 0, width, height) if resized else sink.frame(x, y, w, h)

    async def _control(self, command: str, **args: Any) -> None:
        if self._ws is None:
            return
        try:
            await self._ws.send(json.dumps({"command": command, "args": args}))
        except ConnectionClosed:
            pass

    async def key(self, keysym: int, down: bool) -> None:
        """Press or release a key (an X keysym)."""
        await self._control("key", keysym=keysym, down=down)

    async def keys(self, events: list[tuple[int, bool]]) -> None:
        """Several key presses/releases, in order."""
        for keysym, down in events:
            await self.key(keysym, down)

    async def pointer(self, x: int, y: int, buttons: int = 0) -> None:
        """The pointer at screen pixel (x, y) with ``buttons`` held (bit 0 left, 1
        middle, 2 right, 3/4 wheel up/down)."""
        await self._control("pointer", x=x, y=y, buttons=buttons)

    async def send_special(self, name: str) -> None:
        """A chord of :data:`special_keys` ("ctrl+alt+del", "ctrl+alt+f2", ...)."""
        if name not in SPECIAL_CHORDS:
            raise Unsupported(f"{self.title} cannot send {name}.")
        await self._control("keys", name=name)

    async def set_fps(self, fps: float) -> None:
        self.fps = fps
        await self._control("fps", fps=fps)

    async def refresh(self) -> None:
        await self._control("refresh")

    def screenshot(self, path: str | Path) -> Path:
        """Save the screen as PNG at ``path`` (written beside it and renamed).

        Raises:
            OperationFailed: no frame yet, or the file cannot be written.
        """
        if self.image is None:
            raise OperationFailed(f"{self.title} has not shown anything yet.")
        path = Path(path).expanduser()
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.image.save(tmp, format="PNG")
            tmp.replace(path)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise OperationFailed(f"Cannot write the screenshot {path}: "
                                  f"{e.strerror or e}") from e
        return path

    async def close(self) -> None:
        """Detach: the screen (and its console server) goes on."""
        self._detached = True
        if self._ws is not None:
            try:
                await asyncio.wait_for(self._ws.close(), 2)
            except (TimeoutError, OSError, WebSocketException):
                pass
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=3)

    async def wait(self) -> str:
        await self._closed.wait()
        return self.exit_reason
