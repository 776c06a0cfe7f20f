"""An in-memory ConsoleSession: echoes what is typed, like a tty in cooked mode with echo."""

from __future__ import annotations

import asyncio


class EchoSession:
    """Echoes input back (CR -> CRLF); records every call."""

    special_keys: tuple[str, ...] = ()

    def __init__(self, *, echo: bool = True, greeting: bytes = b"") -> None:
        self.echo = echo
        self.greeting = greeting
        self.sink = None
        self.sent: list[bytes] = []
        self.resizes: list[tuple[int, int]] = []
        self.closed_calls = 0
        self.started = asyncio.Event()

    async def start(self, sink) -> None:
        self.sink = sink
        if self.greeting:
            sink.feed(self.greeting)
        self.started.set()

    async def send_bytes(self, data: bytes) -> None:
        self.sent.append(data)
        if self.echo and self.sink is not None:
            self.sink.feed(data.replace(b"\r", b"\r\n"))

    async def resize(self, width: int, height: int) -> None:
        self.resizes.append((width, height))

    async def close(self) -> None:
        self.closed_calls += 1

    async def history(self) -> bytes:
        return b""

    @property
    def sent_bytes(self) -> bytes:
        return b"".join(self.sent)
