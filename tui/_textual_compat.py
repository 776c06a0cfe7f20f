"""Every use corral makes of a private name of Textual (and of textual-image), in one place.

Textual is pinned exactly (``pyproject.toml``): corral needs a few things it offers no public
way to do, mostly to keep the first frame and idle CPU low. Each function or class here says
what Textual lacks and which private part it relies on; ``docs/textual-wishes.md`` words the
public changes that would let it go, and ``tests/tui/test_textual_internals.py`` fails loudly
when a release moves one of them. Nothing else in ``tui/`` names a private part of Textual
(``tests/unit/test_seams.py``, and ruff's SLF001 outside this module).
"""

from __future__ import annotations

import sys
from itertools import zip_longest
from typing import TYPE_CHECKING, Any, Callable, TypeVar

# Textual classes that only its private modules export, named here for the rest of tui/
# (``X as X``: a re-export): the key parser and its error, and the key widget Footer builds.
from textual._parser import ParseError as ParseError
from textual._time import get_time
from textual._xterm_parser import XTermParser as XTermParser
from textual.keys import KEY_NAME_REPLACEMENTS, _character_to_key
from textual.screen import Screen
from textual.widgets import DataTable
from textual.widgets._data_table import DuplicateKey, Row, RowKey
from textual.widgets._footer import FooterKey as FooterKey

if TYPE_CHECKING:
    from rich.style import Style
    from textual._compositor import LayoutUpdate
    from textual.app import App
    from textual.binding import BindingsMap
    from textual.cache import LRUCache
    from textual.dom import DOMNode
    from textual.driver import Driver
    from textual.message_pump import MessagePump
    from textual.widget import Widget
    from textual.widgets import Footer, Input
    from textual.widgets.data_table import ColumnKey

CacheKey = TypeVar("CacheKey")

# -- the input thread (tui/driver.py) -------------------------------------------------------

POLL = 0.1
"""Seconds between looks when the parser's deadline cannot be read (Textual's own pace)."""


def key_parser(driver: Driver) -> XTermParser:
    """The key parser Textual's own input thread makes, for an input thread of corral's.
    Textual has no way to wait for input without waking up ten times a second, so
    :class:`~tui.driver.QuietLinuxDriver` runs its own loop; it relies on the private
    ``XTermParser`` and on the driver's private ``_debug`` flag the parser is made with."""
    return XTermParser(driver._debug)


def key_name(char: str) -> str:
    """The name Textual gives the key of ``char`` typed alone (``:`` is ``colon``, ``N``
    is ``N``): the private ``textual.keys._character_to_key`` the parser uses, with its
    rule that letters and digits are their own names."""
    name = char if char.isalnum() else _character_to_key(char)
    return KEY_NAME_REPLACEMENTS.get(name, name)


def parser_deadline(parser: XTermParser) -> float | None:
    """How long the input thread may wait: until the parser's pending timeout (a lone
    ``Esc`` becomes a key once it passes), or for ever (None) when it has none. Textual
    does not say when its parser next needs a tick; this reads the private
    ``XTermParser._timeout_time`` against ``textual._time.get_time`` (:data:`POLL` when it
    is not a number)."""
    deadline = getattr(parser, "_timeout_time", 0.0)
    if deadline is None:
        return None
    if not isinstance(deadline, (int, float)):
        return POLL
    return max(0.0, deadline - get_time())


# -- the app and its screens ----------------------------------------------------------------


def full_frame(screen: Screen) -> LayoutUpdate:
    """The whole of ``screen`` rendered now, as strips (the last frame kept for the next
    start). Textual renders a full frame only for itself; this asks the screen's private
    ``_compositor`` for ``render_full_update``."""
    return screen._compositor.render_full_update()


def in_update_batch(app: App) -> bool:
    """Whether ``app`` is inside a batch of updates (all of Textual's start-up is one),
    where a rendered frame is dropped. Textual has no public flag; this reads the private
    ``App._batch_count``."""
    return bool(app._batch_count)


def require_repaint(screen: Screen) -> None:
    """Have ``screen`` repaint in full at its next refresh, without laying it out now.
    Textual has no public call for it; this sets the private ``Screen._repaint_required``."""
    screen._repaint_required = True


