"""The details pane: an overview of the selected instance with usage sparklines, and its
snapshots (list, new, restore, delete, rename)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Sparkline, Static, TabbedContent, TabPane

from backends.models import InstanceRef, InstanceState, Snapshot

from .. import format as fmt

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


class SnapshotTable(DataTable):
    """Snapshots of the selected instance."""

    BINDINGS = [
        Binding("n", "screen.new_snapshot", "New snapshot", id="snapshot.new",
                tooltip="Take a snapshot of the selected instance"),
        Binding("enter", "screen.restore_snapshot", "Restore", id="snapshot.restore",
                tooltip="Restore the instance to this snapshot (asks first)"),
        Binding("delete,d", "screen.delete_snapshot", "Delete snapshot",
                id="snapshot.delete", tooltip="Delete this snapshot (asks first)"),
        Binding("m", "screen.rename_snapshot", "Rename", id="snapshot.rename",
                tooltip="Rename this snapshot"),
        Binding("e", "screen.snapshot_settings", "Schedule", id="snapshot.schedule",
                tooltip="Edit the snapshot schedule and expiry (LXD/Incus)"),
    ]

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.add_columns("Name", "Taken", "State", "Expires", "Size", "Comment")

    def show(self, snapshots: list[Snapshot]) -> None:
        self.snapshots = {s.name: s for s in snapshots}
        keep = self.cursor_row
        self.clear()
        for s in sorted(snapshots, key=lambda s: (s.created_at is None, s.created_at)):
            self.add_row(
                s.name,
                f"{s.created_at:%Y-%m-%d %H:%M} ({fmt.ago(s.created_at)})"
                if s.created_at else "—",
                "with memory" if s.stateful else "disk only",
                f"{s.expires_at:%Y-%m-%d %H:%M}" if s.expires_at else "never",
                fmt.size(s.size) if s.size else "",
                s.comment,
                key=s.name,
            )
        if self.row_count:
            self.move_cursor(row=min(keep, self.row_count - 1))

    @property
    def selected(self) -> Snapshot | None:
        if not self.row_count:
            return None
        key = self.coordinate_to_cell_key((self.cursor_row, 0)).row_key.value
        return getattr(self, "snapshots", {}).get(key)


class DetailsPane(Vertical):
    """Overview (text + sparklines) and snapshots of one instance."""

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
        #snapshot-note { height: 1; color: $foreground-muted; }
        SnapshotTable { height: 1fr; }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self.ref: InstanceRef | None = None

    def compose(self) -> ComposeResult:
        with TabbedContent(id="details-tabs"):
            with TabPane("Overview", id="tab-overview"), Horizontal():
                yield Static("", id="details-overview")
                with Vertical(id="sparklines"):
                    for key, label in (("cpu", "CPU %"), ("memory", "memory"),
                                       ("network", "network bytes/s")):
                        with Vertical(classes="spark-box"):
                            yield Static(label, classes="spark-label", id=f"spark-{key}-label")
                            yield Sparkline([], id=f"spark-{key}")
            with TabPane("Snapshots", id="tab-snapshots"):
                yield Static("", id="snapshot-note")
                yield SnapshotTable(id="snapshots")
            with TabPane("Config", id="tab-config"):
                with VerticalScroll():
                    yield Static("", id="details-config")
            with TabPane("Events", id="tab-events"):
                with VerticalScroll():
                    yield Static("", id="details-events")

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
            text = Text.assemble((f"{label} ", "bold"), f"now {now}  max {peak}")
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
        return text

    @staticmethod
    def events_text(events) -> Text:
        text = Text()
        for when, what in reversed(list(events or ())):
            stamp = when.astimezone().strftime("%H:%M:%S") if when else "—"
            text.append(f"{stamp}  ", style="bold")
            text.append(f"{what}\n")
        return text or Text("Nothing happened to it since corral started.")

    @property
    def snapshots_active(self) -> bool:
        return self.query_one(TabbedContent).active == "tab-snapshots"
