"""The pane a resource view fills in place of the instance table: the rows of every
connected remote that can fill the view, a details pane under them, and the view's verbs
(the action table's ``ROWS`` entries, :mod:`tui.actions`). Rows are read when the view
opens and again when the daemon's events say that something of this kind changed (never
polled)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.timer import Timer
from textual.widgets import DataTable, Static

from backends.models import BackendEvent, ConnectionState, EventKind, Resource

from .. import format as fmt
from ..actions import ACTIONS, BY_VIEW, Scope, row_bindings, row_method
from ..flows.context import Context
from ..keyboard import Opens
from ..offer import row_allowed
from ..services import projects
from ..services.inventory import Inventory
from ..widgets.plain import Plain
from .rows import Row, from_status, parse_filter
from .specs import BY_NAME, OPERATIONS, ViewSpec, load_rows, remotes_for, remotes_views
from .table import ResourceTable


PREFETCH_AFTER = 1.0
"""Seconds after the last remote stopped connecting when the views are read ahead."""


class ResourcePane(Opens, Vertical):
    """One resource view at a time (``show``); hidden while the instances are shown."""

    SCOPED_CSS = False
    DEFAULT_CSS = """
    ResourcePane { display: none; height: 1fr; }
    ResourceTable { height: 1fr; border: round $panel; border-title-color: $foreground-muted; }
    ResourceTable:focus { border: round $primary; border-title-color: $primary; }
    #resource-details { display: none; height: 12; border: round $panel; padding: 0 1; }
    #resource-details.-visible { display: block; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        *row_bindings(),
        Binding("space", "mark", "Mark", id="resource.mark",
                tooltip="Mark or unmark this row (verbs act on every marked row)"),
        Binding("asterisk", "mark_visible", "Mark all", id="resource.mark_all",
                tooltip="Mark every row the filter shows (again: unmark them)"),
        Binding("ctrl+u", "clear_marks", "Clear marks", show=False, id="resource.unmark"),
        Binding("i", "toggle_details", "Details", show=False, id="resource.details"),
        Binding("ctrl+r", "reload_view", "Refresh", show=False, id="resource.refresh_view",
                tooltip="Read this view's rows again from every remote"),
    ]

    class OpenView(Message):
        """A verb asks the screen to show another view (a pool's volumes)."""

        def __init__(self, name: str, parent: str, filter_text: str | None = None) -> None:
            super().__init__()
            self.name, self.parent, self.filter_text = name, parent, filter_text

    def __init__(self, inventory: Inventory, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.inventory = inventory
        self.spec: ViewSpec | None = None
        self.parent_key = ""
        """``remote/pool`` of the volumes view, "" otherwise."""
        self.problems: dict[str, str] = {}
        self.on_title: Callable[[], None] | None = None
        self._cache: dict[tuple[str, str], dict[str, Row]] = {}
        self._pending: set[str | None] = set()
        self._to_prefetch: set[str] = set()
        """Remotes connected and listed whose views wait for the start-up to settle."""
        self._prefetch_timer: Timer | None = None
        self._reads = 0
        """Reads of a view's rows started so far (each one's number orders them)."""
        self._shown_read: dict[tuple[str, str, str], int] = {}
        """(view, parent, remote) -> the number of the read whose rows are shown."""
        self._tables: dict[str, ResourceTable] = {}
        """One table per view, kept while hidden: switching back repaints from its
        cached rendering instead of building every cell again."""
        self._current: ResourceTable | None = None
        self._words: list = []

    def compose(self) -> ComposeResult:
        yield Plain("", id="resource-details")

    def on_mount(self) -> None:
        self.inventory.on_resource = self._resource_event

    @property
    def table(self) -> ResourceTable:
        """The table of the view shown."""
        if self._current is None:
            self._current = self._table_for("instances")
        return self._current

    def _table_for(self, name: str) -> ResourceTable:
        table = self._tables.get(name)
        if table is None:
            table = self._tables[name] = ResourceTable(classes="resource-table")
            table.on_changed = self._changed
            self.mount(table, before=self.query_one("#resource-details"))
        return table

    # Switching ---------------------------------------------------------------------

    def show(self, spec: ViewSpec, parent: str = "") -> None:
        """Fill the pane with ``spec`` (cached rows at once, then read afresh)."""
        self.spec, self.parent_key = spec, parent
        self.problems = {}
        table = self._table_for(spec.name)
        for other in self._tables.values():
            other.display = other is table
        self._current = table
        table.show_view(spec)
        table.set_filter(self._words)
        cached = self._cached_rows(spec, parent)
        table.set_rows(None, cached)
        self._changed()
        if cached:
            # shown from what was read (events keep it current); read again once the
            # frame is painted, so that parsing the answer does not delay the paint
            self.set_timer(0.25, lambda: self.reload(None) if self.spec is spec else None)
        else:
            self.reload(None)

    def _cached_rows(self, spec: ViewSpec, parent: str) -> list[Row]:
        """What was last read for the view (a pool's volumes: from every volume read)."""
        cached = self._cache.get((spec.name, parent))
        if cached is None and parent:
            only, _, pool = parent.partition("/")
            cached = {k: r for k, r in self._cache.get((spec.name, ""), {}).items()
                      if r.remote == only and r.parent == pool}
        return list(cached.values()) if cached else []

    def prefetch(self, remote: str, only: set[str] | None = None) -> None:
        """Read every view ``remote`` can fill (``only``: those named) into the cache (in
        the background), so that the first switch to a view paints at once."""
        async def one(spec: ViewSpec) -> None:
            rows, problem = await load_rows(self.inventory, spec, remote)
            if problem:
                return
            cached = self._cache.setdefault((spec.name, ""), {})
            for key in [k for k, r in cached.items() if r.remote == remote]:
                del cached[key]
            cached.update((r.key, r) for r in rows)

        async def run() -> None:
            # all at once, each cached as it comes: the first switch to one of them does
            # not wait for the others to be read
            await asyncio.gather(*(one(spec) for spec in remotes_views(self.inventory, remote)
                                   if only is None or spec.name in only))

        group = f"view-prefetch-{remote}" + ("-" + ",".join(sorted(only)) if only else "")
        self.run_worker(run(), group=group, exclusive=True,
                        exit_on_error=False, description=f"Read the views of {remote}")

    def reload(self, remote: str | None) -> None:
        """Read the rows of ``remote`` (None: every remote) again, coalesced."""
        if remote in self._pending or None in self._pending:
            return
        self._pending.add(remote)
        self.run_worker(self._load(remote), group=f"view-load-{remote}", exit_on_error=False)

    async def _load(self, remote: str | None) -> None:
        await asyncio.sleep(0.05 if remote is not None else 0)  # a burst is one read
        self._pending.discard(remote)
        spec, parent = self.spec, self.parent_key
        if spec is None:
            return
        if spec.name == "remotes":
            self.table.set_rows(None, [from_status(s) for s in
                                       self.inventory.statuses.values()])
            return
        names = remotes_for(self.inventory, spec)
        if remote is not None:
            names = [n for n in names if n == remote]
        pool = ""
        if parent:
            only, _, pool = parent.partition("/")
            names = [n for n in names if n == only]
        if remote is None:  # rows of remotes that went away
            for name in {r.remote for r in self.table.items.values()} - set(names):
                self.table.set_rows(name, [])
        # Each remote's rows are shown as they come (a slow remote holds back only its
        # own), and only when no read of that remote started later has been shown: a
        # read that began before a change and ends after the read the change's event
        # asked for must not bring back what the change removed (nor hide what it made).
        await asyncio.gather(*(self._load_one(spec, parent, name, pool) for name in names))

    async def _load_one(self, spec: ViewSpec, parent: str, name: str, pool: str) -> None:
        self._reads += 1
        started = self._reads
        rows, problem = await load_rows(self.inventory, spec, name, pool)
        if self.spec is not spec or self.parent_key != parent:
            return  # the user switched meanwhile
        key = (spec.name, parent, name)
        if self._shown_read.get(key, 0) > started:
            return  # a read that started later is shown already
        self._shown_read[key] = started
        if problem:
            self.problems[name] = problem
        else:
            self.problems.pop(name, None)
        self.table.set_rows(name, rows)
        self._cache[(spec.name, parent)] = dict(self.table.items)
        self._changed()

    # Changes from the daemons --------------------------------------------------------

    def _resource_event(self, remote: str, event: BackendEvent) -> None:
        spec = self.spec
        stale = {name for name, _ in self._cache if _affects(BY_NAME[name], event)
                 and (spec is None or name != spec.name or not self.is_shown)}
        for key in [k for k in self._cache if k[0] in stale]:
            del self._cache[key]
        if stale:
            self.prefetch(remote, stale)  # read afresh in the background
        if spec is not None and self.is_shown and _affects(spec, event):
            self.reload(remote)

    def inventory_changed(self, remotes: set[str], connection: bool) -> None:
        """Remotes changed (a connection, operations): the remotes and operations views
        follow; other views when a remote (dis)connected."""
        if connection:
            for name in remotes:
                # only once its instances are listed (the listing notifies again when it
                # lands): read beside the listing, the views slowed the first table down;
                # and only once its event stream is open (connected), or a change made
                # between this read and the stream's opening would stay in the cache
                status = self.inventory.statuses.get(name)
                if name in self.inventory.backends and status is not None and status.listed \
                        and status.state is ConnectionState.CONNECTED:
                    self._to_prefetch.add(name)
            # and a moment after no remote is still connecting: read beside the remotes
            # that connect last, the views' reads held those up, and keys typed then
            if self._to_prefetch and self._prefetch_timer is None and self._settled():
                self._prefetch_timer = self.set_timer(PREFETCH_AFTER, self._prefetch_waiting)
        spec = self.spec
        if spec is None or not self.is_shown:
            return
        if spec.name == "remotes":
            self.reload(None)
        elif spec.name == "operations" or connection:
            for name in remotes:
                self.reload(name)

    def _settled(self) -> bool:
        return not any(st.state is ConnectionState.CONNECTING
                       for st in self.inventory.statuses.values())

    def _prefetch_waiting(self) -> None:
        self._prefetch_timer = None
        if not self._settled():
            return  # (a remote reconnects: its connection starts the wait again)
        for name in sorted(self._to_prefetch):
            self.prefetch(name)
        self._to_prefetch.clear()

    @property
    def is_shown(self) -> bool:
        return self.is_mounted and self.display

    # Title, details ------------------------------------------------------------------

    def _changed(self) -> None:
        table, spec = self.table, self.spec
        if spec is None:
            return
        total, shown = len(table.items), len(table.shown)
        count = f"{shown}/{total}" if shown != total else f"{total}"
        where = f" of {self.parent_key}" if self.parent_key else ""
        marks = f" · {len(table.marked)} marked" if table.marked else ""
        table.border_title = fmt.external(f"{spec.title}{where} ({count}){marks}")
        problems = "; ".join(self.problems.values())
        table.border_subtitle = fmt.external(problems[:150] if problems else (
            f"sort: {table.sort_column} {'↑' if table.sort_reverse else '↓'}"))
        self._show_details()
        if self.on_title:
            self.on_title()

    def _show_details(self) -> None:
        box = self.query_one("#resource-details", Static)
        if not box.has_class("-visible"):
            return
        row = self.table.selected
        if row is None:
            box.update("")
            return
        lines = [f"{row.remote}:{row.name}" + (f"  (pool {row.parent})" if row.parent else "")]
        lines += [f"{k}: {val}" for k, val in row.cells if val]
        obj = row.obj
        if isinstance(obj, Resource):
            if obj.used_by:
                lines.append("used by: " + ", ".join(obj.used_by))
            lines += [f"  {k} = {val}" for k, val in sorted(obj.config.items())]
            for dev, conf in sorted(obj.devices.items()):
                lines.append(f"  device {dev}: " + ", ".join(f"{a}={b}" for a, b in
                                                               sorted(conf.items())))
        box.update(fmt.external("\n".join(lines), lines=True))

    @on(DataTable.RowHighlighted, ".resource-table")
    def _highlighted(self) -> None:
        self._show_details()
        self.screen.refresh_bindings()

    @on(DataTable.RowSelected, ".resource-table")
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if self.spec is not None and (self.spec.name, row_method("open")) in BY_VIEW:
            self.run_verb(row_method("open"))
        else:
            self.action_toggle_details()

    def action_reload_view(self) -> None:
        self.reload(None)

    def action_toggle_details(self) -> None:
        self.query_one("#resource-details").toggle_class("-visible")
        self._show_details()

    # Marks -------------------------------------------------------------------------

    def action_mark(self) -> None:
        self.table.toggle_mark()

    def action_mark_visible(self) -> None:
        self.table.mark_visible()

    def action_clear_marks(self) -> None:
        self.table.clear_marks()

    def set_filter(self, text: str) -> None:
        self._words = parse_filter(text)
        self.table.set_filter(self._words)

    # Verbs ---------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if not action.startswith("verb_"):
            return True
        spec = self.spec
        if spec is None or not self.is_shown:
            return False
        row = self.table.selected
        remote = row.remote if row else None
        caps = self.inventory.remote_capabilities(remote) if remote else frozenset().union(
            *(self.inventory.remote_capabilities(n) for n in self.inventory.backends))
        entry = BY_VIEW.get((spec.name, action))
        marks = bool(entry and entry.bulk and self.table.marked)  # acts on the marked rows
        return row_allowed(spec.name, action, caps, has_row=row is not None or marks,
                           read_only=bool(row and row.read_only) and not marks)

    def context(self) -> Context:
        """What a verb of the view shown acts on: its selected row and its marked rows."""
        assert self.spec is not None
        table = self.table
        return Context(
            app=self.app, inventory=self.inventory, view=self.spec.name, row=table.selected,
            parent=self.parent_key, marked_rows=tuple(table.marked_rows()),
            open_view=self._open_view, reload=self.reload, switch_project=self._switch_project,
            rows_of=lambda remote: [r for r in table.items.values() if r.remote == remote])

    def _open_view(self, name: str, parent: str, filter_text: str | None) -> None:
        self.post_message(self.OpenView(name, parent, filter_text))

    def opens(self, action: str) -> str | None:
        """(The key gate's) what the verb of ``action`` opens, as :meth:`run_verb` holds
        the keys typed after it."""
        spec = self.spec
        entry = BY_VIEW.get((spec.name, action)) if spec else None
        if spec is None or entry is None or entry.flow is None or \
                entry.background and not (entry.bulk and self.table.marked_rows()):
            return None
        return f"{entry.label} ({spec.name})"

    def run_verb(self, method: str) -> None:
        """Run the view's verb ``method`` (``verb_delete``) in a worker."""
        spec = self.spec
        entry = BY_VIEW.get((spec.name, method)) if spec else None
        if spec is None or entry is None or entry.flow is None:
            return
        ctx = self.context()
        if not entry.bulk:
            if ctx.marked_rows and entry.row and ctx.row is not None:
                ctx.notify(f"{entry.label} acts on one row at a time: on "
                           f"{ctx.row.remote}:{ctx.row.name} (the {len(ctx.marked_rows)} "
                           "marked are left as they are).")
            ctx.marked_rows = ()
        worker = self.run_worker(entry.flow(ctx), group=f"verb-{method}", exit_on_error=False,
                                 description=f"{spec.name} {method}")
        keys = getattr(self.app, "keys", None)
        if keys is not None and (not entry.background or (entry.bulk and ctx.marked_rows)):
            keys.hold(worker, f"{entry.label} ({spec.name})")  # keys typed next go there

    def _switch_project(self, remote: str, project: str) -> None:
        projects.switch(self.inventory, remote, project)
        self.app.notify(fmt.printable(f"{remote} is shown in project {project} (remembered)."))
        self._cache.clear()
        self.reload(remote)


def _affects(spec: ViewSpec, event: BackendEvent) -> bool:
    """Whether ``event`` changes what ``spec`` shows."""
    if event.kind is EventKind.OPERATION:
        return OPERATIONS in spec.events
    return event.kind is EventKind.LIFECYCLE and any(
        event.action.startswith(p) for p in spec.events if p != OPERATIONS)


def _verb_method(method: str):
    def run(self: ResourcePane) -> None:
        self.run_verb(method)
    run.__name__ = f"action_{method}"
    return run


for _method in {a.action for a in ACTIONS if a.scope is Scope.ROWS}:
    setattr(ResourcePane, f"action_{_method}", _verb_method(_method))
