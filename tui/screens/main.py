"""The main screen: remotes pane, instance table, filter and details."""

from __future__ import annotations

from typing import Iterable

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Static

from backends.errors import BackendError, StopTimedOut
from backends.models import Capability, InstanceRef, InstanceStatus

from .. import format as fmt
from ..commands import VERB_CAPABILITY
from ..filter import FilterError, Term, parse
from ..services.inventory import Inventory
from ..widgets.colors import theme_colors
from ..widgets.console_dock import KIND_LABEL, ConsoleDock
from ..widgets.instance_table import InstanceTable
from ..widgets.remote_list import RemoteList
from .dialogs import ConfirmDialog, SpecialKeysMenu
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
}
_CONSOLE_ACTIONS = {"focus_console", "zoom_console", "close_console", "next_console",
                    "previous_console", "special_keys"}
_PENDING = {
    "start": "starting…", "stop": "stopping…", "restart": "restarting…",
    "freeze": "pausing…", "unfreeze": "resuming…", "delete": "deleting…",
}


class MainScreen(Screen[None]):
    """Every instance of every remote, live."""

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
                yield Static("", id="details")
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

    def _update_details(self) -> None:
        details = self.query_one("#details", Static)
        if not details.has_class("-visible"):
            return
        ref = self.query_one(InstanceTable).selected_ref
        inst = self.inventory.instances.get(ref) if ref else None
        if inst is None:
            _update_if_changed(details, "No instance selected.")
            return
        state = self.inventory.states.get(inst.ref)
        rows = [
            ("Instance", f"{inst.ref}  ({inst.type.value}, project {inst.ref.project})"),
            ("Status", self.inventory.pending.get(inst.ref) or inst.status.value),
            ("Image", inst.image or "—"),
            ("Created", f"{inst.created_at:%Y-%m-%d %H:%M} ({fmt.ago(inst.created_at)})"
             if inst.created_at else "—"),
            ("Profiles", ", ".join(inst.profiles) or "—"),
            ("Limits", f"cpu {inst.cpu_limit or 'unlimited'}, memory "
             f"{fmt.size(inst.memory_limit) if inst.memory_limit else 'unlimited'}"),
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
        _set_if_changed(details, "border_title", f"Details: {inst.ref}")
        _update_if_changed(details, text)

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
        details = self.query_one("#details", Static)
        details.toggle_class("-visible")
        self._update_details()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("-visible")
        box.focus()

    def action_clear(self) -> None:
        box = self.query_one("#filter", Input)
        details = self.query_one("#details", Static)
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
        self.query_one(RemoteList).focus()

    def action_focus_instances(self) -> None:
        self.query_one(InstanceTable).focus()

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(key_rows(self)))

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
            except BackendError as e:
                self.notify(e.message, title=f"{KIND_LABEL[kind].capitalize()} of {ref}",
                            severity="error", timeout=10)
            except Exception as e:  # noqa: BLE001 - a bug: say it, keep the app alive
                self.log.error(f"opening {kind} of {ref}", e)
                self.notify(f"{type(e).__name__}: {e}", title=f"Opening the {kind} failed",
                            severity="error", timeout=15)

        self.run_worker(run(), group=f"console:{ref}:{kind}", exclusive=True,
                        exit_on_error=False, description=f"open {kind} of {ref}")

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
