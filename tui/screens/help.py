"""``?``: corral's keys on the current screen, as currently bound (keymap included), in
sections: everywhere, the instance table, the remotes pane, the details pane and its
snapshots tab, the console tabs (with the key that leaves a console) and the ``:`` views.
Keys a Textual widget brings by itself (moving the cursor in a text box) are not listed."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen

from .._textual_compat import bindings_map, keymap
from ..actions import ACTIONS, BY_METHOD, Scope
from ..format import external
from ..terminal.keys import key_label
from ..widgets.plain import Plain

Row = tuple[str, str, str]
"""(keys, description, binding id)."""

SECTIONS = ("Everywhere", "Instance table", "Remotes pane (1)", "Details pane (enter)",
            "Snapshots tab (i)", "Console tabs", "Views (:)")

_BY_SCOPE = {Scope.INSTANCE: "Instance table", Scope.REMOTE: "Remotes pane (1)",
             Scope.VIEW: "Everywhere", Scope.CONSOLE: "Console tabs"}

_BY_WIDGET = {"RemoteList": "Remotes pane (1)", "InstanceTable": "Instance table",
              "DetailsPane": "Details pane (enter)",
              "TabScroll": "Details pane (enter)", "ConsoleDock": "Console tabs",
              "ResourcePane": "Views (:)", "ResourceTable": "Views (:)"}


def _own(node) -> set[tuple[str, str, str | None]]:
    """(action, description, id) of the bindings corral's own classes give ``node``."""
    own = set()
    for cls in type(node).__mro__:
        if cls.__module__.startswith("tui."):
            for b in cls.__dict__.get("BINDINGS", ()):
                if isinstance(b, Binding):
                    own.add((b.action, b.description, b.id))
    return own


def _section(node, binding: Binding, screen) -> str | None:
    if node is screen.app:
        return "Everywhere"
    if node is screen:
        entry = BY_METHOD.get(binding.action)
        return _BY_SCOPE.get(entry.scope, "Everywhere") if entry else "Everywhere"
    return _BY_WIDGET.get(type(node).__name__)


def key_rows(screen) -> list[tuple[str, list[Row]]]:
    """(section, rows) for corral's bindings on ``screen`` and its widgets, with the user's
    ``[keymap]`` applied; a key and meaning is listed once, where it belongs."""
    keys_of: dict[str, str] = keymap(screen.app)
    merged: dict[str, dict[tuple[str, str], list[str]]] = {s: {} for s in SECTIONS}
    seen: set[tuple[str, str]] = set()
    for node in [screen.app, screen, *screen.query("*")]:
        own = _own(node)
        for bindings in bindings_map(node).key_to_bindings.values():
            for b in bindings:
                desc = b.tooltip or b.description
                if not desc or (b.action, b.description, b.id) not in own:
                    continue  # a Textual widget's own key
                section = _section(node, b, screen)
                if section is None:
                    continue
                keys = keys_of.get(b.id, b.key) if b.id else b.key
                shown = [screen.app.get_key_display(b.__class__(k, b.action)) if k == b.key
                         else k for k in keys.split(",")]
                meaning = (desc, b.id or "")
                if (shown[0], desc) in seen and meaning not in merged[section]:
                    continue  # the same key and meaning on another widget
                seen.add((shown[0], desc))
                slot = merged[section].setdefault(meaning, [])
                slot += [k for k in shown if k not in slot]
    for a in ACTIONS:  # the snapshots tab is built when the details pane first opens
        if a.scope is Scope.SNAPSHOT and a.key:
            keys = keys_of.get(a.binding_id, a.key) if a.binding_id else a.key
            merged["Snapshots tab (i)"][(a.help, a.binding_id)] = [
                screen.app.get_key_display(Binding(k, a.action)) for k in keys.split(",")]
    merged["Everywhere"][("Command palette: every action and view by name", "")] = ["ctrl+p"]
    detach = getattr(getattr(screen, "settings", None), "detach_key", "")  # (main screen's)
    if detach:
        merged["Console tabs"][("Leave the console (while a console has the focus every "
                                "other key goes to it)", "")] = [key_label(detach)]
    switcher = getattr(screen, "views", None)  # (the main screen's ViewSwitcher)
    for spec in switcher.offered() if switcher is not None else ():
        what = {"instances": "Back to the instance table",
                "remotes": "Every remote: kind, state, project"}.get(
                    spec.name, f"{spec.title} of every remote")
        merged["Views (:)"][(what, "")] = [f":{spec.name}"]
    return [(section, [(", ".join(keys), desc, bid) for (desc, bid), keys in rows.items()])
            for section, rows in merged.items() if rows]


class HelpScreen(ModalScreen[None]):
    """A scrollable overlay listing keys by section; ``escape``, ``q`` or ``?`` closes it."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss_help", "Close", show=False)]

    def __init__(self, sections: list[tuple[str, list[Row]]]) -> None:
        super().__init__()
        self.sections = sections

    @property
    def rows(self) -> list[Row]:
        """Every row of every section."""
        return [row for _, rows in self.sections for row in rows]

    def compose(self) -> ComposeResult:
        table = Table(box=None, expand=True, show_header=True, header_style="bold")
        table.add_column("Key", style="bold", no_wrap=True, max_width=14)
        table.add_column("Action", ratio=1)
        table.add_column(Text("[keymap] id"), style="dim", no_wrap=True)
        for index, (section, rows) in enumerate(self.sections):
            if index:
                table.add_row()
            table.add_row(external(section, "bold underline"))
            for keys, desc, bid in rows:
                table.add_row(external(keys), external(desc), external(bid))
        with VerticalScroll(id="help") as scroll:
            scroll.border_title = "corral keys — esc to close"
            yield Plain(table)

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
