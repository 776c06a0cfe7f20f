"""The main screen's console-tab keys: focus, zoom, close, next/previous, and what happens
when a console is left or the last tab closes."""

from __future__ import annotations

from textual.screen import Screen

from ..widgets.console_dock import ConsoleDock
from ..widgets.instance_table import InstanceTable


class ConsoleActions(Screen[None]):
    """Part of :class:`~tui.screens.main.MainScreen` (a screen of its own only so that
    what it uses of one is known; never shown alone)."""

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

    def on_console_dock_detached(self) -> None:
        """The console's leave key: out of the console, to the table; zoomed, the consoles
        stay full screen with the focus on their tab bar, where ``z``, ``[``, ``]``, ``x``
        and ``t`` work as the help says (and the footer shows them)."""
        if self.has_class("-console-zoom") and self.query_one(ConsoleDock).focus_tabs():
            return
        self.remove_class("-console-zoom")
        self.query_one(InstanceTable).focus()

    def on_console_dock_emptied(self) -> None:
        self.remove_class("-console-zoom")
        self.query_one(InstanceTable).focus()
