"""A screen that reaches its first frame without work Textual throws away."""

from __future__ import annotations

import asyncio

from textual import events
from textual.geometry import Size

from .._textual_compat import RefreshHookScreen, in_update_batch, require_repaint


class FirstFrameScreen(RefreshHookScreen):
    """Renders nothing inside Textual's start-up batch and lays out no size it has, and
    sets :attr:`first_frame` once its first frame is out. The first relies on Textual
    internals (the start-up batch, the compositor refresh: :mod:`tui._textual_compat`);
    ``tests/tui/test_textual_internals.py`` says when they change."""

    first_frame: asyncio.Event | None = None
    _laid_out_at: Size | None = None

    def on_resize(self, event: events.Resize) -> None:
        """A size this screen is laid out at already changes nothing: Textual hands the
        same size over again at start (the terminal's in-band size report), and each is
        a layout of every widget (~30 ms before the first frame here). Textual calls the
        resize handler of every class in the MRO; ``prevent_default`` stops that walk
        before ``Screen``'s own, which lays the screen out."""
        if event.size == self._laid_out_at:
            event.prevent_default()
            event.stop()
        elif self.stack_updates and self.is_attached:  # Screen's own handler lays it out
            self._laid_out_at = event.size

    def compositor_refresh(self) -> None:
        """Textual's whole start-up is one batch of updates, and a layout made during a
        batch renders the screen anyway (from a callback on the screen's own message
        loop) only for the app to drop the frame: ~30 ms of the way to the first frame
        here. Rendered once the batch is over instead (a full repaint)."""
        if in_update_batch(self.app):
            require_repaint(self)
            return
        super().compositor_refresh()
        first_frame = self.first_frame
        if first_frame is not None and not first_frame.is_set():
            first_frame.set()