class RefreshHookScreen(Screen[None]):
    """A screen whose compositor refresh a subclass can take over as
    :meth:`compositor_refresh`. Textual offers no hook where a screen renders after a
    layout; this overrides the private ``Screen._compositor_refresh``."""

    def _compositor_refresh(self) -> None:
        """What Textual calls (private): :meth:`compositor_refresh` answers."""
        self.compositor_refresh()

    def compositor_refresh(self) -> None:
        """Textual's refresh: render what changed (or everything, after a layout)."""
        Screen._compositor_refresh(self)


def has_screens(app: App) -> bool:
    """Whether ``app`` still has a screen stack (none once it is quitting: a key has
    nowhere to go). ``App.screen_stack`` raises or copies; this reads the private
    ``App._screen_stack`` (``tui/app.py``'s ``on_event`` is to call it)."""
    return bool(app._screen_stack)


def is_closing(app: App) -> bool:
    """Whether ``app`` is quitting: it asked to exit, or has no screen left. Textual keeps
    both private (``App._exit``, ``App._screen_stack``); ``tui/keyboard.py`` is to call
    this."""
    return bool(app._exit) or not app._screen_stack


def binding_chain(app: App) -> list[tuple[DOMNode, BindingsMap]]:
    """The nodes a key is looked up on, focused widget first, each with its bindings.
    Textual's key dispatch walks this private ``App._binding_chain``; it raises while no
    screen is up (``tui/keyboard.py`` is to call this)."""
    return app._binding_chain


def messages_queued(node: MessagePump) -> int:
    """How many messages wait in ``node``'s queue (the key gate's barrier: every node has
    run what was queued before). Textual has no public count; this reads the private
    ``MessagePump._message_queue`` (``tui/keyboard.py`` is to call this)."""
    return node._message_queue.qsize()


def search_worker_group(screen: Screen) -> str | None:
    """The worker group in which ``screen`` searches as it is typed into (the command
    palette's), None for a screen that does not: the key gate waits for the search of what
    was typed before it hands on ``enter``. Textual has no way to wait for the palette's
    results; its group is named only by the private
    ``CommandPalette._GATHER_COMMANDS_GROUP`` (``tui/keyboard.py`` is to call this)."""
    return getattr(type(screen), "_GATHER_COMMANDS_GROUP", None)


def loaded_text_area() -> type | None:
    """Textual's ``TextArea`` class if something loaded it, else None (so that asking does
    not load it: none loaded, none focused). ``textual.widgets`` loads its widgets lazily;
    the module that holds ``TextArea`` is private (``textual.widgets._text_area``)."""
    module = sys.modules.get("textual.widgets._text_area")
    return getattr(module, "TextArea", None) if module is not None else None


# -- bindings and the keymap ----------------------------------------------------------------


def bindings_map(node: DOMNode) -> BindingsMap:
    """The bindings ``node`` has itself, its ``BINDINGS`` and any bound at run time (the
    help screen lists them, the details pane names its keys). Textual shows them only as
    the active bindings of a screen; this is the private ``DOMNode._bindings``."""
    return node._bindings


def bind_key(node: DOMNode, keys: str, action: str, description: str) -> None:
    """Bind ``keys`` to ``action`` on this one node (a console's leave key is chosen per
    view). Textual binds only per class (``BINDINGS``); this adds to the private
    ``DOMNode._bindings``."""
    node._bindings.bind(keys, action, description)


def keymap(app: App) -> dict[str, str]:
    """The user's ``[keymap]`` as the app applies it (binding id -> keys). Textual has
    ``set_keymap`` but no getter; this reads the private ``App._keymap``."""
    return getattr(app, "_keymap", {}) or {}


# -- widgets --------------------------------------------------------------------------------


def input_suggestion(widget: Input) -> str:
    """The completion ``widget`` shows after what was typed ("" for none). Textual's
    ``Input`` keeps it in the private ``_suggestion``."""
    return widget._suggestion


def is_data_bound(widget: Widget, name: str) -> bool:
    """Whether the reactive ``name`` of ``widget`` was bound with ``data_bind`` (before it
    mounts). Textual has no public way to ask; this reads the private
    ``DOMNode._reactive_connect``."""
    return name in (widget._reactive_connect or {})


def footer_bindings_ready(footer: Footer) -> bool:
    """Whether ``footer`` has shown keys already (its first rebuild happened). Textual's
    ``Footer`` keeps that in the private reactive ``_bindings_ready``."""
    return footer._bindings_ready


def set_footer_bindings_ready(footer: Footer) -> None:
    """Tell ``footer`` its keys are ready, as its own first ``bindings_changed`` does
    (corral rebuilds it later than Textual would). Sets the private ``_bindings_ready``."""
    footer._bindings_ready = True


