"""The serial console of a libvirt domain in a pane: ``virDomainOpenConsole`` into a
non-blocking ``virStream``. The stream travels inside the remote's one connection (over
``qemu+ssh://`` too: no extra port, no second SSH session). Output arrives through the
stream's callback on libvirt's event thread and is handed to the asyncio loop; input is
sent from the remote's thread pool."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any, Callable

import libvirt

from ..base import Backend, ConsoleSession, ConsoleSink
from ..errors import BackendError, Conflict, OperationFailed
from ..models import InstanceRef, InstanceStatus
from ..session import RingBuffer
from .connection import Connection

WATCHED = (libvirt.VIR_STREAM_EVENT_READABLE | libvirt.VIR_STREAM_EVENT_ERROR
           | libvirt.VIR_STREAM_EVENT_HANGUP)


class Consoles(Backend):
    lv: Connection

    async def open_console(self, ref: InstanceRef, *, width: int = 80, height: int = 24,
                           kind: str = "console") -> ConsoleSession:
        if kind not in self.console_kinds:
            raise self._unsupported(f"show a {kind} console")
        dom = await self.lv.domain(ref)
        if await self.lv.status(dom) not in (InstanceStatus.RUNNING, InstanceStatus.FROZEN):
            raise Conflict(f"{ref} is not running: its serial console is closed")
        return StreamConsole(self.lv, dom, str(ref))


class StreamConsole:
    """One domain's serial console on a libvirt stream (a ``ConsoleSession``)."""

    special_keys: tuple[str, ...] = ()
    on_event: Callable[[str], None] | None = None  # (it has no events)

    def __init__(self, lv: Connection, dom: libvirt.virDomain, title: str) -> None:
        self.lv = lv
        self.dom = dom
        self.title = title
        self.ring = RingBuffer()
        self.stream: libvirt.virStream | None = None
        self._sink: ConsoleSink | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._context: contextvars.Context | None = None
        self._closed = asyncio.Event()
        self.exit_reason = ""

    async def start(self, sink: ConsoleSink) -> None:
        conn = await self.lv.live()
        self._sink, self._loop = sink, asyncio.get_running_loop()
        # the sink is fed in the context of whoever started the session (libvirt's thread
        # has none: a UI that keeps its state in context variables would lose it)
        self._context = contextvars.copy_context()

        def attach() -> libvirt.virStream:
            stream = conn.newStream(libvirt.VIR_STREAM_NONBLOCK)
            try:
                self.dom.openConsole(None, stream, libvirt.VIR_DOMAIN_CONSOLE_FORCE)
                stream.eventAddCallback(WATCHED, self._ready, None)
            except libvirt.libvirtError:
                stream.abort()
                raise
            return stream

        self.stream = await self.lv.call(attach, what=f"opening the console of {self.title}")

    # libvirt's event thread
    def _ready(self, stream: libvirt.virStream, events: int, _opaque: Any) -> None:
        chunks, ended = [], ""
        if events & libvirt.VIR_STREAM_EVENT_READABLE:
            while True:
                try:
                    data = stream.recv(65536)
                except libvirt.libvirtError as e:
                    ended = f"the console failed: {e.get_error_message()}"
                    break
                if data == -2:  # would block: all read
                    break
                if not data:
                    ended = "the console closed"
                    break
                chunks.append(data)
        if events & (libvirt.VIR_STREAM_EVENT_ERROR | libvirt.VIR_STREAM_EVENT_HANGUP):
            ended = ended or "the console closed"
        loop = self._loop
        if loop is not None and not loop.is_closed() and (chunks or ended):
            loop.call_soon_threadsafe(self._deliver, b"".join(chunks), ended,
                                      context=self._context)

    def _deliver(self, data: bytes, ended: str) -> None:
        if data:
            self.ring.append(data)
            if self._sink is not None:
                self._sink.feed(data)
        if ended:
            self._finish(ended)

    def _finish(self, reason: str) -> None:
        if self._closed.is_set():
            return
        self.exit_reason = reason
        self._closed.set()
        stream, self.stream = self.stream, None
        if stream is not None:
            try:
                self.lv.pool.submit(_drop, stream)
            except RuntimeError:  # the remote is closed: its connection takes the stream
                pass
        if self._sink is not None:
            self._sink.closed(reason)

    async def send_bytes(self, data: bytes) -> None:
        stream = self.stream
        while data and stream is not None and not self._closed.is_set():
            try:
                sent = await self.lv.call(stream.send, data, what="typing on the console")
            except BackendError as e:
                self._finish(f"the console failed: {e.message}")
                raise OperationFailed(f"{self.title}: the console closed ({e.message})") from e
            if sent == -2:  # would block
                await asyncio.sleep(0.01)
                continue
            data = data[sent:]

    async def send_special(self, name: str) -> None:
        raise OperationFailed(f"a serial console has no {name} key")

    async def resize(self, width: int, height: int) -> None:
        """A serial line has no window size; the guest needs ``stty rows R cols C``."""

    async def close(self) -> None:
        self._finish("detached")

    async def wait(self) -> str:
        await self._closed.wait()
        return self.exit_reason

    async def history(self) -> bytes:
        """What this session received (a pty serial console keeps no history of its own)."""
        return self.ring.getvalue()


def _drop(stream: libvirt.virStream) -> None:
    try:
        stream.eventRemoveCallback()
    except libvirt.libvirtError:
        pass
    try:
        stream.abort()
    except libvirt.libvirtError:
        pass
