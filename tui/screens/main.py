"""The main screen: remotes pane, instance table, filter and details."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Static, TabbedContent

from backends.errors import BackendError, StopTimedOut, Unsupported
from backends.models import Capability, ConnectionState, InstanceRef, InstanceStatus

from .. import format as fmt
from ..commands import VERB_CAPABILITY
from ..filter import FilterError, Term, parse
from ..services.inventory import Inventory
from ..widgets.colors import theme_colors
from ..widgets.console_dock import KIND_LABEL, ConsoleDock
from ..widgets.details import DetailsPane, SnapshotTable, UsageHistory
from ..widgets.terminal import TerminalView
from ..widgets.instance_table import InstanceTable
from ..widgets.remote_list import RemoteList
from .dialogs import ConfirmDialog, InputDialog, SnapshotDialog, SpecialKeysMenu
from .actions import (
    ACTIONS,
    ActionsMenu,
    ChoiceDialog,
    ImagesScreen,
    NicScreen,
    OperationsScreen,
    PasswordDialog,
    default_backup_path,
)
from .limits import LimitsScreen
from .wizard import WizardResult, WizardScreen
from .help import HelpScreen, key_rows

def _update_if_changed(widget: Static, content: str | Text) -> None:
    """``Static.update`` re-lays out the screen, which repaints the whole table: skip it
    when nothing changed (this keeps idle CPU near zero)."""
    key = content.markup if isinstance(content, Text) else content
    if getattr(widget, "_corral_last", None) != key:
        widget._corral_last = key  # type: ignore[attr-defined]
        widget.update(content)


def _set_if_changed(widget, attribute: str, value: str | None) -> None:
    if getattr(widget, attribute) != value:
        setattr(widget, attribute, value)


# action name -> (capability needed, label while running)
_INSTANCE_ACTIONS = {
    "start_instance": VERB_CAPABILITY["start"],
    "stop_instance": VERB_CAPABILITY["stop"],
    "restart_instance": VERB_CAPABILITY["restart"],
    "pause_instance": None,  # freeze or unfreeze, decided by status
    "delete_instance": VERB_CAPABILITY["delete"],
    "open_console": Capability.CONSOLE,
    "open_shell": Capability.EXEC,
    "open_vga": Capability.VGA,
    "edit_limits": Capability.RESOURCES,
    "new_snapshot": Capability.SNAPSHOTS,
    "show_snapshots": Capability.SNAPSHOTS,
}
_CONSOLE_ACTIONS = {"focus_console", "zoom_console", "close_console", "next_console",
                    "previous_console", "special_keys"}
_PENDING = {
    "start": "starting…", "stop": "stopping…", "restart": "restarting…",
    "freeze": "pausing…", "unfreeze": "resuming…", "delete": "deleting…",
}


async def _true(work) -> bool:
    await work
    return True


async def _password(backend, ref: InstanceRef, user: str, password: str) -> bool:
    """Set a password; True when done (the password is passed on and not kept)."""
    await backend.set_password(ref, user, password)
    return True


class MainScreen(Screen[None]):
    """Every instance of every remote, live."""

    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    """Below 120 columns (a small SSH terminal) the remotes pane gives its room to the
    table and consoles; ``1`` brings it back."""

    BINDINGS = [
        Binding("S", "start_instance", "Start", id="instance.start",
                tooltip="Start the selected instance"),
        Binding("s", "stop_instance", "Stop", id="instance.stop",
                tooltip="Stop the selected instance (force is offered if it hangs)"),
        Binding("r", "restart_instance", "Restart", id="instance.restart",
                tooltip="Restart the selected instance"),
        Binding("p", "pause_instance", "Pause/Resume", id="instance.pause",
                tooltip="Pause (freeze) or resume the selected instance"),
        Binding("d", "delete_instance", "Delete", id="instance.delete",
                tooltip="Delete the selected instance (asks first)"),
        Binding("enter", "toggle_details", "Details", id="view.details",
                tooltip="Show or hide the details of the selected instance"),
        Binding("slash", "filter", "Filter", id="view.filter",
                tooltip="Filter: words, !negation, key=value (status, type, remote, ...)"),
        Binding("escape", "clear", "Clear", show=False, id="view.clear",
                tooltip="Close details / clear the filter"),
        Binding("R", "retry_remote", "Reconnect", show=False, id="remote.retry",
                tooltip="Reconnect the selected remote now"),
        Binding("ctrl+r", "refresh", "Refresh", show=False, id="view.refresh",
                tooltip="List every connected remote again"),
        Binding("1", "focus_remotes", "Remotes", show=False, id="view.remotes",
                tooltip="Focus the remotes pane"),
        Binding("2", "focus_instances", "Instances", show=False, id="view.instances",
                tooltip="Focus the instance table"),
        Binding("N", "new_instance", "New", id="instance.new",
                tooltip="Create an instance (launch wizard)"),
        Binding("a", "instance_actions", "Actions", id="instance.actions",
                tooltip="Backup, clone, copy/move, publish, password, NICs, rename, …"),
        Binding("w", "operations", "Operations", show=False, id="view.operations",
                tooltip="Running and recent operations of every remote (cancel with x)"),
        Binding("L", "edit_limits", "Limits", id="instance.limits",
                tooltip="Change CPU, memory, disk, IO and network limits (says live/restart)"),
        Binding("n", "new_snapshot", "Snapshot", id="snapshot.new",
                tooltip="Take a snapshot of the selected instance"),
        Binding("i", "show_snapshots", "Snapshots", show=False, id="snapshot.list",
                tooltip="Show the snapshots of the selected instance"),
        Binding("c", "open_console", "Console", id="console.open",
                tooltip="Attach to the console of the selected instance (serial, /dev/console)"),
        Binding("e", "open_shell", "Shell", id="console.shell",
                tooltip="Open a shell inside the selected instance"),
        Binding("v", "open_vga", "VGA", show=False, id="console.vga",
                tooltip="Show the VGA text screen of the selected VM (BIOS, boot loader)"),
        Binding("t", "focus_console", "To console", show=False, id="console.focus",
                tooltip="Go back into the current console tab"),
        Binding("z", "zoom_console", "Zoom", show=False, id="console.zoom",
                tooltip="Consoles full screen, or beside the table again"),
        Binding("x", "close_console", "Close tab", show=False, id="console.close",
                tooltip="Close the current console tab (local consoles keep running)"),
        Binding("right_square_bracket", "next_console", "Next tab", show=False,
                id="console.next", tooltip="Next console tab"),
        Binding("left_square_bracket", "previous_console", "Previous tab", show=False,
                id="console.previous", tooltip="Previous console tab"),
        Binding("K", "special_keys", "Special keys", show=False, id="console.keys",
                tooltip="Send Ctrl+Alt+Del, Ctrl+Alt+Fn, SysRq, Esc, ... to the console"),
    ]

    def __init__(
        self,
        inventory: Inventory,
        *,
        problems: Iterable[str] = (),
        metrics_interval: float = 10.0,
        stop_timeout: int = 30,
        detach_key: str = "ctrl+right_square_bracket",
        shell: tuple[str, ...] = (),
        record_dir: str = "",
    ) -> None:
        super().__init__()
        self.detach_key = detach_key
        self.shell = list(shell)
        self.record_dir = record_dir
        self.inventory = inventory
        self.problems = list(problems)
        self.metrics_interval = metrics_interval
        self.stop_timeout = stop_timeout
        self.terms: list[Term] = []
        self.usage: dict[InstanceRef, UsageHistory] = {}
        """Recent usage per instance, for the details sparklines."""
        self._snapshots_of: InstanceRef | None = None
        self._snapshot_count_shown: int | None = None
        self._limits: dict[InstanceRef, list] = {}
        self._limits_of: InstanceRef | None = None
        self._limits_seen: dict[InstanceRef, object] = {}
        self._dirty: dict[str, set[InstanceRef] | None] = {}
        self._apply_scheduled = False
        self._sample_soon_scheduled = False
        self._ready = False
        self._bindings_key: tuple | None = None
        """Set once mounted; changes before that are shown by on_mount in one go."""

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("\n".join(self.problems), id="problems",
                     classes="-visible" if self.problems else "")
        with Horizontal(id="body"):
            with Vertical(id="remotes"):
                yield RemoteList(id="remote-list")
                yield Static("", id="remote-info")
            with Vertical(id="main-column"):
                yield Input(placeholder="filter: words, !not, status=running type=vm remote=…",
                            id="filter")
                yield InstanceTable(id="instances")
                yield DetailsPane(id="details")
                yield ConsoleDock(id="consoles", detach_key=self.detach_key,
                                  record_dir=self.record_dir)
        yield Static("", id="activity")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#remotes").border_title = "Remotes"
        table = self.query_one(InstanceTable)
        table.border_title = "Instances"
        table.on_sorted = lambda col, rev: self._update_titles()
        table.focus()
        self.query_one(RemoteList).sync(self.inventory)
        # The app started the remotes before this screen existed: show what already arrived.
        self._dirty = {name: None for name in self.inventory.remotes}
        self._apply_changes()
        self._ready = True
        self._sample_soon()
        self.set_timer(self.metrics_interval, self._sample_tick)
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)

    def _theme_changed(self, _theme: object) -> None:
        """Status colours are theme variables: re-render every row in the new colours."""
        self.query_one(InstanceTable).reload_colors()
        self.query_one(RemoteList).reload_colors()
        for name in self.inventory.remotes:
            self.inventory_changed(name, None)

    # Inventory -> widgets --------------------------------------------------------------

    def inventory_changed(self, remote: str, refs: set[InstanceRef] | None) -> None:
        """Called by the app for every inventory change; coalesced into one update."""
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
                # a listing or a connection change: every row of the remote, including
                # rows that vanished
                candidates |= {r for r in self.inventory.instances if r.remote == remote}
                candidates |= {r for r in table.refs.values() if r.remote == remote}
            else:
                candidates |= refs  # empty: only the remote's own state (operations)
        for ref in candidates:
            if ref in self._limits and ref in self.inventory.instances and \
                    self.inventory.instances[ref] is not self._limits_seen.get(ref):
                self._limits.pop(ref, None)  # the instance changed: read its limits again
                self._limits_of = None
            state = self.inventory.states.get(ref)
            if state is not None:
                self.usage.setdefault(ref, UsageHistory()).add(state)
        with self.app.batch_update():
            table.sync(self.inventory, self.terms, candidates)
            for remote in dirty:
                remotes.sync(self.inventory, remote)
        self._update_titles()
        self._update_details()
        self._update_remote_info()
        self._update_activity()
        self._refresh_bindings_if_needed()

    def _refresh_bindings_if_needed(self) -> None:
        """Re-evaluate the footer keys only when what the selection allows changed (the
        footer is rebuilt on every refresh, which is not free)."""
        ref = self.query_one(InstanceTable).selected_ref
        inst = self.inventory.instances.get(ref) if ref else None
        key = (ref, inst.status if inst else None, self.inventory.capabilities(ref)
               if ref else None)
        if key != self._bindings_key:
            self._bindings_key = key
            self.refresh_bindings()

    def _update_titles(self) -> None:
        table = self.query_one(InstanceTable)
        total = len(self.inventory.instances)
        shown = table.row_count
        arrow = "↓" if not table.sort_reverse else "↑"
        count = f"{shown}/{total}" if self.terms else f"{total}"
        _set_if_changed(table, "border_title", f"Instances ({count})")
        _set_if_changed(table, "border_subtitle", f"sort: {table.sort_column} {arrow}")

    def _update_activity(self) -> None:
        parts = []
        for name, st in self.inventory.statuses.items():
            for op in st.operations.values():
                what = op.description + (f" {op.progress}" if op.progress else "")
                target = f" {', '.join(op.instances)}" if op.instances else ""
                parts.append(f"{name}:{target} {what}")
        _update_if_changed(self.query_one("#activity", Static), "  ·  ".join(parts))

    def _update_remote_info(self) -> None:
        name = self.query_one(RemoteList).selected_remote
        info = self.query_one("#remote-info", Static)
        if name is None or name not in self.inventory.statuses:
            _update_if_changed(info, "")
            return
        st = self.inventory.statuses[name]
        text = Text()
        text.append(name, style="bold")
        text.append(f"  {st.remote.address}\n")
        if st.server:
            text.append(f"{st.server.server} {st.server.version}")
            if st.remote.project != "default":
                text.append(f" · project {st.remote.project}")
            text.append("\n")
        if st.remote.read_only:
            text.append("read-only\n")
        if st.message:
            text.append(st.message, style=theme_colors(self.app, ["error"])["error"] or "red")
        _update_if_changed(info, text)

    def _limits_line(self, inst) -> str:
        fields = self._limits.get(inst.ref)
        if fields is None:
            backend = self.inventory.backends.get(inst.ref.remote)
            if hasattr(backend, "get_limits") and self._limits_of != inst.ref:
                self._limits_of = inst.ref
                self.load_limits(inst.ref)
            return (f"cpu {inst.cpu_limit or 'unlimited'}, memory "
                    f"{fmt.size(inst.memory_limit) if inst.memory_limit else 'unlimited'}")
        parts = []
        for f in fields:
            if f.applies == "unsupported" or not (f.value or f.pending):
                continue
            part = f"{f.label.lower()} {f.value or 'none'}"
            if f.pending:
                part += f" → {f.pending} at next start"
            parts.append(part)
        return ", ".join(parts) or "none set"

    @work(exclusive=True, group="limits-load", exit_on_error=False)
    async def load_limits(self, ref: InstanceRef) -> None:
        backend = self.inventory.backends.get(ref.remote)
        try:
            self._limits[ref] = await backend.get_limits(ref)
            self._limits_seen[ref] = self.inventory.instances.get(ref)
        except BackendError:
            return
        self._update_details()

    def _update_details(self) -> None:
        pane = self.query_one(DetailsPane)
        if not pane.has_class("-visible"):
            return
        details = self.query_one("#details-overview", Static)
        ref = self.query_one(InstanceTable).selected_ref
        inst = self.inventory.instances.get(ref) if ref else None
        if inst is None:
            _update_if_changed(details, "No instance selected.")
            pane.show_usage(None)
            return
        state = self.inventory.states.get(inst.ref)
        rows = [
            ("Instance", f"{inst.ref}  ({inst.type.value}, project {inst.ref.project})"),
            ("Status", self.inventory.pending.get(inst.ref) or inst.status.value),
            ("Image", inst.image or "—"),
            ("Created", f"{inst.created_at:%Y-%m-%d %H:%M} ({fmt.ago(inst.created_at)})"
             if inst.created_at else "—"),
            ("Profiles", ", ".join(inst.profiles) or "—"),
            ("Limits", self._limits_line(inst)),
            ("Snapshots", "…" if inst.snapshot_count is None else str(inst.snapshot_count)),
        ]
        if "autostart" in inst.extra:
            rows.append(("Autostart", "yes" if inst.extra["autostart"] else "no"))
        if inst.extra.get("reason"):
            rows.append(("Note", str(inst.extra["reason"])))
        if state:
            rows += [
                ("PID", str(state.pid) if state.pid else "—"),
                ("Addresses", ", ".join(state.ipv4 + state.ipv6) or "—"),
                ("Usage", f"cpu {fmt.cpu(state) or '…'}, memory {fmt.memory(state, inst.memory_limit)}"
                 f", disk {fmt.disk(state) or '—'}, {state.processes or 0} processes"),
                ("Network", f"rx {fmt.size(state.rx_bytes)}, tx {fmt.size(state.tx_bytes)}"),
            ]
        if inst.description:
            rows.append(("Description", inst.description))
        text = Text()
        for label, value in rows:
            text.append(f"{label:>10}  ", style="bold")
            text.append(f"{value}\n")
        _set_if_changed(pane, "border_title", f"Details: {inst.ref}")
        _update_if_changed(details, text)
        pane.show_usage(self.usage.get(inst.ref))
        _update_if_changed(pane.query_one("#details-config", Static),
                           pane.show_config(dict(inst.config),
                                            dict(inst.extra.get("devices") or {})))
        _update_if_changed(pane.query_one("#details-events", Static),
                           pane.events_text(self.inventory.history.get(inst.ref)))
        if pane.snapshots_active and (self._snapshots_of != inst.ref
                                      or inst.snapshot_count != self._snapshot_count_shown):
            self.load_snapshots(inst.ref)

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
        box = self.query_one("#filter", Input)
        try:
            self.terms = parse(event.value)
        except FilterError as e:
            box.add_class("-invalid")
            box.border_title = str(e)
            return
        box.remove_class("-invalid")
        box.border_title = None
        self.query_one(InstanceTable).sync(self.inventory, self.terms, None)
        self._update_titles()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self) -> None:
        self.query_one(InstanceTable).focus()

    # Actions ---------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if isinstance(self.focused, TerminalView):
            return False  # keys go to the console: the footer shows none of ours
        if action in _CONSOLE_ACTIONS:
            try:
                return True if self.query_one(ConsoleDock).tabs else None
            except NoMatches:
                return None
        if action not in _INSTANCE_ACTIONS:
            return True
        ref = self.query_one(InstanceTable).selected_ref
        if ref is None:
            return None
        backend = self.inventory.backends.get(ref.remote)
        caps = self.inventory.capabilities(ref)
        needed = _INSTANCE_ACTIONS[action]
        if needed is None:
            if backend is not None and Capability.FREEZE not in backend.capabilities:
                return False
            return True if {Capability.FREEZE, Capability.UNFREEZE} & caps else None
        if backend is not None and needed not in backend.capabilities:
            return False
        return True if needed in caps else None

    def on_key(self, event) -> None:
        """A greyed-out instance key was pressed: say why instead of doing nothing."""
        active = self.active_bindings.get(event.key)
        if active is None or active.enabled or active.binding.action not in _INSTANCE_ACTIONS:
            return
        ref = self.query_one(InstanceTable).selected_ref
        if ref is None:
            return
        inst = self.inventory.instances.get(ref)
        status = self.inventory.statuses[ref.remote]
        if status.remote.read_only:
            why = f"remote {ref.remote} is read-only"
        elif status.state.value != "connected":
            why = f"remote {ref.remote} is {status.state.value}"
        elif ref in self.inventory.pending:
            why = f"it is {self.inventory.pending[ref]}"
        else:
            why = f"it is {inst.status.value}" if inst else "it is gone"
        self.notify(f"{active.binding.description} is not possible for {ref}: {why}.",
                    severity="warning")
        event.stop()

    def _selected(self) -> InstanceRef | None:
        ref = self.query_one(InstanceTable).selected_ref
        if ref is None:
            self.notify("No instance selected.", severity="warning")
        return ref

    def run_verb(self, ref: InstanceRef, verb: str) -> None:
        """Run a lifecycle verb on an instance (keys and the command palette use this)."""
        caps = self.inventory.capabilities(ref)
        needed = VERB_CAPABILITY[verb]
        if needed not in caps:
            inst = self.inventory.instances.get(ref)
            state = self.inventory.pending.get(ref) or (inst.status.value if inst else "gone")
            self.notify(f"Cannot {verb} {ref} now ({state}).", severity="warning")
            return
        self.run_worker(self._run_verb(ref, verb), group=f"op:{ref}", exclusive=True,
                        exit_on_error=False, description=f"{verb} {ref}")

    async def _run_verb(self, ref: InstanceRef, verb: str) -> None:
        inv = self.inventory
        try:
            if verb == "delete":
                await self._delete(ref)
            elif verb in ("stop", "restart"):
                try:
                    await inv.act(ref, verb, _PENDING[verb], timeout=self.stop_timeout)
                except StopTimedOut as e:
                    label = "Force stop" if verb == "stop" else "Force restart"
                    if await self.app.push_screen_wait(
                        ConfirmDialog(f"{label} {ref}?", e.message, label)
                    ):
                        await inv.act(ref, verb, _PENDING[verb], force=True)
            else:
                await inv.act(ref, verb, _PENDING[verb])
        except BackendError as e:
            self.notify(e.message, title=f"{verb.capitalize()} {ref}: {e.title}",
                        severity="error", timeout=10)

    async def _delete(self, ref: InstanceRef) -> None:
        inst = self.inventory.instances.get(ref)
        if inst is None:
            return
        running = inst.status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN)
        what = "virtual machine" if inst.type.value == "vm" else "container"
        message = f"The {what} {inst.name} on remote {ref.remote} will be deleted"
        message += " with its snapshots. This cannot be undone." if inst.snapshot_count else \
            ". This cannot be undone."
        if running:
            message += f"\n\nIt is {inst.status.value}: it will be stopped by force first."
        confirmed = await self.app.push_screen_wait(
            ConfirmDialog(f"Delete {ref}?", message,
                          "Stop and delete" if running else "Delete")
        )
        if confirmed:
            await self.inventory.act(ref, "delete", _PENDING["delete"], force=running)
            self.notify(f"Deleted {ref}.")

    def action_start_instance(self) -> None:
        if ref := self._selected():
            self.run_verb(ref, "start")

    def action_stop_instance(self) -> None:
        if ref := self._selected():
            self.run_verb(ref, "stop")

    def action_restart_instance(self) -> None:
        if ref := self._selected():
            self.run_verb(ref, "restart")

    def action_pause_instance(self) -> None:
        if ref := self._selected():
            inst = self.inventory.instances.get(ref)
            frozen = inst is not None and inst.status is InstanceStatus.FROZEN
            self.run_verb(ref, "unfreeze" if frozen else "freeze")

    def action_delete_instance(self) -> None:
        if ref := self._selected():
            self.run_verb(ref, "delete")

    def action_toggle_details(self) -> None:
        details = self.query_one(DetailsPane)
        details.toggle_class("-visible")
        self._update_details()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("-visible")
        box.focus()

    def action_clear(self) -> None:
        box = self.query_one("#filter", Input)
        details = self.query_one(DetailsPane)
        if box.has_focus or (box.has_class("-visible") and not details.has_class("-visible")):
            box.value = ""
            box.remove_class("-visible")
            self.query_one(InstanceTable).focus()
        elif details.has_class("-visible"):
            details.remove_class("-visible")

    def action_retry_remote(self) -> None:
        remotes = self.query_one(RemoteList)
        ref = self.query_one(InstanceTable).selected_ref
        name = remotes.selected_remote if remotes.has_focus or ref is None else ref.remote
        if name:
            self.inventory.retry(name)
            self.notify(f"Reconnecting {name}…")

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

    def on_worker_state_changed(self, event) -> None:
        """Workers of this screen that fail unexpectedly are reported like the app's."""
        from textual.worker import WorkerState

        if event.state is WorkerState.ERROR:
            event.stop()
            self.app.on_worker_state_changed(event)

    # Lifecycle actions (menu "a") ------------------------------------------------------

    def action_operations(self) -> None:
        self.app.push_screen(OperationsScreen(self))

    def run_remote_action(self, remote: str, key: str) -> None:
        """An action on a remote rather than one instance (palette: import, images)."""
        backend = self.inventory.backends.get(remote)
        if backend is None:
            return
        self.run_worker(self._instance_action(key, InstanceRef(remote, ""), backend),
                        exit_on_error=False, description=f"{key} on {remote}")

    def action_instance_actions(self) -> None:
        ref = self._selected()
        if ref is not None:
            self.open_actions(ref)

    def open_actions(self, ref: InstanceRef) -> None:
        backend = self.inventory.backends.get(ref.remote)
        status = self.inventory.statuses.get(ref.remote)
        if backend is None or status is None or status.state is not ConnectionState.CONNECTED:
            self.notify(f"Remote {ref.remote} is not connected.", severity="warning")
            return
        read_only = status.remote.read_only
        actions = [a for a in ACTIONS if hasattr(backend, a.needs)
                   and (not read_only or a.key in ("export", "images"))]
        if any(a.key in ("copy", "move") for a in actions) and not self._copy_targets(ref):
            actions = [a for a in actions if a.key not in ("copy", "move")]
        if not actions:
            self.notify(f"{ref.remote} offers no more actions.", severity="warning")
            return

        def chosen(key: str | None) -> None:
            if key:
                self.run_worker(self._instance_action(key, ref, backend),
                                group=f"action:{ref}", exit_on_error=False,
                                description=f"{key} {ref}")

        self.app.push_screen(ActionsMenu(ref, actions), chosen)

    def _copy_targets(self, ref: InstanceRef) -> dict:
        return {name: b for name, b in self.inventory.backends.items()
                if name != ref.remote and hasattr(b, "copy_to")
                and not self.inventory.statuses[name].remote.read_only
                and self.inventory.statuses[name].state is ConnectionState.CONNECTED}

    async def _long(self, ref: InstanceRef, label: str, make) -> object | None:
        """Run ``make(progress)`` showing ``label`` and its progress on the row; report a
        failure in words. Returns the result, or None after a failure."""
        inv = self.inventory

        def progress(text: str) -> None:
            inv.pending[ref] = f"{label} {text}"
            inv._notify(ref.remote, {ref})

        try:
            return await inv.track(ref, label, make(progress))
        except BackendError as e:
            self.notify(e.message, title=f"{label.rstrip('…').capitalize()} {ref}: {e.title}",
                        severity="error", timeout=12)
            return None

    async def _remote_job(self, remote: str, label: str, make) -> object | None:
        """Like :meth:`_long` for work that belongs to a remote, not to an instance row:
        progress goes to the activity line."""
        activity = self.query_one("#activity", Static)

        def progress(text: str) -> None:
            _update_if_changed(activity, f"{remote}: {label} {text}")

        progress("")
        try:
            return await make(progress)
        except BackendError as e:
            self.notify(e.message, title=f"{label.rstrip('…').capitalize()}: {e.title}",
                        severity="error", timeout=12)
            return None
        finally:
            self._update_activity()

    async def _instance_action(self, key: str, ref: InstanceRef, backend) -> None:
        app = self.app
        inst = self.inventory.instances.get(ref)
        running = inst is not None and inst.status in (InstanceStatus.RUNNING,
                                                       InstanceStatus.FROZEN)

        def name_check(value: str) -> str | None:
            value = value.strip()
            if not value:
                return "A name is needed."
            if hasattr(backend, "check_name"):
                return backend.check_name(value)
            return None

        if key == "export":
            extension = ".tar.gz" if ref.remote not in ("qemu",) else ".tar"
            path = await app.push_screen_wait(InputDialog(
                f"Export {ref}", "Backup file to write (with the instance's snapshots)",
                default_backup_path(ref, extension), confirm="Export",
                check=lambda v: "That file exists." if os.path.exists(os.path.expanduser(
                    v.strip())) else (None if v.strip() else "A path is needed.")))
            if not path:
                return
            which = await app.push_screen_wait(ChoiceDialog(
                f"Export {ref}", [("with", "With its snapshots"),
                                  ("without", "The instance only (no snapshots)")]))
            if not which:
                return
            path = os.path.expanduser(path)
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            size = await self._long(ref, "exporting…", lambda p: backend.export_instance(
                ref, path, with_snapshots=which == "with", progress=p))
            if size is not None:
                self.notify(f"Exported {ref} to {path} ({fmt.size(int(size))}).")
        elif key == "import":
            path = await app.push_screen_wait(InputDialog(
                f"Import a backup onto {ref.remote}", "Backup file", "",
                confirm="Next", check=lambda v: None if os.path.isfile(
                    os.path.expanduser(v.strip())) else "No such file."))
            if not path:
                return
            name = await app.push_screen_wait(InputDialog(
                f"Import onto {ref.remote}", "Name of the new instance",
                Path(path).name.split(".")[0].split("-")[0], confirm="Import",
                check=name_check))
            if not name:
                return
            made = await self._remote_job(ref.remote, f"importing {name}…",
                                          lambda p: backend.import_instance(
                                              os.path.expanduser(path), name, progress=p))
            if made is not None:
                self.notify(f"Imported {made.ref}.")
                self.inventory._schedule_refresh(ref.remote)
        elif key == "clone":
            name = await app.push_screen_wait(InputDialog(
                f"Clone {ref}", "Name of the copy", f"{ref.name}-copy", confirm="Clone",
                check=name_check))
            if not name:
                return
            import inspect

            choices = [("full", "Full copy with its snapshots"),
                       ("bare", "Full copy without snapshots")]
            if "linked" in inspect.signature(backend.clone_instance).parameters:
                choices.append(("linked", "Linked clone (shares the source's disk; fast, "
                                          "small — the source can then not be changed or "
                                          "deleted)"))
            how = await app.push_screen_wait(ChoiceDialog(f"Clone {ref} as {name}", choices))
            if not how:
                return
            kwargs: dict = {"with_snapshots": how == "full"}
            if how == "linked":
                kwargs = {"linked": True}
            made = await self._long(ref, "cloning…", lambda p: backend.clone_instance(
                ref, name, progress=p, **kwargs))
            if made is not None:
                self.notify(f"Cloned {ref} to {made.ref}.")
                self.inventory._schedule_refresh(ref.remote)
        elif key in ("copy", "move"):
            targets = self._copy_targets(ref)
            target = await app.push_screen_wait(ChoiceDialog(
                f"{key.capitalize()} {ref} to", [(n, f"{n} ({b.remote.kind})")
                                                  for n, b in targets.items()]))
            if not target:
                return
            target_backend = targets[target]
            name = await app.push_screen_wait(InputDialog(
                f"{key.capitalize()} {ref} to {target}", "Name there", ref.name,
                confirm=key.capitalize(), check=lambda v: (
                    target_backend.check_name(v.strip()) if hasattr(
                        target_backend, "check_name") else None)))
            if not name:
                return
            if running:
                if not await app.push_screen_wait(ConfirmDialog(
                        f"Stop {ref} first?", f"{ref} is {inst.status.value}; it is copied "
                        f"stopped (cold). Stop it now and {key} it?", f"Stop and {key}")):
                    return
                try:
                    await self.inventory.act(ref, "stop", "stopping…",
                                             timeout=self.stop_timeout)
                except BackendError as e:
                    self.notify(e.message, title=f"Stop {ref}", severity="error")
                    return
            made = await self._long(ref, "copying…" if key == "copy" else "moving…",
                                    lambda p: backend.copy_to(ref, target_backend, name,
                                                              move=key == "move", progress=p))
            if made is not None:
                self.notify(f"{'Copied' if key == 'copy' else 'Moved'} {ref} to {made.ref}.")
                self.inventory._schedule_refresh(target)
                self.inventory._schedule_refresh(ref.remote)
        elif key == "publish":
            alias = await app.push_screen_wait(InputDialog(
                f"Publish {ref} as an image", "Alias of the new image",
                f"{ref.name}-image", confirm="Next"))
            if not alias:
                return
            public = await app.push_screen_wait(ChoiceDialog(
                f"Publish {ref} as {alias}", [("private", "Private (trusted clients only)"),
                                              ("public", "Public (anyone who can reach it)")]))
            if not public:
                return
            fingerprint = await self._long(ref, "publishing…", lambda p: backend.publish_image(
                ref, alias=alias, public=public == "public", progress=p))
            if fingerprint is not None:
                self.notify(f"Published {ref} as image {alias} ({str(fingerprint)[:12]}).")
        elif key == "password":
            answer = await app.push_screen_wait(PasswordDialog(ref))
            if not answer:
                return
            user, password = answer
            done = await self._long(ref, "setting password…",
                                    lambda p: _password(backend, ref, user, password))
            del password, answer
            if done is not None:
                self.notify(f"Password of {user} in {ref} changed.")
        elif key == "nics":
            app.push_screen(NicScreen(self, backend, ref))
        elif key == "rename":
            name = await app.push_screen_wait(InputDialog(
                f"Rename {ref}", "New name", ref.name, confirm="Rename", check=name_check))
            if not name or name == ref.name:
                return
            made = await self._long(ref, "renaming…",
                                    lambda p: backend.rename_instance(ref, name))
            if made is not None:
                self.notify(f"Renamed {ref} to {name}.")
                self.inventory._schedule_refresh(ref.remote)
        elif key == "description":
            text = await app.push_screen_wait(InputDialog(
                f"Description of {ref}", "Notes", inst.description if inst else "",
                confirm="Save", check=lambda v: None))
            if text is None:
                return
            if await self._long(ref, "saving…", lambda p: _true(backend.set_description(
                    ref, text))):
                self.notify(f"Description of {ref} saved.")
        elif key == "images":
            app.push_screen(ImagesScreen(backend, ref.remote))

    # Creating -------------------------------------------------------------------------

    def action_new_instance(self) -> None:
        backends = {}
        for name, backend in self.inventory.backends.items():
            status = self.inventory.statuses[name]
            if (hasattr(backend, "create_instance") and not status.remote.read_only
                    and status.state is ConnectionState.CONNECTED):
                backends[name] = backend
        if not backends:
            self.notify("No connected, writable remote can create instances.",
                        severity="warning")
            return
        ref = self.query_one(InstanceTable).selected_ref
        preferred = ref.remote if ref else self.query_one(RemoteList).selected_remote

        def done(result: WizardResult | None) -> None:
            if result is None:
                return
            inst = result.instance
            self.notify(f"Created {inst.ref} ({inst.status.value}).")
            self.inventory._schedule_refresh(inst.ref.remote)
            if result.open_console:
                self.open_console(inst.ref, "console")

        self.app.push_screen(WizardScreen(backends, preferred=preferred), done)

    # Limits and snapshots -------------------------------------------------------------

    def action_edit_limits(self) -> None:
        ref = self._selected()
        if ref is None:
            return
        backend = self.inventory.backends.get(ref.remote)
        if backend is None or not hasattr(backend, "get_limits"):
            self.notify(f"{ref.remote} cannot change limits.", severity="warning")
            return

        def done(result: dict[str, str] | None) -> None:
            if not result:
                return
            live = [k for k, v in result.items() if v == "live"]
            later = [k for k, v in result.items() if v != "live"]
            message = ", ".join(live) + " applied live" if live else ""
            if later:
                message += ("; " if message else "") + ", ".join(later) + \
                    " saved: applies at the next start"
            self.notify(message or "Nothing changed.", title=f"Limits of {ref}")
            self.inventory._schedule_fetch(ref)

        self.app.push_screen(LimitsScreen(backend, ref), done)

    def _snapshot_backend(self, ref: InstanceRef):
        backend = self.inventory.backends.get(ref.remote)
        if backend is None or not hasattr(backend, "list_snapshots"):
            self.notify(f"{ref.remote} has no snapshots.", severity="warning")
            return None
        return backend

    def action_show_snapshots(self) -> None:
        ref = self._selected()
        if ref is None:
            return
        pane = self.query_one(DetailsPane)
        pane.add_class("-visible")
        pane.query_one(TabbedContent).active = "tab-snapshots"
        self._snapshots_of = None
        self._update_details()
        pane.query_one(SnapshotTable).focus()

    @work(exclusive=True, group="snapshots-load", exit_on_error=False)
    async def load_snapshots(self, ref: InstanceRef) -> None:
        backend = self._snapshot_backend(ref)
        if backend is None:
            return
        pane = self.query_one(DetailsPane)
        note = pane.query_one("#snapshot-note", Static)
        table = pane.query_one(SnapshotTable)
        if self._snapshots_of != ref:
            table.show([])  # never show one instance's snapshots under another's name
            note.update(f"Reading the snapshots of {ref}…")
        self._snapshots_of = ref
        inst = self.inventory.instances.get(ref)
        self._snapshot_count_shown = inst.snapshot_count if inst else None
        try:
            snapshots = await backend.list_snapshots(ref)
        except BackendError as e:
            table.show([])
            note.update(f"Cannot list the snapshots of {ref}: {e.message}")
            return
        if self._snapshots_of != ref:
            return
        table.show(snapshots)
        text = f"{len(snapshots)} snapshot(s) · n new · enter restore · d delete"
        if hasattr(backend, "rename_snapshot"):
            text += " · m rename"
        if hasattr(backend, "snapshot_settings"):
            try:
                settings = await backend.snapshot_settings(ref)
            except BackendError:
                settings = {}
            schedule = settings.get("snapshots.schedule") or "none"
            expiry = settings.get("snapshots.expiry") or "never"
            text += f" · schedule {schedule}, expiry {expiry} (e to edit)"
        note.update(text)

    def action_new_snapshot(self) -> None:
        ref = self._selected()
        backend = self._snapshot_backend(ref) if ref else None
        if backend is None:
            return
        import inspect
        from datetime import datetime, timedelta, timezone

        inst = self.inventory.instances.get(ref)
        running = inst is not None and inst.status is InstanceStatus.RUNNING
        params = inspect.signature(backend.create_snapshot).parameters
        stateful = None
        if "stateful" in params and running and ref.remote != "lxc":
            default = params["stateful"].default
            stateful = bool(default) if isinstance(default, bool) else False
        expiry = "expires_at" in params
        taken = set()
        table = self.query_one(SnapshotTable)
        if self._snapshots_of == ref:
            taken = set(getattr(table, "snapshots", {}))
        name = datetime.now().strftime("snap-%Y%m%d-%H%M%S")

        async def take(values: dict) -> None:
            kwargs = {}
            if "stateful" in values:
                kwargs["stateful"] = values["stateful"]
            if "expires_in" in values:
                kwargs["expires_at"] = datetime.now(timezone.utc) + timedelta(
                    seconds=values["expires_in"])
            try:
                snap = await self.inventory.track(
                    ref, "snapshotting…", backend.create_snapshot(ref, values["name"],
                                                                  **kwargs))
            except BackendError as e:
                self.notify(e.message, title=f"Snapshot of {ref}: {e.title}",
                            severity="error", timeout=10)
                return
            self.notify(f"Took snapshot {snap.name} of {ref}"
                        + (" with its memory." if snap.stateful else "."))
            self._snapshots_of = None
            self._update_details()

        def done(values: dict | None) -> None:
            if values:
                self.run_worker(take(values), group=f"op:{ref}", exit_on_error=False)

        self.app.push_screen(SnapshotDialog(f"New snapshot of {ref}", name,
                                            stateful=stateful, expiry=expiry, taken=taken),
                             done)

    def _selected_snapshot(self):
        table = self.query_one(SnapshotTable)
        snap = table.selected
        if snap is None:
            self.notify("No snapshot selected.", severity="warning")
        return snap

    def action_restore_snapshot(self) -> None:
        snap = self._selected_snapshot()
        backend = self._snapshot_backend(snap.ref) if snap else None
        if backend is None:
            return
        taken = f"{snap.created_at:%Y-%m-%d %H:%M}" if snap.created_at else "(date unknown)"
        message = (f"{snap.ref} goes back to snapshot '{snap.name}', taken {taken}. "
                   f"Everything written since then is lost")
        message += (", and the running state is replaced by the one saved with it."
                    if snap.stateful else ".")

        async def restore() -> None:
            if not await self.app.push_screen_wait(
                    ConfirmDialog(f"Restore {snap.ref} to {snap.name}?", message, "Restore")):
                return
            try:
                await self.inventory.track(snap.ref, "restoring…",
                                           backend.restore_snapshot(snap))
            except BackendError as e:
                self.notify(e.message, title=f"Restore {snap.ref}: {e.title}",
                            severity="error", timeout=10)
                return
            self.notify(f"Restored {snap.ref} to {snap.name}.")

        self.run_worker(restore(), group=f"op:{snap.ref}", exit_on_error=False)

    def action_delete_snapshot(self) -> None:
        snap = self._selected_snapshot()
        backend = self._snapshot_backend(snap.ref) if snap else None
        if backend is None:
            return

        async def delete() -> None:
            if not await self.app.push_screen_wait(ConfirmDialog(
                    f"Delete snapshot {snap.name}?",
                    f"The snapshot '{snap.name}' of {snap.ref} will be deleted. The "
                    f"instance itself is not changed.", "Delete snapshot")):
                return
            try:
                await self.inventory.track(snap.ref, "deleting snapshot…",
                                           backend.delete_snapshot(snap))
            except BackendError as e:
                self.notify(e.message, title=f"Delete snapshot: {e.title}",
                            severity="error", timeout=10)
                return
            self.notify(f"Deleted snapshot {snap.name} of {snap.ref}.")
            self._snapshots_of = None
            self._update_details()

        self.run_worker(delete(), group=f"op:{snap.ref}", exit_on_error=False)

    @on(TabbedContent.TabActivated, "#details-tabs")
    def _details_tab(self) -> None:
        self._snapshots_of = None
        self._update_details()

    def action_snapshot_settings(self) -> None:
        ref = self._snapshots_of or self.query_one(InstanceTable).selected_ref
        backend = self._snapshot_backend(ref) if ref else None
        if backend is None:
            return
        if not hasattr(backend, "set_snapshot_settings"):
            self.notify(f"{ref.remote} has no snapshot schedule.", severity="warning")
            return

        async def edit() -> None:
            try:
                current = await backend.snapshot_settings(ref)
            except BackendError as e:
                self.notify(e.message, severity="error")
                return
            schedule = await self.app.push_screen_wait(InputDialog(
                f"Snapshot schedule of {ref}",
                "When to take snapshots: cron (5 fields, e.g. '0 3 * * *'), @hourly, @daily, "
                "@weekly, @monthly, @startup, or empty for none",
                current.get("snapshots.schedule", ""), confirm="Next", check=lambda v: None))
            if schedule is None:
                return
            expiry = await self.app.push_screen_wait(InputDialog(
                f"Snapshot expiry of {ref}",
                "How long scheduled snapshots are kept (e.g. 2d, 1w 3d; empty: forever)",
                current.get("snapshots.expiry", ""), confirm="Save", check=lambda v: None))
            if expiry is None:
                return
            try:
                await backend.set_snapshot_settings(ref, {"snapshots.schedule": schedule,
                                                          "snapshots.expiry": expiry})
            except BackendError as e:
                self.notify(e.message, title=f"Snapshot schedule: {e.title}",
                            severity="error", timeout=10)
                return
            self.notify(f"Snapshot schedule of {ref} saved.")
            self._snapshots_of = None
            self._update_details()

        self.run_worker(edit(), exit_on_error=False)

    def action_rename_snapshot(self) -> None:
        snap = self._selected_snapshot()
        backend = self._snapshot_backend(snap.ref) if snap else None
        if backend is None:
            return
        if not hasattr(backend, "rename_snapshot"):
            self.notify(f"{snap.ref.remote} cannot rename snapshots.", severity="warning")
            return
        taken = set(getattr(self.query_one(SnapshotTable), "snapshots", {}))

        def check(value: str) -> str | None:
            value = value.strip()
            if not value:
                return "A name is needed."
            if any(c.isspace() or c == "/" for c in value):
                return "No spaces or slashes in a snapshot name."
            if value in taken and value != snap.name:
                return f"There is already a snapshot named '{value}'."
            return None

        async def rename(new: str) -> None:
            try:
                await self.inventory.track(snap.ref, "renaming snapshot…",
                                           backend.rename_snapshot(snap, new))
            except BackendError as e:
                self.notify(e.message, title=f"Rename snapshot: {e.title}",
                            severity="error", timeout=10)
                return
            self._snapshots_of = None
            self._update_details()

        self.app.push_screen(
            InputDialog(f"Rename snapshot {snap.name}", "New name", snap.name,
                        confirm="Rename", check=check),
            lambda new: self.run_worker(rename(new), exit_on_error=False)
            if new and new != snap.name else None)

    # Consoles --------------------------------------------------------------------------

    def open_console(self, ref: InstanceRef, kind: str) -> None:
        """Open (or go back to) the console ``kind`` ("console", "shell", "vga") of ref."""
        backend = self.inventory.backends.get(ref.remote)
        if backend is None or not hasattr(backend, "open_console"):
            self.notify(f"{ref.remote} has no consoles.", severity="warning")
            return

        async def opener(width: int, height: int):
            if kind == "shell":
                return await backend.open_shell(ref, self.shell or None, width=width,
                                                height=height)
            return await backend.open_console(ref, width=width, height=height, kind=kind)

        async def run() -> None:
            try:
                await self.query_one(ConsoleDock).open(ref, kind, opener)
            except Unsupported as e:
                if kind == "vga" and backend.remote.kind in ("lxd", "incus"):
                    await self._offer_spice_viewer(ref, backend, e.message)
                else:
                    self.notify(e.message, title=f"{KIND_LABEL[kind].capitalize()} of {ref}",
                                severity="warning", timeout=10)
            except BackendError as e:
                self.notify(e.message, title=f"{KIND_LABEL[kind].capitalize()} of {ref}",
                            severity="error", timeout=10)
            except Exception as e:  # noqa: BLE001 - a bug: say it, keep the app alive
                self.log.error(f"opening {kind} of {ref}", e)
                self.notify(f"{type(e).__name__}: {e}", title=f"Opening the {kind} failed",
                            severity="error", timeout=15)

        self.run_worker(run(), group=f"console:{ref}:{kind}", exclusive=True,
                        exit_on_error=False, description=f"open {kind} of {ref}")

    async def _offer_spice_viewer(self, ref: InstanceRef, backend, message: str) -> None:
        """LXD/Incus VM screens are SPICE: a terminal cannot draw them. Where a graphical
        display and remote-viewer exist, offer to hand the screen to them through the
        CLI (which proxies SPICE over LXD's websocket); otherwise say what to run."""
        import os
        import shutil

        cli = "incus" if backend.remote.kind == "incus" else "lxc"
        display = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
        if not (display and shutil.which("remote-viewer") and shutil.which(cli)):
            self.notify(message + " (No graphical display or remote-viewer here.)",
                        title=f"Screen of {ref}", severity="warning", timeout=12)
            return
        # an Incus remote shown as incus-<name> (its LXD namesake came first) is <name>
        # to the incus CLI
        remote = ref.remote.removeprefix("incus-") if cli == "incus" else ref.remote
        argv = [cli, "console", f"{remote}:{ref.name}", "--type=vga"]
        if not await self.app.push_screen_wait(ConfirmDialog(
                f"Open the screen of {ref}?",
                f"{message}\n\nOpen it in remote-viewer on this display ({' '.join(argv)})?",
                "Open remote-viewer", destructive=False)):
            return
        import asyncio

        await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL, start_new_session=True)
        self.notify(f"remote-viewer is opening the screen of {ref}.")

    def action_open_console(self) -> None:
        if ref := self._selected():
            self.open_console(ref, "console")

    def action_open_shell(self) -> None:
        if ref := self._selected():
            self.open_console(ref, "shell")

    def action_open_vga(self) -> None:
        if ref := self._selected():
            self.open_console(ref, "vga")

    def action_focus_console(self) -> None:
        self.query_one(ConsoleDock).focus_active()

    def action_zoom_console(self) -> None:
        self.toggle_class("-console-zoom")
        if self.has_class("-console-zoom"):
            self.query_one(ConsoleDock).focus_active()

    async def action_close_console(self) -> None:
        await self.query_one(ConsoleDock).close_active()

    def action_next_console(self) -> None:
        self.query_one(ConsoleDock).cycle(1)

    def action_previous_console(self) -> None:
        self.query_one(ConsoleDock).cycle(-1)

    def action_special_keys(self) -> None:
        tab = self.query_one(ConsoleDock).active
        if tab is None:
            return
        names = list(getattr(tab.view.session, "special_keys", ()))
        names += ["esc", "tab", "ctrl+c", "ctrl+d", "ctrl+z", "ctrl+\\", "ctrl+]",
                  *(f"f{n}" for n in range(1, 13))]

        async def chosen(name: str | None) -> None:
            if not name:
                return
            if name in getattr(tab.view.session, "special_keys", ()):
                try:
                    await tab.view.session.send_special(name)
                except BackendError as e:
                    self.notify(e.message, severity="error")
            else:
                tab.view.send_special(name)
            tab.view.focus()

        self.app.push_screen(SpecialKeysMenu(tab.view.title, names),
                             lambda name: self.run_worker(chosen(name), exit_on_error=False))

    @on(ConsoleDock.Detached)
    def _console_detached(self) -> None:
        self.remove_class("-console-zoom")
        self.query_one(InstanceTable).focus()

    @on(ConsoleDock.Emptied)
    def _consoles_emptied(self) -> None:
        self.remove_class("-console-zoom")
        self.query_one(InstanceTable).focus()
