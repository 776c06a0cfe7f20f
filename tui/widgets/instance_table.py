"""The instance table: every instance of every remote, diffed in place by row key."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Callable

from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.coordinate import Coordinate
from textual.geometry import Size
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

from .. import _textual_compat as internals

from backends.models import (
    ConnectionState,
    Instance,
    InstanceRef,
    InstanceState,
    InstanceStatus,
    InstanceType,
)

from .. import format as fmt
from ..filter import Term, matches
from ..services.inventory import Inventory
from .colors import theme_colors
from .fast_table import FastTable, OneLineCell


class SortCell(OneLineCell):
    """A cell that sorts by a value of its own, not by its text."""

    def __init__(self, text: str, sort_key: Any, style: str | Style = "", *,
                 printable: bool = False) -> None:
        """``printable``: ``text`` went through :func:`~tui.format.printable` already."""
        super().__init__(text if printable else fmt.printable(text), style=style)
        self.sort_key = sort_key


COLUMNS: tuple[tuple[str, str, int | None], ...] = (
    # key, label, fixed width (None: shares the width that is left)
    ("name", "Name", None),
    ("remote", "Remote", None),
    ("type", "Type", 4),
    ("status", "Status", 10),
    ("ipv4", "IPv4", 15),
    ("cpu", "CPU", 6),
    ("memory", "Memory", 14),
    ("disk", "Disk", 7),
    ("snapshots", "Snaps", 5),
    ("image", "Image", None),
)
LOCATION = ("location", "Location", 9)
"""The cluster member column, shown once a cluster remote is known (empty elsewhere)."""
BULK_REMOVE = 16
"""Rows removed one by one at most; past that, the table is rebuilt from the rows that stay
(:meth:`InstanceTable._remove_rows`)."""
FLEXIBLE = {"name": (8, 3), "remote": (6, 1), "image": (6, 2)}
"""Minimum width and share of the columns that grow with the terminal."""

_STATUS_VAR = {
    InstanceStatus.RUNNING: "status-running",
    InstanceStatus.STOPPED: "status-stopped",
    InstanceStatus.FROZEN: "status-frozen",
    InstanceStatus.ERROR: "status-error",
    InstanceStatus.STARTING: "status-busy",
    InstanceStatus.STOPPING: "status-busy",
    InstanceStatus.UNKNOWN: "status-stopped",
}


def _live(inv: Inventory, remote: str) -> bool:
    """Rows of this remote are current: listed in this run (not the cache), and connected
    or still connecting (listed before its backend was up, its events not followed yet)."""
    st = inv.statuses[remote]
    return st.listed and st.state in (ConnectionState.CONNECTED, ConnectionState.CONNECTING)


@lru_cache(maxsize=8192)
def natural_key(text: str) -> tuple:
    """Sorts names as people do (and lxd-ui): ``s2`` before ``s10``, case aside (cached:
    every row asks for its name's and its remote's, five times per row built)."""
    parts = re.split(r"(\d+)", text.casefold())
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts))


def row_key(ref: InstanceRef) -> str:
    return f"{ref.remote}\x1f{ref.project}\x1f{ref.name}"


class InstanceTable(FastTable):
    """Instances across remotes. ``o`` / ``O`` pick the next / previous sort column, ``I``
    reverses the order."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "scroll_top", "Top", show=False),
        Binding("G", "scroll_bottom", "Bottom", show=False),
        # rows, as g/G: DataTable's own home/end scroll sideways to the first/last column
        Binding("home", "scroll_top", "Top", show=False),
        Binding("end", "scroll_bottom", "Bottom", show=False),
        Binding("o", "cycle_sort", "Sort", id="table.sort",
                tooltip="Sort by the next column"),
        Binding("O", "sort_back", "Sort back", id="table.sort_back",
                tooltip="Sort by the previous column"),
        Binding("I", "reverse_sort", "Reverse", show=False, id="table.reverse",
                tooltip="Reverse the sort order (also: a click on the sorted column)"),
        Binding("space", "mark", "Mark", id="table.mark",
                tooltip="Mark or unmark this instance (start/stop/restart/delete act on "
                        "every marked one)"),
        Binding("asterisk", "mark_visible", "Mark all", id="table.mark_all",
                tooltip="Mark every instance the filter shows (again: unmark them)"),
        Binding("ctrl+u", "clear_marks", "Clear marks", show=False, id="table.unmark"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False)
        self.refs: dict[str, InstanceRef] = {}
        self._rendered: dict[str, tuple[Any, ...]] = {}
        """Per row: (text, style) of each cell as shown."""
        self._inputs: dict[str, tuple[Any, ...]] = {}
        """Per row: what the cells were built from (a cheap check before building them)."""
        self._colors_version = 0
        self.sort_column = "name"
        self.sort_reverse = False
        self._colors: dict[str, str] = {}
        self._styles: dict[tuple, Style] = {}
        self.on_sorted: Callable[[str, bool], None] | None = None
        self.marked: set[InstanceRef] = set()
        """Marked instances (kept until cleared, also while filtered out)."""
        self._inventory: Inventory | None = None
        """The inventory of the last sync (for the selected row's reason)."""
        self.show_location = False

    def on_mount(self) -> None:
        for key, label, width in COLUMNS:
            self.add_column(label, key=key, width=width or FLEXIBLE[key][0])
        self.reload_colors()

    def reload_colors(self) -> None:
        """Take the status colours from the current theme (rows re-render on next sync)."""
        self._colors = theme_colors(self.app, [*set(_STATUS_VAR.values()), "vm-badge"])
        self._colors_version += 1
        self._styles.clear()

    def on_resize(self, event: events.Resize | None = None) -> None:
        """Give the flexible columns (name, remote, image) the width that is left (on a
        resize, and when a column comes)."""
        padding = 2 * self.cell_padding * len(self.active_columns)
        fixed = sum(w for _, _, w in self.active_columns if w)
        spare = self.size.width - padding - fixed - 1  # 1: vertical scrollbar
        minimum = sum(m for m, _ in FLEXIBLE.values())
        extra = max(0, spare - minimum)
        shares = sum(w for _, w in FLEXIBLE.values())
        changed = False
        for key, (least, share) in FLEXIBLE.items():
            width = least + extra * share // shares
            column = self.columns[ColumnKey(key)]
            if column.width != width:
                column.width = width
                changed = True
        if changed:
            internals.require_dimensions_update(self)
            self.refresh()

    @property
    def active_columns(self) -> tuple[tuple[str, str, int | None], ...]:
        return COLUMNS + (LOCATION,) if self.show_location else COLUMNS

    def _location_column(self, inv: Inventory) -> None:
        """Show the Location column once some remote is a cluster (it stays)."""
        if self.show_location or not inv.members.clusters:
            return
        self.show_location = True
        self.add_column(LOCATION[1], key=LOCATION[0], width=LOCATION[2], default="")
        self._inputs.clear()  # every row gets its location cell
        self._rendered.clear()
        self.on_resize()

    @property
    def selected_ref(self) -> InstanceRef | None:
        if self.row_count == 0:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:  # empty or moving table
            return None
        return self.refs.get(key or "")

    def visible_refs(self) -> list[InstanceRef]:
        """Rows on screen now (for sampling usage figures)."""
        first = int(self.scroll_y)
        out = []
        for index in range(first, min(self.row_count, first + self.size.height + 1)):
            try:
                key = self.coordinate_to_cell_key(Coordinate(index, 0)).row_key.value
            except Exception:
                break
            if key in self.refs:
                out.append(self.refs[key])
        return out

    # Rendering -------------------------------------------------------------------------

    def _style(self, var: str, *, bold: bool | None = None, dim: bool | None = None) -> Style:
        """One Style object per theme colour and attributes (until the colours change):
        a listing builds hundreds of rows, and a Style's text form is computed per object."""
        key = (var, bold, dim)
        style = self._styles.get(key)
        if style is None:
            style = self._styles[key] = Style(color=self._colors[var] or None, bold=bold,
                                              dim=dim)
        return style

    def _specs(self, inv: Inventory, inst: Instance, state: InstanceState | None
               ) -> tuple[tuple[str, Any, str | Style], ...]:
        """A row as ``(text, sort key, style)`` per column: cells (rich Text objects, not
        cheap) are built from them only where the text or style changed."""
        ref = inst.ref
        online = _live(inv, ref.remote)
        pending = inv.pending.get(ref)
        value = inst.status.value
        if pending:
            status = (pending, value, self._style("status-busy", bold=True))
        elif not online:
            status = (f"{value}?", value, self._style("status-stopped", dim=True))
        elif inst.extra.get("reason"):
            # stopped for a reason of its own (killed outside corral): marked; the reason
            # is the table's tooltip while the row is selected
            status = (f"{value} !", value, self._style("status-error"))
        else:
            status = (value, value, self._style(_STATUS_VAR[inst.status]))
        is_vm = inst.type is InstanceType.VM
        ipv4 = ", ".join(state.ipv4) if state else ""
        mem_used = state.memory_usage if state else -1
        location = ((inst.location, (inst.location, inst.name), ""),) \
            if self.show_location else ()
        marked = ref in self.marked
        return (
            (f"● {inst.name}" if marked else inst.name,
             (natural_key(inst.name), natural_key(ref.remote)), "bold" if marked else ""),
            (ref.remote, (natural_key(ref.remote), natural_key(inst.name)), ""),
            (fmt.itype(inst.type), (inst.type.value, natural_key(inst.name)),
             self._style("vm-badge") if is_vm else ""),
            status,
            (ipv4, ipv4, ""),
            (fmt.cpu(state), state.cpu_percent or 0 if state else -1, ""),
            (fmt.memory(state, inst.memory_limit), mem_used, ""),
            (fmt.disk(state), (state.disk_usage or 0) if state else -1, ""),
            (str(inst.snapshot_count) if inst.snapshot_count else "",
             -1 if inst.snapshot_count is None else inst.snapshot_count, ""),
            (inst.image, inst.image, ""),
            *location,
        )

    def sync(self, inv: Inventory, terms: list[Term], refs: set[InstanceRef] | None = None) -> None:
        """Bring the rows in line with the inventory.

        ``refs`` limits the work to those instances (events, one remote's listing); ``None``
        re-checks every instance (a filter change). Rows whose inputs did not change are not
        touched, so the cursor and scroll position stay.
        """
        selected = self.selected_ref
        self._inventory = inv
        if not self.show_location and inv.members.clusters:
            self._location_column(inv)
            refs = None
        if refs is None:
            candidates = set(inv.instances) | set(self.refs.values())
        else:
            candidates = refs
        resort = False
        updated: dict[str, dict[str, SortCell]] = {}
        gone: list[str] = []
        added: list[tuple[str, tuple[SortCell, ...], int]] = []
        for ref in candidates:
            key = row_key(ref)
            inst = inv.instances.get(ref)
            state = inv.states.get(ref)
            wanted = inst is not None and matches(terms, inst, state)
            present = key in self.refs
            if inst is None:
                self.marked.discard(ref)  # gone: nothing left to act on
            if not wanted:
                if present:
                    gone.append(key)
                    del self.refs[key]
                    self._rendered.pop(key, None)
                    self._inputs.pop(key, None)
                continue
            assert inst is not None
            online = _live(inv, ref.remote)
            inputs = (inst, state, inv.pending.get(ref), online, self._colors_version,
                      ref in self.marked, inst.extra.get("reason"))  # extra: not in equality
            if present and self._inputs.get(key) == inputs:
                continue
            self._inputs[key] = inputs
            specs = self._specs(inv, inst, state)
            shown = tuple((fmt.printable(text), str(style)) for text, _, style in specs)
            previous = self._rendered.get(key)
            if present and previous == shown:
                continue
            if not present:
                added.append((key, tuple(SortCell(text, sort_key, style, printable=True)
                                         for (text, _), (_, sort_key, style)
                                         in zip(shown, specs)), 1))  # all at once, below
                self.refs[key] = ref
                resort = True
            else:
                # Only the cells whose text or style changed: usage figures that did not
                # move cause no repaint at all.
                changes = {col: SortCell(*spec) for index, ((col, _, _), spec) in
                           enumerate(zip(self.active_columns, specs))
                           if previous is None or previous[index] != shown[index]}
                updated[key] = changes
                resort = resort or self.sort_column in changes
            self._rendered[key] = shown
        internals.add_rows(self, added)
        rebuilt = self._remove_rows(gone)
        if selected in candidates:
            self._show_reason()
        if updated:
            self._update_rows(updated, repaint=not resort)
        if resort:
            self.apply_sort()
        if resort or rebuilt:
            if selected is not None and row_key(selected) in self.refs:
                index = self.get_row_index(row_key(selected))
                if index != self.cursor_row:
                    self.move_cursor(row=index, animate=False)

    def _remove_rows(self, keys: list[str]) -> bool:
        """Remove these rows; True when the table was rebuilt (the cursor went home).

        ``DataTable.remove_row`` numbers every row after the one removed again and checks
        the cursor and hover cells anew, so removing most of a big table one row at a time
        (a filter typed over thousands of instances) took seconds. Past a few rows, those
        that stay go back into the cleared table, in the order they had."""
        if len(keys) <= BULK_REMOVE:
            for key in keys:
                self.remove_row(key)
            return False
        leaving = set(keys)
        kept = [(row.key.value, self.get_row(row.key), row.height)
                for row in self.ordered_rows if row.key.value not in leaving]
        self.clear()
        internals.add_rows(self, [(str(value), tuple(cells), height)
                                  for value, cells, height in kept])
        return True

    def _update_rows(self, updated: dict[str, dict[str, SortCell]], *, repaint: bool) -> None:
        """Put new cells into rows and repaint just those rows.

        ``DataTable.update_cell`` bumps a table-wide counter that drops the cached render of
        every row, so one changed CPU figure would repaint the whole table (hundreds of ms
        with a screen full of rows, every sample). Here only the cached renders of the
        changed rows are dropped. Relies on DataTable internals of the pinned Textual
        (:mod:`tui._textual_compat`).
        """
        row_keys = {RowKey(k) for k in updated}
        for key, changes in updated.items():
            internals.put_cells(self, RowKey(key),
                                {ColumnKey(col): cell for col, cell in changes.items()})
        internals.drop_row_renders(self, row_keys)  # and the assembled lines (cheap again)
        if repaint and len(row_keys) > self.size.height:
            # A listing that changed more rows than the screen holds (the stale rows of a
            # warm start): one repaint of what is shown; refresh_row's region costs a walk
            # over every row above it, per row.
            self.refresh()
        elif repaint:
            for row_key in row_keys:
                index = internals.row_index(self, row_key)
                if index is not None:  # (every row put into is there)
                    self.refresh_row(index)

    def update_dimensions(self, new_rows) -> None:
        """Every column has a set width and every row is one line, so new rows change only
        the height. DataTable measures every cell of every new row for columns that size
        themselves (~0.1 s for 600 rows, on the way to the first frame); this table has
        none. Relies on DataTable internals of the pinned Textual."""
        if any(c.auto_width for c in self.columns.values()):
            super().update_dimensions(new_rows)
            return
        width = sum(c.get_render_width(self) for c in self.columns.values())
        header = self.header_height if self.show_header else 0
        self.virtual_size = Size(width + internals.row_label_width(self),
                                 internals.total_row_height(self) + header)

    def _show_reason(self) -> None:
        """The table's tooltip says why the selected instance is in its state, when its
        backend knows (a VM killed outside corral)."""
        ref = self.selected_ref
        inst = self._inventory.instances.get(ref) if ref and self._inventory else None
        reason = inst.extra.get("reason") if inst else None
        tooltip = f"{ref}: {reason}" if reason else None
        if self.tooltip != tooltip:
            self.tooltip = tooltip

    def on_data_table_row_highlighted(self) -> None:
        self._show_reason()

    def apply_sort(self) -> None:
        if self.row_count:
            self.sort(self.sort_column, key=lambda cell: cell.sort_key,
                      reverse=self.sort_reverse)

    # Marks -----------------------------------------------------------------------------

    def action_mark(self) -> None:
        ref = self.selected_ref
        if ref is None:
            return
        self.marked.symmetric_difference_update({ref})
        self._remark({ref})
        if self.cursor_row < self.row_count - 1:
            self.move_cursor(row=self.cursor_row + 1, animate=False)

    def action_mark_visible(self) -> None:
        shown = set(self.refs.values())
        changed = shown - self.marked if not shown <= self.marked else shown
        if shown and shown <= self.marked:
            self.marked -= shown
        else:
            self.marked |= shown
        self._remark(changed)

    def action_clear_marks(self) -> None:
        changed, self.marked = set(self.marked), set()
        self._remark(changed)

    def _remark(self, refs: set[InstanceRef]) -> None:
        if self.on_marks:
            self.on_marks(refs)

    on_marks: Callable[[set[InstanceRef]], None] | None = None
    """Told which rows' marks changed (the screen re-syncs them)."""

    # Actions ---------------------------------------------------------------------------

    def action_cycle_sort(self, step: int = 1) -> None:
        keys = [k for k, _, _ in self.active_columns]
        at = keys.index(self.sort_column) if self.sort_column in keys else -step
        self.sort_column = keys[(at + step) % len(keys)]
        self._after_sort_change()

    def action_sort_back(self) -> None:
        self.action_cycle_sort(-1)

    def action_reverse_sort(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self._after_sort_change()

    def _after_sort_change(self) -> None:
        selected = self.selected_ref
        self.apply_sort()
        if selected is not None:
            self.move_cursor(row=self.get_row_index(row_key(selected)), animate=False)
        if self.on_sorted:
            self.on_sorted(self.sort_column, self.sort_reverse)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        column = str(event.column_key.value)
        if column == self.sort_column:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_column, self.sort_reverse = column, False
        self._after_sort_change()
