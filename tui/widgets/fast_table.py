"""The data table corral's tables build on: one-line cells rendered without Rich's
general path, and nothing painted while hidden."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

from .. import _textual_compat as internals


class OneLineCell(Text):
    """A cell of one line, cut with an ellipsis: what :class:`FastTable` renders itself."""

    def __init__(self, text: str, style: str | Style = "") -> None:
        super().__init__(text, style=style, no_wrap=True, overflow="ellipsis")


class FastTable(internals.DataTableHooks):
    """A data table whose one-line cells paint quickly, and that does not paint hidden.

    Switching the main table between views hides one table and shows another. The frame
    painted right after the switch still uses the old layout, and the table just hidden
    has lost the focus (a style change that empties its render caches): painting it again
    in full (50-190 ms for a 40-line table on a loaded machine) would delay the new view's
    first frame for nothing, as it is not on screen once laid out again.

    Nor does a focus change empty the render caches: DataTable drops every rendered row on
    any style change, so the table shown by a switch (it takes the focus) painted each of
    its cells again. Its caches are keyed by the focus state already; they are dropped
    here only when the styles of a state seen before are no longer what they were (a
    theme change). Relies on DataTable internals of the pinned Textual
    (:mod:`tui._textual_compat`)."""

    _sized: Size | None = None

    def on_resize(self, event: events.Resize) -> None:
        """DataTable renders every row again after any resize (the cached renders are for
        one width); a table shown again at the size it had keeps them."""
        if event.size == self._sized:
            event.prevent_default()  # DataTable's own handler, after this one, is skipped
        self._sized = event.size

    _styles_seen: dict | None = None
    """Per pseudo-class state: the table's and its components' styles when last seen."""

    def notify_style_update(self) -> None:
        Widget.notify_style_update(self)
        internals.drop_style_caches(self)
        state = self.get_pseudo_class_state()
        try:
            styles = (self.rich_style, tuple(self.get_component_rich_style(
                name, partial=True) for name in sorted(self.COMPONENT_CLASSES)))
        except KeyError:  # the component styles are not there yet (being mounted)
            styles = None
        seen = self._styles_seen
        if styles is None or seen is None or seen.get(state, styles) != styles:
            internals.drop_render_caches(self)
            self._styles_seen = seen = {}
        if styles is not None:
            seen[state] = styles
        self.refresh()

    after_paint: list = []
    """Called (once) when this table next paints while shown: quick, not drawing (it runs
    within the paint; a widget of its own schedules its work with ``call_later``)."""

    def render_lines(self, crop: Region) -> list[Strip]:
        if not self.display:
            return [Strip.blank(crop.width)] * crop.height
        lines = super().render_lines(crop)
        if self.after_paint:
            waiting, self.after_paint = self.after_paint, []
            for callback in waiting:
                callback()
        return lines

    def render_cell(self, row_index: int, column_index: int, base_style: Style, width: int,
                    cursor: bool = False, hover: bool = False) -> list[list[Segment]]:
        """A body cell, rendered straight from its :class:`OneLineCell`.

        DataTable renders every cell through Rich's ``Padding``/``Styled``/``render_lines``
        (about 40 ms of CPU for a screen of rows, most of the first frame). The result here
        is the same segments' text and styles, built directly (``tests/tui/test_table_render.py``
        compares the two); the cache and its key are DataTable's own. Relies on DataTable internals of
        the pinned Textual (:mod:`tui._textual_compat`)."""
        pad = self.cell_padding
        if row_index < max(0, self.fixed_rows) or column_index < max(0, self.fixed_columns) \
                or width < 2 * pad + 1:
            return super().render_cell(row_index, column_index, base_style, width, cursor, hover)
        cache, cache_key, row_key, column_key = internals.cell_render_slot(
            self, row_index, column_index, base_style, cursor, hover)
        if cache_key in cache:
            return cache[cache_key]
        row = self.rows.get(row_key) if row_key is not None else None
        cell = internals.cell_value(self, row_key, column_key) if row_key is not None else None
        if row is None or row.height != 1 or not isinstance(cell, OneLineCell) \
                or "\t" in cell.plain or "\n" in cell.plain:  # tabs/lines: Rich's way
            return super().render_cell(row_index, column_index, base_style, width, cursor, hover)
        component_style, post_style = internals.cell_styles(self, hover, cursor)
        pre = base_style + Style.from_meta({"row": row_index, "column": column_index}) \
            + component_style
        text = cell.copy()
        inner = width - 2 * pad
        text.truncate(inner, overflow=cell.overflow or "ellipsis")
        console = self.app.console
        own = console.get_style(cell.style) if cell.style else None
        spaces = Segment(" " * pad)
        segments = [spaces]
        for segment in text.render(console, end=""):
            if own is not None:  # Rich joins a line's own style in as its first span
                segment = Segment(segment.text, own + segment.style)
            segments.append(segment)
        segments.append(Segment(" " * (inner - text.cell_len + pad)))
        line = []
        for segment in segments:
            style = pre + segment.style
            if post_style:
                style = style + post_style if style else post_style
            line.append(Segment(segment.text, style))
        cache[cache_key] = lines = [line]
        return lines
