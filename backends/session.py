"""Console sessions: one shape for every console source (see ``base.ConsoleSession``).

:class:`PtySession` runs a program on a new pseudo-terminal (``lxc-console``,
``lxc-attach``, later ``qemu -display curses``): output goes to a sink and into a ring
buffer (the history shown on attach), input and window size go to the program. The
program gets the pty as its controlling terminal, so a resize reaches it as SIGWINCH.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import struct
import termios
from collections import deque
from typing import Callable, Mapping, Sequence

from .base import ConsoleSink
from .errors import OperationFailed


def _set_size(fd: int, width: int, height: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))


def _make_controlling_tty() -> None:  # runs in the child, after setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class RingBuffer:
    """The last ``limit`` bytes of output."""

    def __init__(self, limit: int = 256 * 1024) -> None:
        self.limit = limit
        self._chunks: deque[bytes] = deque()
        self._size = 0

    def append(self, data: bytes) -> None:
        self._chunks.append(data)
        self._size += len(data)
        while self._size - len(self._chunks[0]) >= self.limit:
            self._size -= len(self._chunks.popleft())

    def getvalue(self) -> bytes:
        data = b"".join(self._chunks)
        return data[-self.limit:]


class PtySession:
    """A program on a pty, as a console session."""

    special_keys: tuple[str, ...] = ()
    on_event: Callable[[str], None] | None = None  # (it has no events)

    def __init__(self, argv: Sequence[str], *, width: int = 80, height: int = 24,
                 env: Mapping[str, str] | None = None, history: int = 256 * 1024) -> None:
        self.argv = list(argv)
        self.width, self.height = width, height
        self.env = dict(os.environ if env is None else env)
        self.env.setdefault("TERM", "xterm-256color")
        # the window size is the pty's; stale LINES/COLUMNS would override it (busybox)
        self.env.pop("LINES", None)
        self.env.pop("COLUMNS", None)
        self.ring = RingBuffer(history)
        self._master: int | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._sink: ConsoleSink | None = None
        self._closed = asyncio.Event()
        self.exit_reason = ""

    async def start(self, sink: ConsoleSink) -> None:
        master, slave = os.openpty()
        _set_size(slave, self.width, self.height)
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.argv, stdin=slave, stdout=slave, stderr=slave, env=self.env,
                start_new_session=True, preexec_fn=_make_controlling_tty)
        except OSError as e:
            os.close(master)
            raise OperationFailed(f"Cannot run {self.argv[0]}: {e.strerror or e}") from e
        finally:
            os.close(slave)
        os.set_blocking(master, False)
        self._master = master
        self._sink = sink
        asyncio.get_running_loop().add_reader(master, self._readable)
        asyncio.ensure_future(self._reap())

    def _readable(self) -> None:
        assert self._master is not None
        try:
            data = os.read(self._master, 65536)
        except BlockingIOError:
            return
        except OSError:  # EIO: the program closed the terminal
            data = b""
        if not data:
            # the terminal closed; _reap() reports how the program ended
            asyncio.get_running_loop().remove_reader(self._master)
            return
        self.ring.append(data)
        if self._sink is not None:
            self._sink.feed(data)

    async def _reap(self) -> None:
        assert self._proc is not None
        rc = await self._proc.wait()
        await asyncio.sleep(0.05)  # let the last output drain
        if self._master is not None:
            self._readable_until_empty()
        self._finish(f"{os.path.basename(self.argv[0])} exited ({rc})")

    def _readable_until_empty(self) -> None:
        for _ in range(64):
            if self._master is None:
                return
            try:
                data = os.read(self._master, 65536)
            except OSError:
                return
            if not data:
                return
            self.ring.append(data)
            if self._sink is not None:
                self._sink.feed(data)

    def _finish(self, reason: str) -> None:
        if self._closed.is_set():
            return
        self.exit_reason = reason
        if self._master is not None:
            asyncio.get_running_loop().remove_reader(self._master)  # no-op if removed
            os.close(self._master)
            self._master = None
        self._closed.set()
        if self._sink is not None:
            self._sink.closed(reason)

    def translate_input(self, data: bytes) -> bytes:
        """Hook for programs with an escape key of their own (see lxc-console)."""
        return data

    async def send_bytes(self, data: bytes) -> None:
        data = self.translate_input(data)
        while data and self._master is not None:
            try:
                written = os.write(self._master, data)
            except BlockingIOError:
                await asyncio.sleep(0.01)
                continue
            except OSError:
                return
            data = data[written:]

    async def resize(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        if self._master is not None:
            _set_size(self._master, width, height)  # the kernel sends SIGWINCH

    async def close(self) -> None:
        proc = self._proc
        if proc is not None and proc.returncode is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                await asyncio.wait_for(proc.wait(), 3)
            except asyncio.TimeoutError:
                os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        self._finish("closed")

    async def wait(self) -> str:
        await self._closed.wait()
        return self.exit_reason

    async def history(self) -> bytes:
        return self.ring.getvalue()


class EscapedPtySession(PtySession):
    """A pty program with an in-band escape byte (``lxc-console``'s Ctrl+a): every such byte
    typed is sent twice, which the program passes on as one, so the escape never triggers
    and every key reaches the guest."""

    def __init__(self, argv: Sequence[str], *, escape: bytes = b"\x01", **kwargs) -> None:
        super().__init__(argv, **kwargs)
        self.escape = escape

    def translate_input(self, data: bytes) -> bytes:
        return data.replace(self.escape, self.escape * 2)


class SocketSession:
    """A console on a unix stream socket (QEMU's serial chardev), with its history taken
    from the log file the chardev keeps (output made while nobody was attached)."""

    special_keys: tuple[str, ...] = ()
    on_event: Callable[[str], None] | None = None  # (it has no events)

    def __init__(self, path: str, log: str | None = None, *, history: int = 256 * 1024) -> None:
        self.path = path
        self.log = log
        self.limit = history
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = asyncio.Event()
        self.exit_reason = ""

    async def start(self, sink: ConsoleSink) -> None:
        try:
            self._reader, self._writer = await asyncio.open_unix_connection(self.path)
        except OSError as e:
            raise OperationFailed(f"Cannot attach to {self.path}: {e.strerror or e}") from e

        async def pump() -> None:
            assert self._reader is not None
            reason = "the console closed"
            try:
                while data := await self._reader.read(65536):
                    sink.feed(data)
            except (OSError, asyncio.IncompleteReadError) as e:
                reason = f"the console failed: {e}"
            finally:
                self.exit_reason = self.exit_reason or reason
                self._closed.set()
                sink.closed(self.exit_reason)

        self._task = asyncio.ensure_future(pump())

    async def send_bytes(self, data: bytes) -> None:
        if self._writer is not None and not self._writer.is_closing():
            self._writer.write(data)
            await self._writer.drain()

    async def resize(self, width: int, height: int) -> None:
        """A serial line has no window size; the guest needs ``stty rows R cols C``."""

    async def close(self) -> None:
        self.exit_reason = self.exit_reason or "detached"
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except OSError:
                pass
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=2)

    async def wait(self) -> str:
        await self._closed.wait()
        return self.exit_reason

    async def history(self) -> bytes:
        if not self.log:
            return b""
        from .console.serial_log import read_tail

        return await asyncio.to_thread(read_tail, self.log, self.limit)
