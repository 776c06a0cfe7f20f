"""TerminalView: a console session (serial console, exec shell, pty) drawn inside a pane.

The widget is the ``ConsoleSink`` of a ``ConsoleSession``: output goes into a
:class:`~tui.terminal.emulator.TerminalEmulator` and is drawn with the Line API from cached
strips; keys, pastes and the emulator's answers to terminal queries go back through
``session.send_bytes``.

Flow control: output is queued and fed to the emulator in budgeted slices by an
:class:`~tui.widgets.terminal_io.OutputPump`, so a flood never blocks input or rendering;
input goes out in order through an :class:`~tui.widgets.terminal_io.InputWriter`. Repaints
are throttled to ~30 Hz and touch only the rows that changed.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.style import Style
from textual import events
from textual.content import Content
from textual.geometry import Region
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget

from backends.base import ConsoleSession
from tui.format import printable
from tui.terminal.keys import SPECIAL_KEYS, key_label, key_to_bytes
from tui.terminal.record import AsciicastRecorder
from . import view_messages
from .terminal_io import InputWriter, OutputPump, close_in_background, row_strip
from .terminal_select import MouseSelection

if TYPE_CHECKING:  # the emulator (and pyte) load with the first console, not at start-up
    from tui.terminal.emulator import Selection

__all__ = ["TerminalView"]

log = logging.getLogger(__name__)


class TerminalView(MouseSelection, view_messages.ConsoleView, Widget, can_focus=True):
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
    RESIZE_DEBOUNCE = 0.15
    """Wait this long after the last size change before telling the session."""
    WHEEL_LINES = 3

    class Closed(view_messages.Closed):
        """The session ended (the reason is also written on the screen)."""

    class DetachRequested(view_messages.DetachRequested):
        """The detach key was pressed (nothing was sent to the guest)."""

    class ReconnectRequested(view_messages.ReconnectRequested):
        """``r`` was pressed on a closed console: open a new session and :meth:`attach` it."""

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
        id: str | None = None,  # Textual's name
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
        self.bind_leave_key(detach_key)  # ConsoleView
        self.record_path = Path(record_path) if record_path else None
        self.close_on_unmount = close_on_unmount
        from tui.terminal.emulator import TerminalEmulator

        self.emulator = TerminalEmulator(80, 24, scrollback=scrollback, respond=self._send)
        self.recorder: AsciicastRecorder | None = None
        self._record_failed = False
        self.is_closed = False
        self.close_reason: str | None = None
        self.scroll_offset_lines = 0
        """How many lines the view is scrolled back (0: following the output)."""
        self._output = OutputPump(self.emulator, self._schedule_paint)
        self._input: InputWriter | None = None
        self._strips: dict[int, Strip] = {}
        self._refresh_timer: Timer | None = None
        self._resize_timer: Timer | None = None
        self._last_paint = 0.0
        self._scrolled_seen = 0
        self._selection: Selection | None = None
        self._sel_anchor: tuple[int, int] | None = None
        self._session_size: tuple[int, int] | None = None
        self._started = False
        self._base_style: Style | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def on_mount(self) -> None:
        self._update_title()
        self._apply_theme()
        self.watch(self.app, "theme", lambda _: self._apply_theme(), init=False)
        self._input = InputWriter(lambda data: self.session.send_bytes(data),
                                  lambda: self.is_closed)
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
        if self._input is not None:
            self._input.ready.clear()  # keys typed until it has started wait for it
        self.run_worker(self._run_start(self.session), name="console-start",
                        group="terminal", exit_on_error=False)

    async def _run_start(self, session: ConsoleSession) -> None:
        try:
            await session.start(self)
        except Exception as e:  # shown on screen, never fatal
            log.warning("console start failed: %s", e)
            self.closed(f"cannot open the console: {e}")
            return
        finally:
            if self._input is not None and session is self.session:
                self._input.ready.set()
        if session is self.session and not self.is_closed and self.size.area:
            self._send_size(force=True)

    def on_unmount(self) -> None:
        self._output.cancel()
        if self._input is not None:
            self._input.cancel()
        if self.recorder is not None:
            self.recorder.close()
        if self.close_on_unmount and not self.is_closed:
            self.is_closed = True
            close_in_background(self.session.close())

    # -- ConsoleSink -------------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Output from the guest (called on the event loop by the session)."""
        if not data:
            return
        self._ensure_recorder()
        if self.recorder is not None:
            self.recorder.output(data)
        self._output.put(bytes(data))

    def closed(self, reason: str) -> None:
        """The session ended: write the reason on the screen and post :class:`Closed`."""
        if self.is_closed and self.close_reason is not None:
            return
        self.is_closed = True
        self.close_reason = reason
        reason_text = " ".join(str(reason).split()) or "closed"
        self._output.put(
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
            close_in_background(previous.close())
        self.session = session
        self.is_closed = False
        self.close_reason = None
        self._session_size = None
        self.set_class(False, "-closed")
        self._update_title()
        self._start_session()

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

    def render_lines(self, crop: Region) -> list[Strip]:
        # The widget's own style, looked up once per repaint rather than once per row (it
        # walks the ancestors' styles).
        self._base_style = self.rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._base_style = None

    def render_line(self, y: int) -> Strip:
        strip = self._strips.get(y)
        if strip is not None:
            return strip
        width = self.size.width
        emulator = self.emulator
        segments = emulator.render_view_line(y, self.scroll_offset_lines, cursor=self.has_focus)
        if self._selection is not None:
            segments = self._select(segments, y)
        strip = row_strip(segments, width, self._base_style or self.rich_style)
        self._strips[y] = strip
        return strip

    def _apply_theme(self) -> None:
        try:
            dark = self.app.current_theme.dark
        except Exception:  # no theme yet
            dark = True
        from tui.terminal.emulator import ansi_palette

        self.emulator.set_palette(ansi_palette(dark))
        self._invalidate()

    def _update_title(self) -> None:
        title = f"{self.title}   {key_label(self.detach_key)} detach"
        if self.is_closed:
            title = f"{self.title}   closed"
        self.border_title = Content(printable(title))
        self._update_subtitle()

    def _update_subtitle(self) -> None:
        n = self.scroll_offset_lines
        self.border_subtitle = Content(printable(f"scrolled {n} lines")) if n else None

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
            except Exception as e:  # best effort: an old daemon may not resize
                log.debug("console resize failed: %s", e)

        self.run_worker(resize(), name="console-resize", group="terminal-resize",
                        exclusive=True, exit_on_error=False)

    # -- input -------------------------------------------------------------------------------------

    def _send(self, data: bytes) -> None:
        """Queue bytes for the guest (keys, pastes and query answers, in order)."""
        if self.is_closed or not data or self._input is None:
            return
        self._input.put(data)

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
