"""The main screen: remotes pane, instance table, filter, details and console tabs.

It only composes: the layout, the key bindings and ``check_action`` generated from the
action table (``tui/actions.py``), and the dispatch that hands each action a
:class:`~tui.flows.context.Context` and runs its flow (``tui/flows/``). Inventory changes
arrive through :meth:`MainScreen.inventory_changed` and are coalesced into one repaint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Iterable, cast

from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.widgets import DataTable, Header, Input, Static
from textual.worker import Worker, WorkerState

from backends.errors import BackendError
from backends.models import ConnectionState, InstanceRef

from ..actions import ACTIONS, BY_METHOD, Action, Scope, bindings
from ..filter import PLACEHOLDER, Term
from ..flows import held
from ..flows.context import Context, Settings
from ..offer import availability, menu_actions, palette_entries, why_not
from ..services.inventory import Inventory
from ..services.status import RetryReports
from ..widgets.colors import theme_colors
from ..widgets.console_dock import ConsoleDock
from ..widgets.empty_state import EmptyState
from ..widgets.footer import FittingFooter
from ..widgets.details import DetailsPane, UsageHistory, update_if_changed
from ..widgets.instance_table import InstanceTable
from ..widgets.plain import Plain, PlainInput
from ..widgets.remote_list import RemoteList
from ..widgets.view_messages import ConsoleView
from ..views.command import CommandLine
from ..views.pane import ResourcePane
from ..views.switching import ViewSwitcher
from .console_actions import ConsoleActions
from .opening_keys import OpeningKeys
from .first_frame import FirstFrameScreen
from .dialogs import ActionsMenu
from .help import HelpScreen, key_rows

if TYPE_CHECKING:
    from ..app import CorralApp
    from ..commands import Entry


class MainScreen(ConsoleActions, OpeningKeys, FirstFrameScreen):
    """Every instance of every remote, live; ``:`` shows profiles, networks, … instead."""

    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    """Below 120 columns the remotes pane gives its room away; ``1`` brings it back."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *bindings(Scope.INSTANCE, Scope.REMOTE, Scope.VIEW, Scope.CONSOLE)]

    selected: reactive[InstanceRef | None] = reactive(None, bindings=True)
    """The instance the table's cursor is on (the footer follows it)."""

    def __init__(
        self,
        inventory: Inventory,
        *,
        problems: Iterable[str] = (),
        metrics_interval: float = 10.0,
        settings: Settings | None = None,
        record_dir: str = "",
        looked_in: Iterable[str] = (),
        config_path: str = "",
    ) -> None:
        super().__init__()
        self.empty = EmptyState(looked_in=looked_in, config_path=config_path, id="empty")
        self.settings = settings or Settings()
        self.record_dir = record_dir
        self.inventory = inventory
        self.first_frame = inventory.first_frame  # the backends of listed remotes wait
        self.problems = list(problems)
        self.metrics_interval = metrics_interval
        self.terms: list[Term] = []
        self.usage: dict[InstanceRef, UsageHistory] = {}
        """Recent usage per instance, for the details sparklines."""
        self._dirty: dict[str, set[InstanceRef] | None] = {}
        self._apply_scheduled = False
        self._filter_scheduled = False
        self._sample_soon_scheduled = False
        self._ready = False  # once mounted; changes before that are shown by on_mount
        self._bindings_key: tuple | None = None
        self.retries = RetryReports()
        self.views = ViewSwitcher(self)
        """The view shown: the instance table or a resource view (``:``)."""

    def compose(self) -> ComposeResult:
        yield Header()
        yield Plain("\n".join(self.problems), id="problems",
                     classes="-visible" if self.problems else "")
        with Horizontal(id="body"):
            with Vertical(id="remotes"):
                yield RemoteList(id="remote-list")
                yield Plain("", id="remote-info")
            with Vertical(id="main-column"):
                yield PlainInput(placeholder=PLACEHOLDER, id="filter")
                yield InstanceTable(id="instances")
                yield ResourcePane(self.inventory, id="resources")
                yield self.empty
                yield DetailsPane(self.inventory, id="details")
                yield ConsoleDock(id="consoles", detach_key=self.settings.detach_key,
                                  record_dir=self.record_dir)
        yield CommandLine(self.views.offered, id="command")
        yield Plain("", id="activity")
        yield FittingFooter()

    def on_mount(self) -> None:
        self.query_one("#remotes").border_title = "Remotes"
        table = self.query_one(InstanceTable)
        table.border_title = "Instances"
        table.on_sorted = lambda col, rev: self.update_titles()
        table.on_marks = self.views.marks_changed
        # focused now, not after the next refresh (focus()): from the first frame, or the
        # footer builds the keys of Textual's pick (the remotes list) first
        self.set_focus(table)
        self.query_one(RemoteList).sync(self.inventory)
        # The app started the remotes before this screen existed: show what already arrived.
        self._dirty = {name: None for name in self.inventory.remotes}
        self._apply_changes()
        self._ready = True
        self._sample_soon()
        self.set_timer(self.metrics_interval, self._sample_tick)
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)
        keys = getattr(self.app, "keys", None)
        if keys is not None:
            keys.open()  # keys typed since the start go now, the table focused first

    def _theme_changed(self, _theme: object) -> None:
        """Status colours are theme variables: re-render every row in the new colours."""
        self.query_one(InstanceTable).reload_colors()
        self.query_one(RemoteList).reload_colors()
        for name in self.inventory.remotes:
            self.inventory_changed(name, None)

    # Inventory -> widgets --------------------------------------------------------------

    def inventory_changed(self, remote: str, refs: set[InstanceRef] | None) -> None:
        """Called by the app for every inventory change; coalesced into one update."""
        if refs is None and (said := self.retries.changed(self.inventory.statuses[remote])):
            self.notify(said[0], severity=said[1], markup=False)  # type: ignore[arg-type]
        if remote in self._dirty and self._dirty[remote] is None:
            pass
        elif refs is None:
            self._dirty[remote] = None
        else:
            self._dirty.setdefault(remote, set())
            self._dirty[remote] |= refs  # type: ignore[operator]
        if not self._ready:
            return
        if refs is None:
            self._sample_soon()
        if not self._apply_scheduled:
            self._apply_scheduled = True
            self.call_next(self._apply_changes)

    def _apply_changes(self) -> None:
        self._apply_scheduled = False
        dirty, self._dirty = self._dirty, {}
        try:
            table = self.query_one(InstanceTable)
            remotes = self.query_one(RemoteList)
        except NoMatches:  # the screen is closing
            return
        candidates: set[InstanceRef] = set()
        for remote, refs in dirty.items():
            if refs is None:
                # a listing or a connection change: every row of the remote, gone ones too
                candidates |= {r for r in self.inventory.instances if r.remote == remote}
                candidates |= {r for r in table.refs.values() if r.remote == remote}
            else:
                candidates |= refs  # empty: only the remote's own state (operations)
        details = self.query_one(DetailsPane)
        for ref in candidates:
            details.instance_changed(ref)
            state = self.inventory.states.get(ref)
            if state is not None:
                self.usage.setdefault(ref, UsageHistory()).add(state)
        with self.app.batch_update():
            table.sync(self.inventory, self.terms, candidates)
            for remote in dirty:
                remotes.sync(self.inventory, remote)
        self.update_titles()
        self._update_details()
        self._update_remote_info()
        self._update_activity()
        self._refresh_bindings_if_needed()
        self.views.inventory_changed(dirty)

    def _refresh_bindings_if_needed(self) -> None:
        """Re-evaluate the footer keys only when what the selection allows changed (the
        footer is rebuilt on every refresh, which is not free)."""
        ref = self.selected = self.query_one(InstanceTable).selected_ref
        inst = self.inventory.instances.get(ref) if ref else None
        key = (ref, inst.status if inst else None, self.inventory.capabilities(ref)
               if ref else None)
        if key != self._bindings_key:
            self._bindings_key = key
            self.refresh_bindings()

    def update_titles(self) -> None:
        """The instance table's title (counts, marks) and sort; the empty table's words."""
        table = self.query_one(InstanceTable)
        total = len(self.inventory.instances)
        shown = table.row_count
        arrow = "↓" if not table.sort_reverse else "↑"
        count = f"{shown}/{total}" if self.terms else f"{total}"
        marks = f" · {len(table.marked)} marked" if table.marked else ""
        for attribute, text in (("border_title", f"Instances ({count}){marks}"),
                                ("border_subtitle", f"sort: {table.sort_column} {arrow}")):
            if getattr(table, attribute) != text:  # (each set repaints the border)
                setattr(table, attribute, text)
        self.empty.show(self.inventory, self.views.instance_filter_text(), table, shown)

    def _update_activity(self) -> None:
        parts = []
        for name, st in self.inventory.statuses.items():
            for op in st.operations.values():
                what = op.description + (f" {op.progress}" if op.progress else "")
                target = f" {', '.join(op.instances)}" if op.instances else ""
                parts.append(f"{name}:{target} {what}")
        parts += [f"{name}: {text}" for name, text in self.inventory.activity.items()]
        update_if_changed(self.query_one("#activity", Static), "  ·  ".join(parts))

    def _update_remote_info(self) -> None:
        error = theme_colors(self.app, ["error"])["error"] or "red"
        update_if_changed(self.query_one("#remote-info", Static),
                          self.query_one(RemoteList).info(self.inventory, error))

    # Details ---------------------------------------------------------------------------

    def _update_details(self) -> None:
        ref = self.query_one(InstanceTable).selected_ref
        self.query_one(DetailsPane).show_instance(ref, self.usage.get(ref) if ref else None)

    def action_show_snapshots(self) -> None:
        ref = self._selected()
        if ref is not None and not held.open_when_connected(
                self, ref, "show_snapshots", self.action_show_snapshots):
            self.query_one(DetailsPane).show_snapshots(ref, self.usage.get(ref))

    # Sampling (the only periodic work: usage of visible running rows) ------------------

    def _sample_soon(self) -> None:
        """Sample just after a listing, and again 2 s later: CPU % needs two samples."""
        if self._sample_soon_scheduled:
            return
        self._sample_soon_scheduled = True

        def first() -> None:
            self._sample_soon_scheduled = False
            self._sample(reschedule=False)

        self.set_timer(0.3, first)
        self.set_timer(2.3, lambda: self._sample(reschedule=False))

    def _sample_tick(self) -> None:
        self._sample(reschedule=True)

    def _sample(self, *, reschedule: bool) -> None:
        refs = self.query_one(InstanceTable).visible_refs()
        selected = self.query_one(InstanceTable).selected_ref
        if selected and selected not in refs:
            refs.append(selected)

        async def run() -> None:
            try:
                await self.inventory.sample_visible(refs)
            finally:
                if reschedule:
                    self.set_timer(self.metrics_interval, self._sample_tick)

        self.run_worker(run(), group="sample-tick" if reschedule else "sample-soon",
                        exclusive=False, exit_on_error=False, description="Sample usage")

    # Events from widgets ---------------------------------------------------------------

    @on(DataTable.RowHighlighted, "#instances")
    def _instance_highlighted(self) -> None:
        self.selected = self.query_one(InstanceTable).selected_ref
        self._update_details()
        self._refresh_bindings_if_needed()

    @on(DataTable.RowHighlighted, "#remote-list")
    def _remote_highlighted(self) -> None:
        self._update_remote_info()

    @on(DataTable.RowSelected, "#instances")
    def _instance_selected(self) -> None:
        self.action_toggle_details()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        """Once per burst of typed characters (each would sync every row again): after
        the changes already queued."""
        if not self._filter_scheduled:
            self._filter_scheduled = True
            self.call_later(self._apply_filter_once)

    def _apply_filter_once(self) -> None:
        self._filter_scheduled = False
        self.views.apply_filter()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self) -> None:
        self.views.focus_table()

    def on_command_line_chosen(self, event: CommandLine.Chosen) -> None:
        self.views.show(event.spec.name)

    def on_resource_pane_open_view(self, event: ResourcePane.OpenView) -> None:
        self.views.show(event.name, event.parent, event.filter_text)

    # Actions: generated from the action table ------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hidden (False) where the backend cannot, greyed (None) where the state forbids."""
        if isinstance(self.focused, ConsoleView):
            return False  # keys go to the console: the footer shows none of ours
        entry = BY_METHOD.get(action)
        if entry is None or not self.views.allows(entry):
            return entry is None
        try:
            tabs = bool(self.query_one(ConsoleDock).tabs)
            snapshots_of = self.query_one(DetailsPane).snapshots_of
        except NoMatches:
            return None
        ref = snapshots_of or self.selected if entry.scope is Scope.SNAPSHOT else self.selected
        if entry.scope is Scope.INSTANCE and ref is not None and (entry.flow or entry.opening) \
                and self.inventory.statuses[ref.remote].state is ConnectionState.CONNECTING:
            return True  # held until the remote connects (tui/flows/held.py)
        return True if self.views.marks_allow(entry) else \
            availability(entry, self.inventory, ref, consoles_open=tabs)

    def on_key(self, event) -> None:
        """A greyed-out instance key was pressed: say why instead of doing nothing."""
        active = self.active_bindings.get(event.key)
        entry = BY_METHOD.get(active.binding.action) if active else None
        if active is None or active.enabled or entry is None or entry.scope is not Scope.INSTANCE:
            return
        if self.selected is not None:
            self.notify(f"{active.binding.description} is not possible for {self.selected}: "
                        f"{why_not(self.inventory, self.selected)}.", severity="warning")
            event.stop()

    def _selected(self) -> InstanceRef | None:
        ref = self.query_one(InstanceTable).selected_ref
        if ref is None:
            self.notify("No instance selected.", severity="warning")
        return ref

    def context(self, action: Action, *, ref: InstanceRef | None = None,
                remote: str | None = None) -> Context | None:
        """What ``action`` acts on: the given or selected instance, remote or snapshot."""
        snapshot = None
        if action.scope is Scope.SNAPSHOT:
            snapshot = self.query_one(DetailsPane).selected_snapshot
            ref = ref or (snapshot.ref if snapshot else None) or \
                self.query_one(DetailsPane).snapshots_of or \
                self.query_one(InstanceTable).selected_ref
        elif action.scope is Scope.INSTANCE and ref is None:
            ref = self._selected()
            if ref is None:
                return None
        elif action.scope is Scope.REMOTE and remote is None:
            listed = self.query_one(RemoteList)  # acting in the remotes pane: its remote
            ref = ref or (None if listed.has_focus else
                          self.query_one(InstanceTable).selected_ref)
            remote = ref.remote if ref else listed.selected_remote
        if ref is not None and remote is None:
            remote = ref.remote
        pane = self.query_one(DetailsPane)
        names = pane.snapshot_names if ref and pane.snapshots_of == ref else frozenset()
        return Context(app=self.app, inventory=self.inventory, settings=self.settings,
                       ref=ref, remote=remote, consoles=self.query_one(ConsoleDock),
                       snapshot=snapshot, snapshot_names=names, details_changed=pane.reload,
                       marked=tuple(sorted(self.query_one(InstanceTable).marked)),
                       open_view=self.views.show)

    # Not Widget.run_action (an action string): Textual only calls the app's run_action.
    def run_action(self, action: Action, *,  # type: ignore[override]
                   ref: InstanceRef | None = None, remote: str | None = None) -> None:
        """Run ``action``'s flow in a worker (keys, the palette and the menu use this)."""
        ctx = self.context(action, ref=ref, remote=remote)
        if ctx is None or action.flow is None:
            return
        self.views.marks_note(action, ctx.marked, ctx.ref)
        target = ctx.ref or ctx.remote
        exclusive, group = bool(action.one_at_a_time), f"{action.one_at_a_time or 'action'}:{target}"
        flow = action.flow(ctx) if not held.connecting(ctx) else \
            held.when_connected(ctx, action, action.flow)
        worker = self.run_worker(flow, group=group, exclusive=exclusive,
                                 exit_on_error=False, description=f"{action.name} {target}")
        keys = getattr(self.app, "keys", None)
        if keys is not None and not action.background:
            keys.hold(worker, f"{action.label} {target}")  # keys typed next belong there

    def action_instance_actions(self) -> None:
        ref = self._selected()
        if ref is not None:
            self.open_actions(ref)

    def open_actions(self, ref: InstanceRef) -> None:
        if held.open_when_connected(self, ref, "instance_actions", lambda: self.open_actions(ref)):
            return
        status = self.inventory.statuses.get(ref.remote)
        if status is None or status.state is not ConnectionState.CONNECTED \
                or ref.remote not in self.inventory.backends:
            self.notify(f"Actions {ref}: {ref.remote} is "
                        f"{status.state.value if status else 'gone'}.", severity="warning")
            return
        ctx = self.context(BY_METHOD["instance_actions"], ref=ref)
        actions = menu_actions(ctx) if ctx else []
        if not actions:
            self.notify(f"{ref.remote} offers no more actions.", severity="warning")
            return
        by_name = {a.name: a for a in actions}

        def chosen(name: str | None) -> None:
            if name:
                self.run_action(by_name[name], ref=ref)

        self.app.push_screen(ActionsMenu(ref, [(a.name, a.label, a.help) for a in actions]),
                             chosen)

    def palette_commands(self) -> list[Entry]:
        """(text, help, callback, first) of every palette entry allowed now: the views and
        the action table's entries."""
        return [*self.views.palette_entries(), *palette_entries(
            self.inventory, self.run_action, self.open_actions,
            lambda name: getattr(self, f"action_{name}"))]

    def action_toggle_details(self) -> None:
        self.query_one(DetailsPane).toggle_class("-visible")
        self._update_details()

    def action_filter(self) -> None:
        self.query_one("#filter", Input).add_class("-visible").focus()

    def action_clear(self) -> None:
        box = self.query_one("#filter", Input)
        details = self.query_one(DetailsPane)
        if box.has_focus or (box.has_class("-visible") and not details.has_class("-visible")):
            box.value = ""
            box.remove_class("-visible")
            self.views.focus_table()
        elif details.has_class("-visible") and not self.views.in_resource_view:
            details.remove_class("-visible")
        else:
            self.views.back()

    def action_retry_remote(self) -> None:
        remotes = self.query_one(RemoteList)
        ref = self.query_one(InstanceTable).selected_ref
        name = remotes.selected_remote if remotes.has_focus or ref is None else ref.remote
        if name:
            self.inventory.retry(name)
            self.retries.asked(name)  # its outcome is said when the attempt ends
            self.notify(f"Reconnecting {name}…", markup=False)

    def action_refresh(self) -> None:
        async def list_again(name: str) -> None:
            try:
                await self.inventory.refresh(name)
            except BackendError as e:
                self.notify(e.message, title=f"Listing {name} failed", severity="error")

        for name in self.inventory.backends:
            self.run_worker(list_again(name), group=f"refresh:{name}", exclusive=True,
                            exit_on_error=False, description=f"List {name}")

    def action_focus_remotes(self) -> None:
        self.add_class("-show-remotes")
        self.query_one(RemoteList).focus()

    def action_focus_instances(self) -> None:
        self.remove_class("-show-remotes")
        self.query_one(InstanceTable).focus()

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(key_rows(self)))

    def action_command(self) -> None:
        self.query_one(CommandLine).open()

    def action_operations(self) -> None:
        self.views.show("operations")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Workers of this screen that fail unexpectedly are reported like the app's."""
        if event.state is WorkerState.ERROR:
            event.stop()
            cast("CorralApp", self.app).on_worker_state_changed(event)


def _flow_method(action: Action):
    def method(self: MainScreen) -> None:
        self.run_action(action)
    method.__name__ = f"action_{action.action}"
    method.__doc__ = action.help
    return method


_HAS = set(dir(MainScreen))  # (once: a dir() of the screen's whole MRO per action was ~10 ms)
for _name, _action in {f"action_{a.action}": a for a in reversed(ACTIONS) if a.flow}.items():
    if _name not in _HAS:  # (the first action of a name: reversed, it is written last)
        setattr(MainScreen, _name, _flow_method(_action))
