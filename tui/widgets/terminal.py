"""TerminalView: a console session (serial console, exec shell, pty) drawn inside a pane.

The widget is the ``ConsoleSink`` of a ``ConsoleSession``: output goes into a
:class:`~tui.terminal.emulator.TerminalEmulator` and is drawn with the Line API from cached
strips; keys, pastes and the emulator's answers to terminal queries go back through
``session.send_bytes``.

Flow control: output is queued and fed to the emulator by one task in slices sized to take
about 10 ms, yielding to the event loop between slices, so a flood never blocks input or
rendering. Repaints are throttled to ~30 Hz and touch only the rows that changed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.content import Content
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget

from backends.base import ConsoleSession
from tui.terminal.emulator import Selection, TerminalEmulator, ansi_palette
from tui.terminal.keys import SPECIAL_KEYS, key_to_bytes
from tui.terminal.record import AsciicastRecorder

__all__ = ["TerminalView"]

log = logging.getLogger(__name__)

_KEY_LABELS = {
    "right_square_bracket": "]",
    "left_square_bracket": "[",
    "backslash": "\\",
    "circumflex_accent": "^",
    "underscore": "_",
}

_BACKGROUND: set[asyncio.Task] = set()  # tasks that outlive the widget (closing the session)


def key_label(key: str) -> str:
    """A short label for a Textual key name: ``ctrl+right_square_bracket`` -> ``ctrl+]``."""
    parts = key.split("+")
    return "+".join(_KEY_LABELS.get(p, p) for p in parts)


class TerminalView(Widget, can_focus=True):
    """A terminal pane driving a console session.

    Keys go to the guest (except the detach key, priority bindings such as ctrl+q, and
    shift+pageup/pagedown, which scroll). The mouse wheel scrolls the scrollback; a drag
    selects text and copies it (OSC 52) on release.
    """

    ALLOW_SELECT = False
    """Selection is the terminal's own (cell-based, copied with OSC 52)."""

    COMPONENT_CLASSES = {"terminalview--selection"}
    """Selected cells."""

    DEFAULT_CSS = """
    TerminalView {
        width: 1fr;
        height: 1fr;
        background: $background;
        color: $foreground;
        border: round $foreground 30%;
        border-title-color: $foreground;
        border-subtitle-color: $warning;
        &:focus {
            border: round $primary;
        }
        &.-closed {
            border: round $error 60%;
        }
        & > .terminalview--selection {
            background: $accent 45%;
        }
    }
    """

    FRAME_INTERVAL = 1 / 30
    """Minimum time between repaints."""
    FEED_BUDGET = 0.006
    """Seconds of emulator work between two yields to the event loop."""
    RESIZE_DEBOUNCE = 0.15
    """Wait this long after the last size change before telling the session."""
    WHEEL_LINES = 3

    class Closed(Message):
        """The session ended (the reason is also written on the screen)."""

        def __init__(self, view: TerminalView, reason: str) -> None:
            super().__init__()
            self.view = view
            self.reason = reason

        @property
        def control(self) -> TerminalView:
            return self.view

    class DetachRequested(Message):
        """The detach key was pressed (nothing was sent to the guest)."""

        def __init__(self, view: TerminalView) -> None:
            super().__init__()
            self.view = view

        @property
        def control(self) -> TerminalView:
            return self.view

    class ReconnectRequested(Message):
        """``r`` was pressed on a closed console: open a new session and :meth:`attach` it."""

        def __init__(self, view: TerminalView) -> None:
            super().__init__()
            self.view = view

        @property
        def control(self) -> TerminalView:
            return self.view

    def __init__(
        self,
        session: ConsoleSession,
        title: str = "console",
        *,
        detach_key: str = "ctrl+right_square_bracket",
        record_path: str | Path | None = None,
        scrollback: int = 5000,
        close_on_unmount: bool = True,
        name: str | None = None,
        id: str | None = None,  # noqa: A002 - Textual's name
        classes: str | None = None,
    ) -> None:
        """
        Args:
            session: the console session to drive; started on mount with this view as sink.
            title: shown in the border, e.g. ``"debian-1 · console"``.
            detach_key: Textual key name that posts :class:`DetachRequested` (default ctrl+]).
            record_path: when set, output is recorded there as asciicast v2.
            scrollback: lines kept after they scroll off the top.
            close_on_unmount: close the session when the view is removed.
        """
        super().__init__(name=name, id=id, classes=classes)
        self.session = session
        self.title = title
        self.detach_key = detach_key
        self.record_path = Path(record_path) if record_path else None
        self.close_on_unmount = close_on_unmount
        self.emulator = TerminalEmulator(80, 24, scrollback=scrollback, respond=self._send)
        self.recorder: AsciicastRecorder | None = None
        self._record_failed = False
        self.is_closed = False
        self.close_reason: str | None = None
        self.scroll_offset_lines = 0
        """How many lines the view is scrolled back (0: following the output)."""
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._pump_task: asyncio.Task | None = None
        self._outbox: asyncio.Queue[bytes] | None = None
        self._writer_task: asyncio.Task | None = None
        self._strips: dict[int, Strip] = {}
        self._refresh_timer: Timer | None = None
        self._resize_timer: Timer | None = None
        self._last_paint = 0.0
        self._scrolled_seen = 0
        self._feed_rate = 2_000_000.0  # bytes/s, adapted while feeding
        self._selection: Selection | None = None
        self._sel_anchor: tuple[int, int] | None = None
        self._session_size: tuple[int, int] | None = None
        self._started = False

    # -- lifecycle -------------------------------------------------------------------------------

    def on_mount(self) -> None:
        self._update_title()
        self._apply_theme()
        self.watch(self.app, "theme", lambda _: self._apply_theme(), init=False)
        self._outbox = asyncio.Queue()
        self._writer_task = asyncio.create_task(self._writer())
        width, height = self._content_size()
        if width and height:
            self.emulator.resize(width, height)
        self._start_session()

    def _ensure_recorder(self) -> None:
        """Open the recording once the size is known (first resize or first output)."""
        if self.record_path is None or self.recorder is not None or self._record_failed:
            return
        try:
            self.recorder = AsciicastRecorder(
                self.record_path, self.emulator.columns, self.emulator.lines, title=self.title)
        except OSError as e:
            self._record_failed = True
            log.warning("cannot record the console to %s: %s", self.record_path, e)

    def _start_session(self) -> None:
        self._started = True
        self.run_worker(self._run_start(self.session), name="console-start",
                        group="terminal", exit_on_error=False)

    async def _run_start(self, session: ConsoleSession) -> None:
        try:
            await session.start(self)
        except Exception as e:  # noqa: BLE001 - shown on screen, never fatal
            log.warning("console start failed: %s", e)
            self.closed(f"cannot open the console: {e}")
            return
        if session is self.session and not self.is_closed and self.size.area:
            self._send_size(force=True)

    def on_unmount(self) -> None:
        for task in (self._pump_task, self._writer_task):
            if task is not None:
                task.cancel()
        if self.recorder is not None:
            self.recorder.close()
        if self.close_on_unmount and not self.is_closed:
            self.is_closed = True
            self._background(self.session.close())

    @staticmethod
    def _background(coro) -> None:
        async def run():
            try:
                await coro
            except Exception as e:  # noqa: BLE001
                log.debug("console close: %s", e)

        task = asyncio.get_running_loop().create_task(run())
        _BACKGROUND.add(task)
        task.add_done_callback(_BACKGROUND.discard)

    # -- ConsoleSink -------------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Output from the guest (called on the event loop by the session)."""
        if not data:
            return
        self._ensure_recorder()
        if self.recorder is not None:
            self.recorder.output(data)
        self._enqueue(bytes(data))

    def closed(self, reason: str) -> None:
        """The session ended: write the reason on the screen and post :class:`Closed`."""
        if self.is_closed and self.close_reason is not None:
            return
        self.is_closed = True
        self.close_reason = reason
        reason_text = " ".join(str(reason).split()) or "closed"
        self._enqueue(
            f"\r\n\x1b[0;7m[console closed: {reason_text} — press r to reconnect]\x1b[0m\r\n"
            .encode())
        if self.recorder is not None:
            self.recorder.close()
        self.set_class(True, "-closed")
        self._update_title()
        self.post_message(self.Closed(self, reason))

    def attach(self, session: ConsoleSession) -> None:
        """Drive a new session (after a reconnect); the screen and scrollback are kept. A
        previous session still open is closed first (it must not feed this view too)."""
        previous = self.session
        if previous is not session and not self.is_closed:
            self._background(previous.close())
        self.session = session
        self.is_closed = False
        self.close_reason = None
        self._session_size = None
        self.set_class(False, "-closed")
        self._update_title()
        self._start_session()

    # -- output pump -------------------------------------------------------------------------------

    def _enqueue(self, data: bytes) -> None:
        self._pending.append(data)
        self._pending_size += len(data)
        if self._pump_task is None:
            self._pump_task = asyncio.get_running_loop().create_task(self._pump())

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
            out.append(pending.pop(0))
            size += len(piece)
        self._pending_size -= size
        return b"".join(out)

    async def _pump(self) -> None:
        emulator = self.emulator
        try:
            while self._pending:
                deadline = time.perf_counter() + self.FEED_BUDGET
                while self._pending:
                    limit = int(min(262_144, max(4096, self._feed_rate * self.FEED_BUDGET)))
                    chunk = self._take(limit)
                    t0 = time.perf_counter()
                    emulator.feed(chunk)
                    t1 = time.perf_counter()
                    if len(chunk) >= 4096 and t1 > t0:
                        self._feed_rate = 0.7 * self._feed_rate + 0.3 * len(chunk) / (t1 - t0)
                    if t1 >= deadline:
                        break
                if not self._pending:
                    emulator.flush()
                self._schedule_paint()
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - the emulator never raises; be safe anyway
            log.exception("terminal output pump failed")
        finally:
            self._pump_task = None
        if self._pending:  # arrived while finishing
            self._pump_task = asyncio.get_running_loop().create_task(self._pump())

    # -- painting ----------------------------------------------------------------------------------

    def _schedule_paint(self) -> None:
        if self._refresh_timer is not None or not self.is_mounted:
            return
        delay = max(0.002, self._last_paint + self.FRAME_INTERVAL - time.monotonic())
        self._refresh_timer = self.set_timer(delay, self._paint, name="terminal-paint")

    def _paint(self) -> None:
        self._refresh_timer = None
        self._last_paint = time.monotonic()
        emulator = self.emulator
        dirty = emulator.take_dirty()
        emulator.take_history_changed()
        scrolled = emulator.lines_scrolled - self._scrolled_seen
        self._scrolled_seen = emulator.lines_scrolled
        width = self.size.width
        if self.scroll_offset_lines:
            # Stay on the same text while output scrolls underneath.
            if scrolled:
                self.scroll_offset_lines = min(self.scroll_offset_lines + scrolled,
                                               emulator.history_size)
                self._update_subtitle()
                self._strips.clear()
                self.refresh()
            return
        if not dirty:
            return
        if len(dirty) * 2 >= emulator.lines:
            self._strips.clear()
            self.refresh()
            return
        for y in dirty:
            self._strips.pop(y, None)
        self.refresh(*(Region(0, y, width, 1) for y in dirty))

    def _invalidate(self) -> None:
        self._strips.clear()
        self.refresh()

    def render_line(self, y: int) -> Strip:
        strip = self._strips.get(y)
        if strip is not None:
            return strip
        width = self.size.width
        emulator = self.emulator
        segments = emulator.render_view_line(y, self.scroll_offset_lines, cursor=self.has_focus)
        if self._selection is not None:
            segments = self._select(segments, y)
        base = self.rich_style
        strip = Strip(segments).adjust_cell_length(width).apply_style(base)
        self._strips[y] = strip
        return strip

    def _select(self, segments: list[Segment], y: int) -> list[Segment]:
        sel = self._selection
        assert sel is not None
        absolute = self.emulator.view_to_absolute(y, self.scroll_offset_lines)
        if not sel.start_line <= absolute <= sel.end_line:
            return segments
        x0 = sel.start_x if absolute == sel.start_line else 0
        x1 = sel.end_x if absolute == sel.end_line else self.size.width
        if x1 <= x0:
            return segments
        width = max(self.size.width, x1)
        line = list(Segment.adjust_line_length(segments, width))
        before, middle, after = Segment.divide(line, [x0, x1, width])
        highlight = self.get_component_rich_style("terminalview--selection", partial=True)
        middle = [Segment(t, (s or Style()) + highlight) for t, s, _ in middle]
        return [*before, *middle, *after]

    def _apply_theme(self) -> None:
        try:
            dark = self.app.current_theme.dark
        except Exception:  # noqa: BLE001 - no theme yet
            dark = True
        self.emulator.set_palette(ansi_palette(dark))
        self._invalidate()

    def _update_title(self) -> None:
        title = f"{self.title}   {key_label(self.detach_key)} detach"
        if self.is_closed:
            title = f"{self.title}   closed"
        self.border_title = Content(title)
        self._update_subtitle()

    def _update_subtitle(self) -> None:
        n = self.scroll_offset_lines
        self.border_subtitle = Content(f"scrolled {n} lines") if n else None

    def on_focus(self) -> None:
        self._invalidate()

    def on_blur(self) -> None:
        self._invalidate()

    # -- size --------------------------------------------------------------------------------------

    def _content_size(self) -> tuple[int, int]:
        return self.size.width, self.size.height

    def on_resize(self, event: events.Resize) -> None:
        width, height = self._content_size()
        if width <= 0 or height <= 0:
            return
        if (width, height) != (self.emulator.columns, self.emulator.lines):
            self.emulator.resize(width, height)
            if self.recorder is not None:
                self.recorder.resize(width, height)
        self._ensure_recorder()
        self.scroll_offset_lines = min(self.scroll_offset_lines, self.emulator.history_size)
        self._invalidate()
        if self._resize_timer is not None:
            self._resize_timer.stop()
        self._resize_timer = self.set_timer(self.RESIZE_DEBOUNCE, self._send_size,
                                            name="terminal-resize")

    def _send_size(self, force: bool = False) -> None:
        self._resize_timer = None
        if self.is_closed or not self._started:
            return
        size = (self.emulator.columns, self.emulator.lines)
        if size == self._session_size and not force:
            return
        self._session_size = size
        session = self.session

        async def resize() -> None:
            try:
                await session.resize(*size)
            except Exception as e:  # noqa: BLE001 - best effort (PROTOCOLS.md §1.4)
                log.debug("console resize failed: %s", e)

        self.run_worker(resize(), name="console-resize", group="terminal-resize",
                        exclusive=True, exit_on_error=False)

    # -- input -------------------------------------------------------------------------------------

    def _send(self, data: bytes) -> None:
        """Queue bytes for the guest (keys, pastes and query answers, in order)."""
        if self.is_closed or not data or self._outbox is None:
            return
        self._outbox.put_nowait(data)

    async def _writer(self) -> None:
        assert self._outbox is not None
        outbox = self._outbox
        while True:
            data = await outbox.get()
            while not outbox.empty():
                data += outbox.get_nowait()
            if self.is_closed:
                continue
            try:
                await self.session.send_bytes(data)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - the session reports closure itself
                log.debug("console send failed: %s", e)

    async def on_key(self, event: events.Key) -> None:
        key = event.key
        if key == self.detach_key:
            # Not consumed: bindings above may use it too.
            self.post_message(self.DetachRequested(self))
            return
        if key in ("shift+pageup", "shift+pagedown"):
            event.stop()
            event.prevent_default()
            page = max(1, self.emulator.lines - 1)
            self.scroll_history(page if key == "shift+pageup" else -page)
            return
        if self.is_closed:
            if key == "r":
                event.stop()
                self.post_message(self.ReconnectRequested(self))
            return
        data = key_to_bytes(key, event.character, app_cursor=self.emulator.app_cursor_keys)
        if data is None:
            return
        event.stop()
        event.prevent_default()
        self._typed()
        self._send(data)

    def _typed(self) -> None:
        changed = False
        if self.scroll_offset_lines:
            self.scroll_offset_lines = 0
            self._update_subtitle()
            changed = True
        if self._selection is not None:
            self._selection = None
            changed = True
        if changed:
            self._invalidate()

    def on_paste(self, event: events.Paste) -> None:
        event.stop()
        event.prevent_default()
        if self.is_closed or not event.text:
            return
        self._typed()
        self._send(self.paste_bytes(event.text))

    def paste_bytes(self, text: str) -> bytes:
        """What a paste sends: newlines as CR, bracketed when the guest enabled ``?2004``."""
        text = text.replace("\r\n", "\r").replace("\n", "\r")
        if self.emulator.bracketed_paste:
            text = text.replace("\x1b[201~", "")
            return b"\x1b[200~" + text.encode() + b"\x1b[201~"
        return text.encode()

    def send_special(self, name: str) -> None:
        """Send one of :data:`tui.terminal.keys.SPECIAL_KEYS` (``esc``, ``tab``, ``ctrl+c``,
        ``ctrl+d``, ``ctrl+z``, ``ctrl+\\``, ``ctrl+]``, ``f1``..``f12``).

        Raises:
            KeyError: not a byte sequence (ctrl+alt+del and SysRq need the backend).
        """
        data = SPECIAL_KEYS[name.lower()]
        self._typed()
        self._send(data)

    def send_text(self, text: str) -> None:
        """Type text into the console as is."""
        self._typed()
        self._send(text.encode())

    # -- scrollback --------------------------------------------------------------------------------

    def scroll_history(self, lines: int) -> None:
        """Scroll back (positive) or forward (negative) through the scrollback."""
        new = max(0, min(self.scroll_offset_lines + lines, self.emulator.history_size))
        if new != self.scroll_offset_lines:
            self.scroll_offset_lines = new
            self._scrolled_seen = self.emulator.lines_scrolled
            self._update_subtitle()
            self._invalidate()

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        event.stop()
        self.scroll_history(self.WHEEL_LINES)

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        event.stop()
        self.scroll_history(-self.WHEEL_LINES)

    # -- selection ---------------------------------------------------------------------------------

    def _cell_at(self, event: events.MouseEvent) -> tuple[int, int]:
        offset = event.get_content_offset_capture(self)
        x = max(0, min(offset.x, self.emulator.columns - 1))
        y = max(0, min(offset.y, self.emulator.lines - 1))
        return self.emulator.view_to_absolute(y, self.scroll_offset_lines), x

    def on_mouse_down(self, event: events.MouseDown) -> None:
        if event.button != 1 or event.get_content_offset(self) is None:
            return
        self.focus()
        self._sel_anchor = self._cell_at(event)
        if self._selection is not None:
            self._selection = None
            self._invalidate()
        self.capture_mouse()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        if self._sel_anchor is None:
            return
        self._set_selection(self._sel_anchor, self._cell_at(event))

    def on_mouse_up(self, event: events.MouseUp) -> None:
        if self._sel_anchor is None:
            return
        anchor, self._sel_anchor = self._sel_anchor, None
        self.capture_mouse(False)
        end = self._cell_at(event)
        if end != anchor:
            self._set_selection(anchor, end)
        if self._selection is not None:
            text = self.emulator.selection_text(self._selection)
            if text:
                self.app.copy_to_clipboard(text)

    def _set_selection(self, a: tuple[int, int], b: tuple[int, int]) -> None:
        start, end = sorted((a, b))
        sel = Selection(start[0], start[1], end[0], end[1] + 1)
        if sel != self._selection:
            self._selection = sel
            self._invalidate()

    @property
    def selection(self) -> Selection | None:
        return self._selection