def set_footer_key_enabled(key: FooterKey, enabled: bool) -> None:
    """Enable or disable a footer key in place, as ``FooterKey(disabled=...)`` does when
    it is made: Textual's ``FooterKey`` keeps it in the private ``_disabled`` (a click on a
    disabled key rings the bell instead of pressing it) and shows it with the
    ``-disabled`` class (dim)."""
    key._disabled = not enabled
    key.set_class(not enabled, "-disabled")


# -- DataTable ------------------------------------------------------------------------------


class DataTableHooks(DataTable):
    """A DataTable whose cell render and size computation a subclass can take over as
    :meth:`render_cell` and :meth:`update_dimensions`. Textual renders every cell through
    Rich's general path and measures every new row; it offers no hook for either, so this
    overrides the private ``DataTable._render_cell`` and ``DataTable._update_dimensions``."""

    def _render_cell(self, row_index: int, column_index: int, base_style: Style, width: int,
                     cursor: bool = False, hover: bool = False) -> list:
        """What DataTable calls (private): :meth:`render_cell` answers."""
        return self.render_cell(row_index, column_index, base_style, width, cursor, hover)

    def render_cell(self, row_index: int, column_index: int, base_style: Style, width: int,
                    cursor: bool = False, hover: bool = False) -> list:
        """Textual's render of one cell (lines of segments)."""
        return DataTable._render_cell(self, row_index, column_index, base_style, width,
                                      cursor, hover)

    def _update_dimensions(self, new_rows: Any) -> None:
        """What DataTable calls (private): :meth:`update_dimensions` answers."""
        self.update_dimensions(new_rows)

    def update_dimensions(self, new_rows: Any) -> None:
        """Textual's: column widths and the heights of ``new_rows``, then the virtual size."""
        DataTable._update_dimensions(self, new_rows)


def drop_style_caches(table: DataTable) -> None:
    """Forget the styles ``table`` worked out for its cells, but not its rendered rows
    (what DataTable's ``notify_style_update`` does besides dropping every render). Clears
    the private ``Widget._styles_cache`` and ``DataTable._get_styles_to_render_cell``."""
    table._styles_cache.clear()
    table._get_styles_to_render_cell.cache_clear()


def drop_render_caches(table: DataTable) -> None:
    """Forget every rendered cell, row and line of ``table``. DataTable does this on any
    style change; a public call would let a subclass choose when. Clears the private
    ``_row_render_cache``, ``_cell_render_cache``, ``_row_renderable_cache`` and
    ``_line_cache``."""
    table._row_render_cache.clear()
    table._cell_render_cache.clear()
    table._row_renderable_cache.clear()
    table._line_cache.clear()


def cell_render_slot(table: DataTable, row_index: int, column_index: int, base_style: Style,
                     cursor: bool, hover: bool) -> tuple[Any, tuple, RowKey | None,
                                                         ColumnKey | None]:
    """Where DataTable keeps the render of a body cell: ``(cache, key, row key, column
    key)``, the key built as DataTable's ``_render_cell`` builds it, so a render of
    corral's shares DataTable's cache. Relies on the private ``_row_locations``,
    ``_column_locations``, ``_show_hover_cursor``, ``_update_count``,
    ``_pseudo_class_state`` and ``_cell_render_cache``."""
    row_key = table._row_locations.get_key(row_index)
    column_key = table._column_locations.get_key(column_index)
    key = (row_key, column_key, base_style, cursor, hover, table._show_hover_cursor,
           table._update_count, table._pseudo_class_state)
    return table._cell_render_cache, key, row_key, column_key


def cell_value(table: DataTable, row_key: RowKey, column_key: ColumnKey | None) -> Any:
    """The cell of ``table`` at a row and column key, as added (None: none). DataTable's
    ``get_cell`` raises for a missing one; this reads its private ``_data``."""
    if column_key is None:
        return None
    return table._data.get(row_key, {}).get(column_key)


def cell_styles(table: DataTable, hover: bool, cursor: bool) -> tuple[Style, Style]:
    """The component and post styles of a body cell, as DataTable's own render uses them.
    Calls the private ``DataTable._get_styles_to_render_cell`` (and reads
    ``_show_hover_cursor``)."""
    return table._get_styles_to_render_cell(
        False, False, False, hover, cursor, table.show_cursor, table._show_hover_cursor,
        table.cursor_foreground_priority == "css", table.cursor_background_priority == "css")


