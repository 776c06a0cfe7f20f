"""The remotes pane: name, kind, connection state and instance counts per remote."""

from __future__ import annotations

import time

from rich.style import Style
from rich.text import Text
from textual.widgets import DataTable

from backends.models import ConnectionState, InstanceStatus
from backends.remotes import remote_warnings

from ..services.inventory import Inventory, RemoteStatus
from .colors import theme_colors

LABELS = {
    ConnectionState.CONNECTED: "connected",
    ConnectionState.CONNECTING: "connecting",
    ConnectionState.DISCONNECTED: "offline",
    ConnectionState.NOT_RESPONDING: "no answer",
    ConnectionState.UNTRUSTED: "untrusted",
    ConnectionState.ERROR: "error",
}
"""Short state words for the narrow pane; the full reason is shown below the table."""

_STATE_VAR = {
    ConnectionState.CONNECTED: "status-running",
    ConnectionState.CONNECTING: "status-busy",
    ConnectionState.DISCONNECTED: "status-error",
    ConnectionState.NOT_RESPONDING: "status-error",
    ConnectionState.UNTRUSTED: "status-error",
    ConnectionState.ERROR: "status-error",
}


class RemoteList(DataTable):
    """One row per remote; the selected remote's problem is shown below the table."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", show_header=True, cell_padding=0)
        self._colors: dict[str, str] = {}
        self._rendered: dict[str, tuple] = {}
        self._present: set[str] = set()

    @staticmethod
    def describe(st: RemoteStatus, error_style: str) -> Text:
        """The lines under the pane for one remote: address, server, project, problem, and
        warnings (not pinned, a client key others can read)."""
        text = Text()
        text.append(st.remote.name, style="bold")
        text.append(f"  {st.remote.address}\n")
        if st.server:
            text.append(f"{st.server.server} {st.server.version}")
            if st.remote.project != "default":
                text.append(f" · project {st.remote.project}")
            text.append("\n")
        if st.remote.read_only:
            text.append("read-only\n")
        if not st.listed and st.cached_at is not None:
            saved = time.strftime("%Y-%m-%d %H:%M", time.localtime(st.cached_at))
            text.append(f"showing the rows of the last run (listed {saved}) until it answers\n",
                        style="dim")
        for warning in remote_warnings(st.remote):
            text.append(f"⚠ {warning}\n", style=error_style)
        if st.message:
            text.append(st.message, style=error_style)
        return text

    def on_mount(self) -> None:
        self.add_column(" Remote", key="name", width=13)
        self.add_column("Kind", key="kind", width=6)
        self.add_column("State", key="state", width=10)
        self.add_column("Up/All ", key="count", width=7)
        self.reload_colors()

    def reload_colors(self) -> None:
        """Take the state colours from the current theme (rows re-render on next sync)."""
        self._colors = theme_colors(self.app, list(set(_STATE_VAR.values())))
        self._rendered.clear()

    @property
    def selected_remote(self) -> str | None:
        if self.row_count == 0:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:  # noqa: BLE001
            return None

    def sync(self, inv: Inventory, remote: str | None = None) -> None:
        names = [remote] if remote else list(inv.statuses)
        running: dict[str, int] = {}
        total: dict[str, int] = {}
        for ref, inst in inv.instances.items():
            if remote and ref.remote != remote:
                continue
            total[ref.remote] = total.get(ref.remote, 0) + 1
            if inst.status is InstanceStatus.RUNNING:
                running[ref.remote] = running.get(ref.remote, 0) + 1
        for name in names:
            st = inv.statuses.get(name)
            if st is None:  # removed while corral runs
                if name in self._present:
                    self.remove_row(name)
                    self._present.discard(name)
                    self._rendered.pop(name, None)
                continue
            kind = (st.server.server if st.server else st.remote.kind)
            label = LABELS[st.state]
            if st.state is ConnectionState.CONNECTED and st.operations:
                label = f"busy ({len(st.operations)})"
            stale = not st.listed and st.cached_at is not None
            if stale and st.state in (ConnectionState.CONNECTING, ConnectionState.CONNECTED):
                label = "refreshing"
            color = self._colors.get(_STATE_VAR[st.state]) or None
            count = (f"{running.get(name, 0)}/{total.get(name, 0)}"
                     if st.listed or stale else "")
            cells = (
                Text(f" {name[:11]}" + ("…" if len(name) > 11 else ""), no_wrap=True),
                Text(kind),
                Text(label, style=Style(color=color), no_wrap=True, overflow="ellipsis"),
                Text(f"{count} ", justify="right", style="dim" if stale else ""),
            )
            plain = tuple(str(c) for c in cells) + (color,)
            if name not in self._present:
                self.add_row(*cells, key=name)
                self._present.add(name)
            elif self._rendered.get(name) != plain:
                for col, cell in zip(("name", "kind", "state", "count"), cells):
                    self.update_cell(name, col, cell)
            self._rendered[name] = plain
