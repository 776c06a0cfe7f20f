"""``?``: every key of the current screen, as currently bound (keymap included)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen

from ..format import external
from ..widgets.plain import Plain


def key_rows(screen) -> list[tuple[str, str, str]]:
    """(keys, description, binding id) for every binding on ``screen`` and its widgets, with
    the user's ``[keymap]`` applied."""
    keymap: dict[str, str] = getattr(screen.app, "_keymap", {}) or {}
    merged: dict[tuple[str, str], list[str]] = {}
    for node in [screen.app, screen, *screen.query("*")]:
        for bindings in node._bindings.key_to_bindings.values():
            for b in bindings:
                desc = b.tooltip or b.description
                if not desc:
                    continue
                keys = keymap.get(b.id, b.key) if b.id else b.key
                shown = [screen.app.get_key_display(b.__class__(k, b.action)) if k == b.key
                         else k for k in keys.split(",")]
                slot = merged.setdefault((desc, b.id or ""), [])
                slot += [k for k in shown if k not in slot]
    return [(", ".join(keys), desc, bid) for (desc, bid), keys in merged.items()]


class HelpScreen(ModalScreen[None]):
    """A scrollable overlay listing keys; ``escape``, ``q`` or ``?`` closes it."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss_help", "Close", show=False)]

    def __init__(self, rows: list[tuple[str, str, str]]) -> None:
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        table = Table(box=None, expand=True, show_header=True, header_style="bold")
        table.add_column("Key", style="bold", no_wrap=True)
        table.add_column("Action")
        table.add_column(Text("Binding id (for [keymap])"), style="dim")
        for keys, desc, bid in self.rows:
            table.add_row(external(keys), external(desc), external(bid))
        with VerticalScroll(id="help") as scroll:
            scroll.border_title = "corral keys — esc to close"
            yield Plain(table)

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