def add_rows(table: DataTable, rows: list[tuple[str, tuple[Any, ...], int]]) -> None:
    """Append ``rows`` (key, cells, height in lines) to ``table`` as ``add_row`` would, one
    after another, with what ``add_row`` does per row done once: it works out the ordered
    columns twice and sets the cursor (a reactive, validated and watched) for every row,
    half of building a table of 700 instances before the first frame. Writes the private
    ``_row_locations``, ``_data``, ``_new_rows``, ``_require_update_dimensions`` and
    ``_update_count``, as ``add_row`` does.

    Raises:
        DuplicateKey: a key is in the table already (or twice in ``rows``); the rows before
            it are added.
        ValueError: a row has more cells than the table has columns.
    """
    if not rows:
        return
    columns = table.ordered_columns
    keys = [column.key for column in columns]
    had_rows = table.row_count > 0
    for key, cells, height in rows:
        row_key = RowKey(key)
        if row_key in table._row_locations:
            raise DuplicateKey(f"The row key {row_key!r} already exists.")
        if len(cells) > len(keys):
            raise ValueError("More values provided than there are columns.")
        table._row_locations[row_key] = table.row_count
        table._data[row_key] = dict(zip_longest(keys, cells))
        table.rows[row_key] = Row(row_key, height, None, False)
        table._new_rows.add(row_key)
    table._require_update_dimensions = True
    table.cursor_coordinate = table.cursor_coordinate
    if not had_rows and columns and table.show_cursor and table.cursor_type != "none":
        table._highlight_cursor()  # a cell to highlight now, where there was none
    table._update_count += 1
    table.check_idle()


def put_cells(table: DataTable, row_key: RowKey, cells: dict[ColumnKey, Any]) -> None:
    """Put ``cells`` into a row of ``table`` without dropping any rendered row.
    ``DataTable.update_cell`` bumps a table-wide counter that drops the render of every
    row; this writes the private ``_data`` (then :func:`drop_row_renders`)."""
    table._data[row_key].update(cells)


def drop_row_renders(table: DataTable, row_keys: set[RowKey]) -> None:
    """Forget the rendered cells and rows of ``row_keys`` only, and the assembled lines
    (cheap to build again from the row caches). DataTable can only drop all of them; this
    discards entries of the private ``_cell_render_cache``, ``_row_render_cache`` (keyed by
    row key first) and ``_row_renderable_cache`` (by row index second), and clears
    ``_line_cache``."""
    _discard(table._cell_render_cache, lambda key: key[0] in row_keys)
    _discard(table._row_render_cache, lambda key: key[0] in row_keys)
    indexes = {table._row_locations.get(k) for k in row_keys}
    _discard(table._row_renderable_cache, lambda key: key[1] in indexes)
    table._line_cache.clear()


def _discard(cache: LRUCache[CacheKey, Any], drop: Callable[[CacheKey], bool]) -> None:
    """Discard the entries of ``cache`` whose key ``drop`` says."""
    for key in [k for k in cache.keys() if drop(k)]:
        cache.discard(key)


def row_index(table: DataTable, row_key: RowKey) -> int | None:
    """The index of the row ``row_key`` (None: no such row), from the private
    ``_row_locations`` (``get_row_index`` raises instead)."""
    return table._row_locations.get(row_key)


def row_label_width(table: DataTable) -> int:
    """The width of the row label column (0 without labels): DataTable's private
    ``_row_label_column_width``, for a size computed without measuring rows."""
    return table._row_label_column_width


def total_row_height(table: DataTable) -> int:
    """The height of all rows: DataTable's private ``_total_row_height``."""
    return table._total_row_height


def require_dimensions_update(table: DataTable) -> None:
    """Have ``table`` work out its column widths and virtual size again at its next render
    (a column's width was changed in place). Sets the private
    ``_require_update_dimensions``, as DataTable's own column changes do."""
    table._require_update_dimensions = True


# -- textual-image --------------------------------------------------------------------------


def image_cell_size() -> tuple[int, int]:
    """A cell's size in pixels as textual-image read it from the terminal, ``(width,
    height)``; raises when it cannot tell. textual-image keeps it in its private
    ``_terminal.get_cell_size``."""
    from textual_image._terminal import get_cell_size

    size = get_cell_size()
    return size.width, size.height
