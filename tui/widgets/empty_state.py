"""What the instance table says when it has no rows: why, and what to do next.

Three cases teach different things: no remote at all (which files and sockets were looked
for, ``+`` to add one), remotes with no instances yet (``N`` to create one; the problem of
each remote that is not connected, such as a missing group membership), and a filter that
matches nothing (``esc`` clears it).
"""

from __future__ import annotations

import os
from typing import Iterable

from textual.widget import Widget

from backends.models import ConnectionState

from ..format import external
from ..services.inventory import Inventory
from .plain import Plain


def _home(path: str) -> str:
    home = os.path.expanduser("~")
    return "~" + path[len(home):] if home != "/" and path.startswith(home + "/") else path


def empty_text(inventory: Inventory, filter_text: str, looked_in: Iterable[str] = (),
               config_path: str = "") -> str:
    """The message for an empty table, as plain text ("" when there is nothing to say)."""
    statuses = inventory.statuses
    if not statuses:
        lines = ["No remotes found: no LXD or Incus remote, no local QEMU or LXC."]
        looked = [p for p in looked_in if p]
        if looked:
            lines.append("Looked for " + ", ".join(_home(p) for p in looked) + ".")
        lines.append("")
        lines.append("Press + to add one: its address and a trust token, which `lxc config "
                     "trust add` (or `incus config trust add NAME`) prints on the server.")
        lines.append("Or add it with `lxc remote add` / `incus remote add`"
                     + (f", or as a [[remote]] in {_home(config_path)}." if config_path
                        else "."))
        return "\n".join(lines)
    if inventory.instances and filter_text.strip():
        return (f"No instance matches “{filter_text.strip()}” "
                f"({len(inventory.instances)} hidden). Press esc to clear the filter, "
                f"/ to change it.")
    if inventory.instances:
        return ""
    connecting = [n for n, st in statuses.items() if st.state is ConnectionState.CONNECTING
                  or (st.state is ConnectionState.CONNECTED and not st.listed)]
    empty = [n for n, st in statuses.items() if st.state is ConnectionState.CONNECTED
             and st.listed]
    broken = [(n, st) for n, st in statuses.items()
              if st.state not in (ConnectionState.CONNECTING, ConnectionState.CONNECTED)]
    lines = []
    if empty:
        lines.append(f"No instances yet on {', '.join(sorted(empty))}. Press N to create "
                     f"one (on the remote selected with 1), + to add another remote.")
    if connecting:
        lines.append(f"Connecting to {', '.join(sorted(connecting))}…")
    for name, st in sorted(broken, key=lambda b: b[0]):
        lines.append(f"{name}: {st.message or st.state.value}")
    if broken:
        lines.append("R reconnects the selected remote once the problem is fixed.")
    return "\n".join(lines)


class EmptyState(Plain):
    """Shown under the table's header while the table has no rows."""

    def __init__(self, *, looked_in: Iterable[str] = (), config_path: str = "",
                 id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)
        self.looked_in = tuple(looked_in)
        self.config_path = config_path
        self._shown = ""

    def show(self, inventory: Inventory, filter_text: str, table: Widget, rows: int) -> None:
        """Update for ``table`` with ``rows`` rows (hidden as soon as there is one); the
        table shrinks to its header while the message is shown."""
        text = "" if rows else empty_text(inventory, filter_text, self.looked_in,
                                          self.config_path)
        self.set_class(bool(text), "-visible")
        table.set_class(bool(text), "-empty")
        if text != self._shown:
            self._shown = text
            self.update(external(text, lines=True))
