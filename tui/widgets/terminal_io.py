"""What the console pane does besides being a widget: the two queues between a session and
the pane, and the highlighting of a selection.

:class:`OutputPump` feeds the guest's output to the emulator in slices sized to take a few
milliseconds, yielding to the event loop between slices, so a flood never blocks input or
rendering. :class:`InputWriter` sends keys, pastes and query answers to the session in
order, joining what queued up while a send was under way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Awaitable, Callable

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

if TYPE_CHECKING:  # loaded with the first console, not at start-up
    from tui.terminal.emulator import Selection, TerminalEmulator

log = logging.getLogger(__name__)

_BACKGROUND: set[asyncio.Task] = set()
"""Closing sessions, which outlive their pane."""


def close_in_background(closing: Awaitable[None]) -> None:
    """Let a session close after its pane is gone; a failure is only logged."""

    async def run() -> None:
        try:
            await closing
        except Exception as e:  # nobody is left to tell
            log.debug("console close: %s", e)

    task = asyncio.get_running_loop().create_task(run())
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)


class OutputPump:
    """Bytes waiting for the emulator, and the one task that feeds them."""

    BUDGET = 0.006
    """Seconds of emulator work between two yields to the event loop."""
    MIN_SLICE, MAX_SLICE = 4096, 262_144
    MAX_PENDING = 2 << 20
    """Bytes that may wait for the emulator. A guest that writes faster than the emulator
    reads (``yes`` on a container console) loses its oldest waiting output, down to half
    of this, and the pane says so where the gap is: memory stays bounded."""

    def __init__(self, emulator: TerminalEmulator, fed: Callable[[], None]) -> None:
        """``fed`` is called after every slice (the pane schedules a repaint)."""
        self.emulator = emulator
        self._fed = fed
        self._pending: deque[bytes] = deque()
        self._size = 0
        self.skipped = 0
        """Bytes dropped so far (shown in the pane as gaps)."""
        self._task: asyncio.Task | None = None
        self._rate = 2_000_000.0
        """Bytes per second the emulator managed lately (sizes the slices)."""

    def __len__(self) -> int:
        return self._size

    def put(self, data: bytes) -> None:
        self._pending.append(data)
        self._size += len(data)
        if self._size > self.MAX_PENDING:
            self._drop()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def _drop(self) -> None:
        pending = self._pending
        dropped = 0
        while pending and self._size > self.MAX_PENDING // 2:
            piece = pending.popleft()
            self._size -= len(piece)
            dropped += len(piece)
        self.skipped += dropped
        marker = (f"\x1b[0m\r\n[corral: {dropped} bytes of output skipped: the guest "
                  f"writes faster than this pane can show]\r\n").encode()
        pending.appendleft(marker)
        self._size += len(marker)

    def _take(self, limit: int) -> bytes:
        pending = self._pending
        out: list[bytes] = []
        size = 0
        while pending and size < limit:
            piece = pending[0]
            room = limit - size
            if len(piece) > room:
                out.append(piece[:room])
                pending[0] = piece[room:]
                size += room
                break
            out.append(pending.popleft())
            size += len(piece)
        self._size -= size
        return b"".join(out)

    async def _run(self) -> None:
        emulator = self.emulator
        try:
            while self._pending:
                deadline = time.perf_counter() + self.BUDGET
                while self._pending:
                    limit = int(min(self.MAX_SLICE, max(self.MIN_SLICE, self._rate * self.BUDGET)))
                    chunk = self._take(limit)
                    t0 = time.perf_counter()
                    emulator.feed(chunk)
                    t1 = time.perf_counter()
                    if len(chunk) >= self.MIN_SLICE and t1 > t0:
                        self._rate = 0.7 * self._rate + 0.3 * len(chunk) / (t1 - t0)
                    if t1 >= deadline:
                        break
                if not self._pending:
                    emulator.flush()
                self._fed()
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            raise
        except Exception:  # the emulator never raises; be safe anyway
            log.exception("terminal output pump failed")
        finally:
            self._task = None
        if self._pending:  # arrived while finishing
            self._task = asyncio.get_running_loop().create_task(self._run())


class InputWriter:
    """Bytes for the guest, sent in order by one task."""

    def __init__(self, send: Callable[[bytes], Awaitable[None]],
                 is_closed: Callable[[], bool]) -> None:
        self._send = send
        self._is_closed = is_closed
        self._queue: asyncio.Queue[bytes] = asyncio.Queue()
        self.ready = asyncio.Event()
        """The session has started: bytes typed before wait for it, in order (a console
        takes the keys from the moment its tab is focused, not from when it connected)."""
        self._task = asyncio.get_running_loop().create_task(self._run())

    def put(self, data: bytes) -> None:
        self._queue.put_nowait(data)

    def cancel(self) -> None:
        self._task.cancel()

    async def _run(self) -> None:
        queue = self._queue
        while True:
            data = await queue.get()
            await self.ready.wait()
            while not queue.empty():
                data += queue.get_nowait()
            if self._is_closed():
                continue
            try:
                await self._send(data)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the session reports closure itself
                log.debug("console send failed: %s", e)


def row_strip(segments: list[Segment], width: int, base: Style) -> Strip:
    """A row of the pane: ``segments`` in the widget's ``base`` style, cut or padded to
    ``width``. The same as ``Strip(segments).adjust_cell_length(width).apply_style(base)``,
    building one strip instead of three when the row fits (it always does but while a
    resize is on its way)."""
    length = Segment.get_line_length(segments)
    if length > width:
        return Strip(segments).adjust_cell_length(width).apply_style(base)
    if length < width:
        segments = [*segments, Segment(" " * (width - length))]
    return Strip(Segment.apply_style(segments, base), width)


def highlight(segments: list[Segment], sel: Selection, line: int, width: int,
              style: Style) -> list[Segment]:
    """``segments`` of the absolute line ``line`` with the selected cells in ``style``."""
    if not sel.start_line <= line <= sel.end_line:
        return segments
    x0 = sel.start_x if line == sel.start_line else 0
    x1 = sel.end_x if line == sel.end_line else width
    if x1 <= x0:
        return segments
    width = max(width, x1)
    cells = list(Segment.adjust_line_length(segments, width))
    before, middle, after = Segment.divide(cells, [x0, x1, width])
    middle = [Segment(t, (s or Style()) + style) for t, s, _ in middle]
    return [*before, *middle, *after]
