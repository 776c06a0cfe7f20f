"""GraphicView: a VM's graphical screen inside a console tab, and the keyboard and mouse
driving it.

The widget is the ``ScreenSink`` of a ``ScreenSession``: the session keeps the screen as
an image and says which region changed; the view repaints at most ``fps`` times a second,
only the cell rows that region covers. It draws with half-blocks (its own Line API
rendering, :class:`~tui.graphics.HalfBlocks`) or, where the terminal can, hands the image
to textual-image (Kitty graphics protocol, Sixel). Keys become X keysyms
(:func:`~tui.graphics.key_events`); a click, drag or wheel in the picture becomes an
absolute pointer event at the guest pixel under the mouse (:class:`~tui.graphics.Fit`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.segment import Segment
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.geometry import Region
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget

from backends.errors import BackendError
from backends.screen import ScreenSession
from tui.format import printable
from tui.graphics import Fit, HalfBlocks, cell_pixels, key_events
from tui.terminal.keys import key_label

from . import view_messages
from .terminal_io import close_in_background

if TYPE_CHECKING:
    from PIL import Image
    from textual_image.widget import SixelImage, TGPImage

__all__ = ["GraphicView"]

log = logging.getLogger(__name__)

WHEEL_UP, WHEEL_DOWN = 1 << 3, 1 << 4
_BUTTON_BITS = {1: 1, 2: 2, 3: 4}


class GraphicView(view_messages.ConsoleView, Widget, can_focus=True):
    """A VM's screen in a pane. Every key goes to the guest except the detach key and
    priority bindings; the mouse is the guest's pointer."""

    ALLOW_SELECT = False

    BINDINGS = [Binding("q", "leave_hint", show=False),
                Binding("question_mark", "leave_hint", show=False)]
    """q and ? go to the guest: the footer does not offer them as corral's quit and help."""

    DEFAULT_CSS = """
    GraphicView {
        width: 1fr;
        height: 1fr;
        background: $background;
        border: round $foreground 30%;
        border-title-color: $foreground;
        border-subtitle-color: $warning;
        &:focus { border: round $primary; }
        &.-closed { border: round $error 60%; }
    }
    """

    class Closed(view_messages.Closed):
        """The session ended."""

    class DetachRequested(view_messages.DetachRequested):
        """The detach key was pressed (nothing was sent to the guest)."""

    class ReconnectRequested(view_messages.ReconnectRequested):
        """``r`` was pressed on a closed screen."""

    def __init__(self, session: ScreenSession, title: str = "screen", *,
                 detach_key: str = "ctrl+right_square_bracket", mode: str = "halfblock",
                 fps: float = 10.0, close_on_unmount: bool = True,
                 name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        """
        Args:
            session: the screen to show; started on mount with this view as its sink.
            title: shown in the border.
            detach_key: Textual key name that posts :class:`DetachRequested`.
            mode: "halfblock", "kitty" or "sixel" (see :func:`tui.graphics.choose_mode`).
            fps: the most repaints a second (and the rate asked of the server).
        """
        super().__init__(name=name, id=id, classes=classes)
        self.session = session
        self.title = title
        self.detach_key = detach_key
        self.bind_leave_key(detach_key)  # ConsoleView
        self.mode = mode
        self.fps = max(1.0, min(60.0, fps))
        self.close_on_unmount = close_on_unmount
        self.is_closed = False
        self.close_reason: str | None = None
        self.blocks = HalfBlocks()
        self.fit: Fit | None = None
        self.paints = 0
        """Repaints so far (benchmarks and tests read it)."""
        self.last_paint = 0.0
        self._dirty: tuple[int, int, int, int] | None = None
        self._strips: dict[int, Strip] = {}
        self._timer: Timer | None = None
        self._buttons = 0
        self._image_widget: TGPImage | SixelImage | None = None
        self._outbox: asyncio.Queue = asyncio.Queue()
        """Input for the guest, sent in order by one worker."""

    def compose(self) -> ComposeResult:
        if self.mode in ("kitty", "sixel"):
            try:
                from textual_image.widget import SixelImage, TGPImage
            except Exception as e:  # half-blocks always work
                log.warning("textual-image unavailable (%s): drawing with half-blocks", e)
                self.mode = "halfblock"
                return
            self._image_widget = (TGPImage if self.mode == "kitty" else SixelImage)()
            self._image_widget.can_focus = False
            yield self._image_widget

    # -- lifecycle ---------------------------------------------------------------------

    def on_mount(self) -> None:
        self._update_title()
        self.run_worker(self._send_input(), name="screen-input", group="screen-input",
                        exit_on_error=False)
        self._start()

    async def _send_input(self) -> None:
        while True:
            coro = await self._outbox.get()
            try:
                await coro
            except Exception as e:  # a lost key is not worth a crash
                log.debug("screen input failed: %s", e)

    def _start(self) -> None:
        self.run_worker(self._run_start(self.session), name="screen-start", group="screen",
                        exit_on_error=False)

    async def _run_start(self, session: ScreenSession) -> None:
        try:
            await session.start(self)
        except Exception as e:  # shown on screen, never fatal
            self.closed(f"cannot open the screen: {e}")

    def on_unmount(self) -> None:
        if self.close_on_unmount and not self.is_closed:
            self.is_closed = True
            close_in_background(self.session.close())

    def attach(self, session: ScreenSession) -> None:
        """Show a new session (after a reconnect)."""
        previous = self.session
        if previous is not session and not self.is_closed:
            close_in_background(previous.close())
        self.session = session
        self.is_closed = False
        self.close_reason = None
        self.set_class(False, "-closed")
        self._update_title()
        self._start()

    # -- ScreenSink --------------------------------------------------------------------

    def frame(self, x: int, y: int, w: int, h: int) -> None:
        """A region of ``session.image`` changed (called by the session)."""
        if self._dirty is None:
            self._dirty = (x, y, x + w, y + h)
        else:
            a = self._dirty
            self._dirty = (min(a[0], x), min(a[1], y), max(a[2], x + w), max(a[3], y + h))
        if self._timer is None and self.is_mounted:
            delay = max(0.005, self.last_paint + 1 / self.fps - time.monotonic())
            self._timer = self.set_timer(delay, self.paint, name="screen-paint")

    def closed(self, reason: str) -> None:
        if self.is_closed and self.close_reason is not None:
            return
        self.is_closed = True
        self.close_reason = reason
        self.set_class(True, "-closed")
        self._update_title()
        self.post_message(self.Closed(self, reason))

    # -- painting ----------------------------------------------------------------------

    def _fit_for(self, width: int, height: int) -> Fit:
        columns, rows = self.size.width, self.size.height
        if self.mode == "halfblock":
            return Fit(width, height, columns, rows)
        cw, ch = cell_pixels()
        return Fit(width, height, columns, rows, cw, ch)

    def _session_image(self) -> Image.Image | None:
        """The session's image: a Pillow image or None (``ScreenSession`` has it as an
        ``object``, for backends/screen.py not to import Pillow)."""
        image = self.session.image
        if image is None:
            return None
        from PIL import Image  # loaded already: the session made its image with it

        assert isinstance(image, Image.Image), f"a screen's image is a {type(image)}"
        return image

    def paint(self) -> None:
        """Bring the pane up to date with the session's image (the timer calls it)."""
        self._timer = None
        self.last_paint = time.monotonic()
        image = self._session_image()
        dirty, self._dirty = self._dirty, None
        if image is None or not self.size.area:
            return
        fit = self._fit_for(*image.size)
        if fit != self.fit:
            dirty = None  # the whole pane is drawn again
        self.fit = fit
        self.paints += 1
        if self._image_widget is not None:
            self._show_image(image, fit)
            return
        self.blocks.scale(image, fit)
        if dirty is None:
            self._strips.clear()
            self.refresh()
            return
        rows = fit.rows_of(dirty[1], dirty[3] - dirty[1])
        for y in rows:
            self._strips.pop(y, None)
        self.refresh(*(Region(0, y, self.size.width, 1) for y in rows))

    def _show_image(self, image: Image.Image, fit: Fit) -> None:
        widget = self._image_widget
        assert widget is not None
        cw, ch = fit.cells
        ox, oy = fit.offset
        widget.styles.width = cw
        widget.styles.height = ch
        widget.styles.offset = (ox, oy)
        from PIL import Image  # not needed to start corral

        # scaled here to the pixels it will cover: less for textual-image to encode
        widget.image = image.resize(fit.size, Image.Resampling.BOX)

    def render_line(self, y: int) -> Strip:
        strip = self._strips.get(y)
        if strip is not None:
            return strip
        width = self.size.width
        blank = self.rich_style
        if self.fit is None or self._image_widget is not None:
            segments = [Segment(" " * width, blank)]
        else:
            segments = self.blocks.row(y, blank)
        strip = Strip(segments).adjust_cell_length(width, blank)
        self._strips[y] = strip
        return strip

    def on_resize(self, event: events.Resize) -> None:
        self.fit = None
        self._strips.clear()
        image = self._session_image()
        if image is not None:
            self.frame(0, 0, *image.size)

    def _update_title(self) -> None:
        title = f"{self.title}   {key_label(self.detach_key)} detach"
        if self.is_closed:
            title = f"{self.title}   closed: {self.close_reason or ''} (r reconnects)"
        self.border_title = Content(printable(title))

    # -- keyboard ----------------------------------------------------------------------

    def _send(self, coro) -> None:
        if self.is_closed or self._outbox.qsize() > 1000:
            coro.close()
            return
        self._outbox.put_nowait(coro)

    async def on_key(self, event: events.Key) -> None:
        key = event.key
        if key == self.detach_key:
            self.post_message(self.DetachRequested(self))
            return
        if self.is_closed:
            if key == "r":
                event.stop()
                self.post_message(self.ReconnectRequested(self))
            return
        keys = key_events(key, event.character)
        if not keys:
            return
        event.stop()
        event.prevent_default()
        self._send(self.session.keys(keys))

    def on_paste(self, event: events.Paste) -> None:
        event.stop()
        keys = [k for ch in event.text.replace("\r\n", "\n") for k in key_events(ch, ch)]
        if keys:
            self._send(self.session.keys(keys))

    def send_special(self, name: str) -> None:
        """A key of the generic special-keys menu ("esc", "ctrl+c", "f5"...)."""
        keys = key_events({"esc": "escape"}.get(name, name), None)
        if not keys:
            raise KeyError(name)
        self._send(self.session.keys(keys))

    # -- mouse -------------------------------------------------------------------------

    def _guest_at(self, event: events.MouseEvent) -> tuple[int, int] | None:
        if self.fit is None:
            return None
        offset = event.get_content_offset_capture(self)
        return self.fit.to_guest(offset.x, offset.y, clamp=bool(self._buttons))

    def on_mouse_down(self, event: events.MouseDown) -> None:
        self.focus()
        at = self._guest_at(event)
        if at is None:
            return
        event.stop()
        self._buttons |= _BUTTON_BITS.get(event.button, 0)
        self.capture_mouse()
        self._send(self.session.pointer(*at, self._buttons))

    def on_mouse_up(self, event: events.MouseUp) -> None:
        at = self._guest_at(event)  # clamped while a button is held: always released
        self._buttons &= ~_BUTTON_BITS.get(event.button, 0)
        if not self._buttons:
            self.capture_mouse(False)
        if at is not None:
            event.stop()
            self._send(self.session.pointer(*at, self._buttons))

    def on_mouse_move(self, event: events.MouseMove) -> None:
        at = self._guest_at(event)
        if at is not None:
            self._send(self.session.pointer(*at, self._buttons))

    def _wheel(self, event: events.MouseEvent, bit: int) -> None:
        event.stop()
        at = self._guest_at(event)
        if at is None:
            return

        async def click() -> None:
            await self.session.pointer(*at, self._buttons | bit)
            await self.session.pointer(*at, self._buttons)

        self._send(click())

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._wheel(event, WHEEL_UP)

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._wheel(event, WHEEL_DOWN)

    # -- screenshot --------------------------------------------------------------------

    def screenshot(self, directory: str | Path, stem: str) -> Path:
        """Save the screen as ``<directory>/<stem>-<time>.png``.

        Raises:
            BackendError: nothing to save, or the file cannot be written.
        """
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = Path(directory).expanduser() / f"{stem}-{stamp}.png"
        result = self.session.screenshot(str(path))
        if not isinstance(result, Path):
            raise BackendError("The screenshot was not written.")
        return result
