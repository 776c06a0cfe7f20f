"""The table of a resource view: any kind of row, a mark column, a remote column, sort by
any column (``o``/``O`` the next/previous one, ``I`` reverses, or a click on the
header), marks that stay until cleared."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from .. import format as fmt
from ..widgets.fast_table import FastTable, OneLineCell
from .rows import Row, Word, matches
from .specs import ViewSpec

MARK = "●"
_NUMBER = re.compile(r"^(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|TiB)?$")
_UNITS = ["B", "KiB", "MiB", "GiB", "TiB"]


class ResourceTable(FastTable):
    """Rows of one view (every remote), filtered and sorted."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("o", "cycle_sort", "Sort", id="resources.sort",
                tooltip="Sort by the next column"),
        Binding("O", "sort_back", "Sort back", id="resources.sort_back",
                tooltip="Sort by the previous column"),
        Binding("I", "reverse_sort", "Reverse", show=False, id="resources.reverse",
                tooltip="Reverse the sort order (also: a click on the sorted column)"),
    ]

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=False)
        self.spec: ViewSpec | None = None
        self.items: dict[str, Row] = {}
        """Every row of the view (all remotes), filtered or not."""
        self.shown: list[str] = []
        self.marked: set[str] = set()
        self.words: list[Word] = []
        self.sort_column = "name"
        self.sort_reverse = False
        self.on_changed: Callable[[], None] | None = None
        self._signature: tuple | None = None

    @property
    def column_keys(self) -> list[str]:
        return ["name", "remote"] + [k for k, _ in (self.spec.columns if self.spec else ())]

    @property
    def labels(self) -> dict[str, str]:
        return {"name": "Name", "remote": "Remote",
                **dict(self.spec.columns if self.spec else ())}

    def show_view(self, spec: ViewSpec) -> None:
        """Switch to ``spec``'s columns (rows arrive with :meth:`set_rows`)."""
        if self.spec is not None and self.spec.name == spec.name:
            return
        self.spec = spec
        self.items = {}
        self.marked.clear()
        self.sort_column, self.sort_reverse = "name", False
        self.clear(columns=True)
        self.add_column(" ", key="mark", width=1)
        for key in self.column_keys:
            self.add_column(self.labels[key], key=key)
        self._signature = None

    def set_rows(self, remote: str | None, rows: list[Row]) -> None:
        """Replace the rows of ``remote`` (None: of every remote) and repaint if changed."""
        if remote is None:
            self.items = {}
        else:
            self.items = {k: v for k, v in self.items.items() if v.remote != remote}
        for row in rows:
            self.items[row.key] = row
        self.marked &= set(self.items)
        self.render_rows()

    def set_filter(self, words: list[Word]) -> None:
        self.words = words
        self.render_rows()

    def _ordered(self) -> list[Row]:
        labels = self.labels
        rows = [row for row in self.items.values() if matches(self.words, row, labels)]
        col = self.sort_column

        def key(row: Row) -> tuple:
            text = row.cell(col)
            number = _NUMBER.match(text)
            if number:
                value = float(number.group(1)) * 1024 ** _UNITS.index(number.group(2) or "B")
                return (0, value, "", row.remote, row.name)
            return (1, 0.0, text.lower(), row.remote, row.name)

        return sorted(rows, key=key, reverse=self.sort_reverse)

    def render_rows(self) -> None:
        """Show the filtered, sorted rows; untouched when nothing changed (the cursor and
        the scroll position stay)."""
        ordered = self._ordered()
        signature = (tuple((r.key, r.cells, r.name, r.key in self.marked) for r in ordered),
                     self.sort_column, self.sort_reverse)
        if signature == self._signature:
            return
        self._signature = signature
        selected = self.selected_key
        self.clear()
        keys = self.column_keys
        for row in ordered:
            mark = OneLineCell(MARK if row.key in self.marked else "", style="bold")
            style = "dim" if row.read_only else ""
            cells = [OneLineCell(fmt.printable(row.cell(k)), style=style) for k in keys]
            self.add_row(mark, *cells, key=row.key)
        self.shown = [r.key for r in ordered]
        if selected in self.shown:
            self.move_cursor(row=self.shown.index(selected), animate=False)
        if self.on_changed:
            self.on_changed()

    @property
    def selected_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:  # empty or moving table
            return None

    @property
    def selected(self) -> Row | None:
        key = self.selected_key
        return self.items.get(key) if key else None

    def marked_rows(self) -> list[Row]:
        return [self.items[k] for k in self.shown if k in self.marked] + \
            [self.items[k] for k in self.marked if k not in self.shown]

    # Marks, sort -----------------------------------------------------------------------

    def toggle_mark(self) -> None:
        key = self.selected_key
        if key is None:
            return
        self.marked.symmetric_difference_update({key})
        self.render_rows()
        if self.cursor_row < self.row_count - 1:
            self.move_cursor(row=self.cursor_row + 1, animate=False)

    def mark_visible(self) -> None:
        """Mark every row the filter shows; when all are marked already, clear them."""
        visible = set(self.shown)
        if visible and visible <= self.marked:
            self.marked -= visible
        else:
            self.marked |= visible
        self.render_rows()

    def clear_marks(self) -> None:
        self.marked.clear()
        self.render_rows()

    def action_cycle_sort(self, step: int = 1) -> None:
        keys = self.column_keys
        self.sort_column = keys[(keys.index(self.sort_column) + step) % len(keys)] \
            if self.sort_column in keys else "name"
        self.render_rows()

    def action_sort_back(self) -> None:
        self.action_cycle_sort(-1)

    def action_reverse_sort(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self.render_rows()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        column = str(event.column_key.value)
        if column == "mark":
            return
        if column == self.sort_column:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_column, self.sort_reverse = column, False
        self.render_rows()
