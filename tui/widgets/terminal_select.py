"""Selecting text in a :class:`~tui.widgets.terminal.TerminalView` with the mouse: drag to
select (drawn highlighted), release to copy it to the clipboard."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.segment import Segment
from textual import events
from textual.widget import Widget

from .terminal_io import highlight

if TYPE_CHECKING:  # the emulator (and pyte) load with the first console, not at start-up
    from tui.terminal.emulator import Selection, TerminalEmulator


class MouseSelection(Widget):
    """The selection part of the terminal widget, which has an ``emulator``, a
    ``scroll_offset_lines`` and an ``_invalidate`` that repaints."""

    emulator: TerminalEmulator
    scroll_offset_lines: int
    _selection: Selection | None
    _sel_anchor: tuple[int, int] | None

    def _invalidate(self) -> None:
        """Repaint after the selection changed (the terminal widget repaints only the
        rows it must)."""
        self.refresh()

    def _select(self, segments: list[Segment], y: int) -> list[Segment]:
        """Row ``y``'s segments with the selected cells highlighted."""
        assert self._selection is not None
        return highlight(segments, self._selection,
                         self.emulator.view_to_absolute(y, self.scroll_offset_lines),
                         self.size.width,
                         self.get_component_rich_style("terminalview--selection",
                                                       partial=True))

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
        from tui.terminal.emulator import Selection

        sel = Selection(start[0], start[1], end[0], end[1] + 1)
        if sel != self._selection:
            self._selection = sel
            self._invalidate()

    @property
    def selection(self) -> Selection | None:
        return self._selection
