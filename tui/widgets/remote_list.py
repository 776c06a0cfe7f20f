"""The remotes pane: name, kind, connection state and instance counts per remote."""

from __future__ import annotations

import time
from dataclasses import replace

from rich.style import Style
from rich.text import Text
from textual.widgets import DataTable

from backends.models import ConnectionState, InstanceStatus
from backends.remotes import remote_warnings

from ..format import external, external_text
from ..actions import ACTIONS
from ..services.inventory import Inventory, RemoteStatus
from ..services.status import STATE_WORDS, state_word
from .colors import theme_colors
from .member_rows import STATE_VAR, describe_member, member_cells, member_key, split_key

LABELS = STATE_WORDS
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
    """One row per remote; the selected remote's problem is shown below the table. With
    the focus here, the footer shows the remotes' keys (reconnect, add, remove)."""

    BINDINGS = [replace(a, show=True).binding("screen.") for a in ACTIONS
                if a.name in ("retry", "add-remote", "remove-remote")]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", show_header=True, cell_padding=0)
        self._colors: dict[str, str] = {}
        self._rendered: dict[str, tuple] = {}
        self._present: set[str] = set()
        self._layout: list[str] = []
        """Row keys in order: each remote, then its cluster members."""

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
            if st.server.note:
                text.append(st.server.note + "\n", style="italic")
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
        return external_text(text)

    def on_mount(self) -> None:
        self.add_column(" Remote", key="name", width=13)
        self.add_column("Kind", key="kind", width=8)  # "libvirt" and a space
        self.add_column("State", key="state", width=10)
        self.add_column("Up/All ", key="count", width=7)
        self.reload_colors()

    def reload_colors(self) -> None:
        """Take the state colours from the current theme (rows re-render on next sync)."""
        self._colors = theme_colors(self.app, list(set(_STATE_VAR.values())
                                                   | set(STATE_VAR.values())))
        self._rendered.clear()

    def _selected_key(self) -> str | None:
        if self.row_count == 0:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:
            return None

    @property
    def selected_remote(self) -> str | None:
        key = self._selected_key()
        return split_key(key)[0] if key else None

    @property
    def selected_member(self) -> str | None:
        """The cluster member whose row is selected (None: a remote's row)."""
        key = self._selected_key()
        return split_key(key)[1] if key else None

    def info(self, inv: Inventory, error_style: str) -> Text | str:
        """What is shown under the pane for the selected row."""
        key = self._selected_key()
        if not key:
            return ""
        remote, member = split_key(key)
        found = inv.members.member(remote, member) if member else None
        if found is not None:
            return describe_member(found, error_style)
        status = inv.statuses.get(remote)
        return self.describe(status, error_style) if status else ""

    def _relayout(self, inv: Inventory) -> bool:
        """Rebuild the rows when a cluster's members came or went (rows cannot be inserted
        in the middle); True when it did."""
        layout = []
        for name in inv.statuses:
            layout.append(name)
            layout += [member_key(name, m.name) for m in inv.members.of(name)]
        if layout == self._layout:
            return False
        selected = self._selected_key()
        self.clear()
        self._present.clear()
        self._rendered.clear()
        self._layout = layout
        self._sync_rows(inv, list(inv.statuses))
        if selected in layout:
            self.move_cursor(row=layout.index(selected), animate=False)
        return True

    last_run = False
    """Every state reads ``last run``: the screen is being kept as the next start's first
    frame, where no state is live (tui/lastframe.py)."""

    def sync(self, inv: Inventory, remote: str | None = None) -> None:
        if self._relayout(inv):
            return
        self._sync_rows(inv, [remote] if remote else list(inv.statuses))

    def _sync_rows(self, inv: Inventory, names: list[str]) -> None:
        remote = names[0] if len(names) == 1 else None
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
            label = state_word(st)
            if st.state is ConnectionState.CONNECTED and st.operations:
                label = f"busy ({len(st.operations)})"
            stale = not st.listed and st.cached_at is not None
            if stale and st.state in (ConnectionState.CONNECTING, ConnectionState.CONNECTED):
                label = "refreshing"
            color = self._colors.get(_STATE_VAR[st.state]) or None
            if self.last_run:  # the frame kept for the next start: not a live state
                label, color = "last run", None
            count = (f"{running.get(name, 0)}/{total.get(name, 0)}"
                     if st.listed or stale else "")
            cells: tuple[Text, ...] = (
                external(f" {name[:11]}" + ("…" if len(name) > 11 else ""), no_wrap=True),
                external(kind),
                external(label, Style(color=color), no_wrap=True, overflow="ellipsis"),
                external(f"{count} ", "dim" if stale else "", justify="right"),
            )
            plain = tuple(str(c) for c in cells) + (color,)
            self._put(name, cells, plain)
            for m in inv.members.of(name):
                cells = member_cells(m, self._colors)
                self._put(member_key(name, m.name), cells, tuple(str(c) for c in cells))

    def _put(self, key: str, cells: tuple[Text, ...], plain: tuple) -> None:
        if key not in self._present:
            self.add_row(*cells, key=key)
            self._present.add(key)
        elif self._rendered.get(key) != plain:
            for col, cell in zip(("name", "kind", "state", "count"), cells):
                self.update_cell(key, col, cell)
        self._rendered[key] = plain
