"""The details pane: an overview of the selected instance with usage sparklines, and its
snapshots (list, new, restore, delete, rename)."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Self
from weakref import WeakKeyDictionary

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.compose import compose
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.coordinate import Coordinate
from textual.widget import Widget
from textual.widgets import DataTable, Sparkline, Static, TabbedContent, TabPane, Tabs

from backends.errors import BackendError
from backends.models import (
    Capability,
    Instance,
    InstanceRef,
    InstanceState,
    LimitField,
    Snapshot,
)

from .. import format as fmt
from .._textual_compat import bindings_map
from ..actions import ACTIONS, Scope, bindings, offered
from ..flows.snapshots import read as read_snapshots
from ..services.inventory import Inventory
from .plain import Plain

HISTORY = 60
"""Samples kept per instance (at the sampling interval: minutes of history)."""


@dataclass
class UsageHistory:
    """Recent usage of one instance, from the states the inventory samples."""

    cpu: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY))
    memory: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY))
    network: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY))
    last: InstanceState | None = None

    def add(self, state: InstanceState) -> bool:
        """Record ``state`` if it is a new sample; True when something was added."""
        if self.last is not None and state.sampled_at <= self.last.sampled_at:
            return False
        if state.cpu_percent is not None:
            self.cpu.append(state.cpu_percent)
        self.memory.append(float(state.memory_usage))
        if self.last is not None and state.sampled_at > self.last.sampled_at:
            moved = (state.rx_bytes + state.tx_bytes) - (self.last.rx_bytes
                                                         + self.last.tx_bytes)
            self.network.append(max(0.0, moved / (state.sampled_at - self.last.sampled_at)))
        self.last = state
        return True


TAB_KEYS: list[BindingType] = [
    Binding("left", "tab(-1)", "Previous tab", show=False),
    Binding("right", "tab(1)", "Next tab", show=False),
]
"""←/→ anywhere in the details pane switch its tab (the tab bar does so itself)."""


class _TabKeys:
    """←/→ on a part of the details pane that would scroll sideways switch the tab."""

    def action_tab(self, step: int) -> None:
        assert isinstance(self, Widget), "mixed into widgets"
        pane = next((a for a in self.ancestors if isinstance(a, DetailsPane)), None)
        if pane is not None:
            pane.action_tab(step)


class TabScroll(_TabKeys, VerticalScroll):
    BINDINGS = TAB_KEYS


class SnapshotTable(_TabKeys, DataTable):
    """Snapshots of the selected instance."""

    BINDINGS = [*bindings(Scope.SNAPSHOT, prefix="screen."), *TAB_KEYS]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.snapshots: dict[str, Snapshot] = {}

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.add_columns("Name", "Taken", "State", "Expires", "Size", "Comment")

    def show(self, snapshots: list[Snapshot]) -> None:
        self.snapshots = {s.name: s for s in snapshots}
        keep = self.cursor_row
        self.clear()
        for s in sorted(snapshots, key=lambda s: (s.created_at is None, s.created_at)):
            self.add_row(
                fmt.external(s.name),
                fmt.external(f"{s.created_at:%Y-%m-%d %H:%M} ({fmt.ago(s.created_at)})")
                if s.created_at else "—",
                "with memory" if s.stateful else "disk only",
                fmt.external(f"{s.expires_at:%Y-%m-%d %H:%M}") if s.expires_at else "never",
                fmt.external(fmt.size(s.size)) if s.size else "",
                fmt.external(s.comment),
                key=s.name,
            )
        if self.row_count:
            self.move_cursor(row=min(keep, self.row_count - 1))

    @property
    def selected(self) -> Snapshot | None:
        if not self.row_count:
            return None
        key = self.coordinate_to_cell_key(Coordinate(self.cursor_row, 0)).row_key.value
        return self.snapshots.get(key) if key is not None else None


class DetailsPane(Vertical):
    """Overview (text + sparklines) and snapshots of one instance."""

    BINDINGS = TAB_KEYS

    DEFAULT_CSS = """
    DetailsPane {
        display: none;
        height: 18;
        border: round $panel;
        border-title-color: $foreground-muted;
        &.-visible { display: block; }
        &:focus-within { border: round $primary; border-title-color: $primary; }
        TabbedContent { height: 1fr; }
        TabPane { padding: 0 1; }
        #details-overview { height: auto; width: 1fr; }
        #sparklines { width: 44; height: auto; }
        .spark-box { height: 3; margin-bottom: 1; }
        .spark-label { height: 1; color: $foreground-muted; }
        Sparkline { height: 2; }
        #snapshot-note { height: auto; color: $foreground-muted; }
        SnapshotTable { height: 1fr; }
    }
    """

    def __init__(self, inventory: Inventory, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.inventory = inventory
        self.ref: InstanceRef | None = None
        self.snapshots_of: InstanceRef | None = None
        """The instance whose snapshots the snapshots tab shows (None: to be read)."""
        self._snapshot_count_shown: int | None = None
        self._limits: dict[InstanceRef, list[LimitField]] = {}
        self._limits_of: InstanceRef | None = None
        self._limits_seen: dict[InstanceRef, Instance | None] = {}
        self._titled: InstanceRef | None = None
        self._built = False
        self._ready = False  # built and mounted
        self._want_snapshots = False  # show_snapshots called before it was ready
        self._usage: UsageHistory | None = None

    def compose(self) -> ComposeResult:
        return []  # the parts are built the first time the pane is shown (_build)

    def _build(self) -> None:
        """Mount the pane's parts (~25 widgets), once: most sessions never open the pane,
        and styling them at start-up delayed the first frame by ~30 ms."""
        if self._built:
            return
        self._built = True
        self.border_subtitle = "tab: into the pane · ←/→: its tabs"
        mounting = self.mount_all(compose(self, self._parts()))

        async def built() -> None:
            await mounting
            self._ready = True
            if self._want_snapshots and self.ref is not None:
                self.show_snapshots(self.ref, self._usage)
            else:
                self.show_instance(self.ref, self._usage)

        self.run_worker(built(), group="details-build", exit_on_error=False)

    def add_class(self, *class_names: str, update: bool = True) -> Self:
        if "-visible" in class_names:
            self._build()
        return super().add_class(*class_names, update=update)

    def set_class(self, add: bool, *class_names: str, update: bool = True) -> Self:
        if add and "-visible" in class_names:
            self._build()
        return super().set_class(add, *class_names, update=update)

    def toggle_class(self, *class_names: str) -> Self:
        if "-visible" in class_names and not self.has_class("-visible"):
            self._build()
        return super().toggle_class(*class_names)

    @property
    def selected_snapshot(self) -> Snapshot | None:
        """The snapshot selected in the snapshots tab (None before the pane was shown)."""
        return self.query_one(SnapshotTable).selected if self._ready else None

    @property
    def snapshot_names(self) -> frozenset[str]:
        """Names of the snapshots the snapshots tab lists."""
        return frozenset(self.query_one(SnapshotTable).snapshots) if self._ready \
            else frozenset()

    def _parts(self) -> ComposeResult:
        with TabbedContent(id="details-tabs"):
            with TabPane("Overview", id="tab-overview"), Horizontal():
                yield Plain("", id="details-overview")
                with Vertical(id="sparklines"):
                    for key, label in (("cpu", "CPU %"), ("memory", "memory"),
                                       ("network", "network bytes/s")):
                        with Vertical(classes="spark-box"):
                            yield Plain(label, classes="spark-label",
                                        id=f"spark-{key}-label")
                            yield Sparkline([], id=f"spark-{key}")
            with TabPane("Snapshots", id="tab-snapshots"):
                yield Plain("", id="snapshot-note")
                yield SnapshotTable(id="snapshots")
            with TabPane("Config", id="tab-config"):
                with TabScroll():
                    yield Plain("", id="details-config")
            with TabPane("Events", id="tab-events"):
                with TabScroll():
                    yield Plain("", id="details-events")

    def show_usage(self, history: UsageHistory | None) -> None:
        for key, label, formatter in (
            ("cpu", "CPU", lambda v: f"{v:.1f}%"),
            ("memory", "memory", lambda v: fmt.size(int(v))),
            ("network", "network", lambda v: f"{fmt.size(int(v))}/s"),
        ):
            values = list(getattr(history, key)) if history else []
            spark = self.query_one(f"#spark-{key}", Sparkline)
            if list(spark.data or []) != values:
                spark.data = values
            now = formatter(values[-1]) if values else "—"
            peak = formatter(max(values)) if values else "—"
            text = fmt.external_text(Text.assemble((f"{label} ", "bold"),
                                                   f"now {now}  max {peak}"))
            self.query_one(f"#spark-{key}-label", Static).update(text)

    def show_config(self, config: dict, devices: dict) -> Text:
        text = Text()
        if devices:
            text.append("Devices\n", style="bold underline")
            for name, dev in sorted(devices.items()):
                text.append(f"  {name}", style="bold")
                text.append(f"  {dev.get('type', '?')}  ")
                text.append(", ".join(f"{k}={v}" for k, v in sorted(dev.items())
                                      if k != "type") + "\n")
        if config:
            text.append("Configuration\n", style="bold underline")
            for key, value in sorted(config.items()):
                if key.startswith("volatile.") or key == "cloud-init.user-data":
                    continue  # internal bookkeeping / long text
                first = str(value).splitlines()[0] if str(value) else ""
                text.append(f"  {key}", style="bold")
                text.append(f" = {first}\n")
        if not text:
            text.append("No configuration reported by this backend.")
        return fmt.external_text(text)

    @staticmethod
    def events_text(events) -> Text:
        text = Text()
        for when, what in reversed(list(events or ())):
            stamp = when.astimezone().strftime("%H:%M:%S") if when else "—"
            text.append(f"{stamp}  ", style="bold")
            text.append(f"{what}\n")
        return fmt.external_text(text) if text else Text(
            "Nothing happened to it since corral started.")

    @property
    def snapshots_active(self) -> bool:
        return self._ready and self.query_one(TabbedContent).active == "tab-snapshots"

    @staticmethod
    def overview(inst: Instance, state: InstanceState | None, pending: str | None,
                 limits: str, stale: str = "") -> Text:
        """The overview text of one instance: identity, status (``stale``: why it is the
        last run's), limits, usage."""
        status = pending or inst.status.value
        rows = [
            ("Instance", f"{inst.ref}  ({inst.type.value}, project {inst.ref.project})"),
            ("Status", f"{status} — {stale}" if stale else status),
            ("Image", inst.image or "—"),
            ("Created", f"{inst.created_at:%Y-%m-%d %H:%M} ({fmt.ago(inst.created_at)})"
             if inst.created_at else "—"),
            ("Profiles", ", ".join(inst.profiles) or "—"),
            *((("Member", inst.location),) if inst.location else ()),
            ("Limits", limits),
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
                ("Usage", f"cpu {fmt.cpu(state) or '…'}, memory "
                 f"{fmt.memory(state, inst.memory_limit)}, disk {fmt.disk(state) or '—'}, "
                 f"{state.processes or 0} processes"),
                ("Network", f"rx {fmt.size(state.rx_bytes)}, tx {fmt.size(state.tx_bytes)}"),
            ]
        if inst.description:
            rows.append(("Description", inst.description))
        text = Text()
        for label, value in rows:
            text.append(f"{label:>10}  ", style="bold")
            text.append(f"{value}\n")
        return fmt.external_text(text)

    @staticmethod
    def limits_line(inst: Instance, fields: list[LimitField] | None) -> str:
        """The limits of an instance in one line (the table's figures until the backend's
        own list of limits is read)."""
        if fields is None:
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

    def _stale(self, remote: str) -> str:
        """Why a row is the last run's (empty when it is live)."""
        st = self.inventory.statuses[remote]
        if st.listed or st.cached_at is None:
            return ""
        saved = time.strftime("%Y-%m-%d %H:%M", time.localtime(st.cached_at))
        return f"as listed {saved} (last run); {st.message or 'refreshing'}"

    # What the pane shows -------------------------------------------------------------

    def instance_changed(self, ref: InstanceRef) -> None:
        """The inventory changed ``ref``: its limits are read again when next shown."""
        if ref in self._limits and self.inventory.instances.get(ref) is not \
                self._limits_seen.get(ref):
            self._limits.pop(ref, None)
            self._limits_of = None

    def reload(self) -> None:
        """Something the pane shows changed (snapshots, limits): read it again."""
        self.snapshots_of = None
        self._limits.clear()
        self._limits_of = None
        self.show_instance(self.ref)

    def show_snapshots(self, ref: InstanceRef, usage: UsageHistory | None) -> None:
        """Open the pane on the snapshots tab of ``ref``, focused."""
        self.add_class("-visible")
        if not self._ready:  # again once built
            self.ref, self._usage, self._want_snapshots = ref, usage, True
            return
        self._want_snapshots = False
        self.query_one(TabbedContent).active = "tab-snapshots"
        self.snapshots_of = None
        self.show_instance(ref, usage)
        self.query_one(SnapshotTable).focus()

    def show_instance(self, ref: InstanceRef | None, usage: UsageHistory | None = None) -> None:
        """Show ``ref`` (when the pane is visible), reading its limits and snapshots as
        needed."""
        self.ref = ref
        self._usage = usage
        if not self.has_class("-visible") or not self._ready:
            return
        details = self.query_one("#details-overview", Static)
        inst = self.inventory.instances.get(ref) if ref else None
        if inst is None:
            update_if_changed(details, "No instance selected.")
            self.show_usage(None)
            return
        fields = self._limits.get(inst.ref)
        if fields is None and self._limits_of != inst.ref and Capability.RESOURCES in \
                self.inventory.remote_capabilities(inst.ref.remote):
            self._limits_of = inst.ref
            self._load_limits(inst.ref)
        text = self.overview(inst, self.inventory.states.get(inst.ref),
                             self.inventory.pending.get(inst.ref),
                             self.limits_line(inst, fields), self._stale(inst.ref.remote))
        if self._titled != inst.ref:
            self._titled = inst.ref
            self.border_title = fmt.external(f"Details: {inst.ref}")
        update_if_changed(details, text)
        self.show_usage(usage)
        update_if_changed(self.query_one("#details-config", Static),
                          self.show_config(dict(inst.config),
                                           dict(inst.devices)))
        update_if_changed(self.query_one("#details-events", Static),
                          self.events_text(self.inventory.history.get(inst.ref)))
        if self.snapshots_active and (self.snapshots_of != inst.ref
                                      or inst.snapshot_count != self._snapshot_count_shown):
            self._load_snapshots(inst.ref)

    @work(exclusive=True, group="limits-load", exit_on_error=False)
    async def _load_limits(self, ref: InstanceRef) -> None:
        backend = self.inventory.backends.get(ref.remote)
        if backend is None:
            return
        try:
            self._limits[ref] = await backend.get_limits(ref)
            self._limits_seen[ref] = self.inventory.instances.get(ref)
        except BackendError:
            return
        self.show_instance(self.ref)

    @work(exclusive=True, group="snapshots-load", exit_on_error=False)
    async def _load_snapshots(self, ref: InstanceRef) -> None:
        backend = self.inventory.backends.get(ref.remote)
        if backend is None:
            return
        note = self.query_one("#snapshot-note", Static)
        table = self.query_one(SnapshotTable)
        if self.snapshots_of != ref:
            table.show([])  # never show one instance's snapshots under another's name
            note.update(f"Reading the snapshots of {ref}…")
        self.snapshots_of = ref
        inst = self.inventory.instances.get(ref)
        self._snapshot_count_shown = inst.snapshot_count if inst else None
        try:
            listed, text = await read_snapshots(
                backend, ref, self.inventory.declared_capabilities(ref.remote))
        except BackendError as e:
            table.show([])
            note.update(f"Cannot list the snapshots of {ref}: {e.message}")
            return
        if self.snapshots_of == ref:
            table.show(listed)
            keys = self.snapshot_keys(self.inventory.declared_capabilities(ref.remote))
            note.update(f"{text} · {keys}" if keys else text)

    def snapshot_keys(self, caps: frozenset[Capability]) -> str:
        """The snapshots tab's keys as the footer names them: each snapshot action the
        backend offers, with its key as bound now (a ``[keymap]`` change included)."""
        table = self.query_one(SnapshotTable)
        parts = []
        for a in ACTIONS:
            if a.scope is not Scope.SNAPSHOT or not a.key or not offered(a, caps):
                continue
            bound = next((b for bs in bindings_map(table).key_to_bindings.values() for b in bs
                          if b.action == f"screen.{a.action}"), None)
            if bound is not None:
                parts.append(f"{self.app.get_key_display(bound)} {a.label.lower()}")
        return " · ".join(parts)

    TAB_ORDER = ("tab-overview", "tab-snapshots", "tab-config", "tab-events")

    def action_tab(self, step: int) -> None:
        """The next (1) or previous (-1) tab, its contents focused where they take keys."""
        if not self._ready:
            return
        tabs = self.query_one(TabbedContent)
        order = self.TAB_ORDER
        tabs.active = order[(order.index(tabs.active) + step) % len(order)] \
            if tabs.active in order else order[0]
        targets: dict[str, type[Widget] | str] = {
            "tab-snapshots": SnapshotTable, "tab-config": "#tab-config TabScroll",
            "tab-events": "#tab-events TabScroll"}
        target = targets.get(tabs.active)
        widget = self.query_one(target) if target else self.query_one(Tabs)
        widget.focus()

    @on(TabbedContent.TabActivated, "#details-tabs")
    def _tab_activated(self) -> None:
        self.snapshots_of = None
        self.show_instance(self.ref)


_SHOWN: WeakKeyDictionary[Static, str] = WeakKeyDictionary()
"""Per widget: what :func:`update_if_changed` last put in it."""


def update_if_changed(widget: Static, content: str | Text) -> None:
    """``Static.update`` re-lays out the screen, which repaints the whole table: skip it
    when nothing changed (this keeps idle CPU near zero)."""
    key = content.markup if isinstance(content, Text) else content
    if _SHOWN.get(widget) != key:
        _SHOWN[widget] = key
        widget.update(fmt.gate(content))  # the gate again: main.py's statics come here
