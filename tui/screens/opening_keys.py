"""What the main screen's keys open, for the key gate: the text typed after a key that
opens something (a dialog, the actions menu, a console) is that thing's, and is dropped in
words when the key is refused before opening it (tui/keyboard.py)."""

from __future__ import annotations

from textual.css.query import NoMatches
from textual.screen import Screen

from ..actions import BY_METHOD
from ..keyboard import Opens
from ..widgets.instance_table import InstanceTable


class OpeningKeys(Opens, Screen[None]):
    """Part of :class:`~tui.screens.main.MainScreen` (a screen of its own only so that
    what it uses of one is known; never shown alone)."""

    def opens(self, action: str) -> str | None:
        entry = BY_METHOD.get(action)
        if entry is None or not entry.opening:
            return None
        try:
            ref = self.query_one(InstanceTable).selected_ref
        except NoMatches:
            ref = None
        return f"{entry.label} {ref}" if ref is not None else entry.label
