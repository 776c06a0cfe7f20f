"""The messages a console pane posts — its session closed, the detach key, a reconnect asked
for — shared by the text console (:class:`~tui.widgets.terminal.TerminalView`) and the
graphical one (:class:`~tui.widgets.graphic_console.GraphicView`). Each view subclasses them
inside its own class, so the handlers keep the view's name (``on_terminal_view_closed``,
``on_graphic_view_closed``)."""

from __future__ import annotations

from textual.message import Message
from textual.widget import Widget

from .._textual_compat import bind_key


class ConsoleView:
    """What both console views are (a marker: the screen asks whether the focus is in a
    console without importing the views, which load with the first console).

    Each view binds its leave (detach) key to ``leave_hint``, which does nothing: the
    binding names the key in the footer, the view's ``on_key`` leaves (every other key is
    the guest's)."""

    def bind_leave_key(self, key: str) -> None:
        """Bind ``key`` to ``leave_hint`` on this view alone (each is given its own)."""
        assert isinstance(self, Widget), "a console view is a widget"
        bind_key(self, key, "leave_hint", "Leave console")

    def action_leave_hint(self) -> None:
        """Nothing: the view's ``on_key`` handles the leave key."""


class ViewMessage(Message):
    """A message about one view (its ``control``)."""

    def __init__(self, view: Widget) -> None:
        super().__init__()
        self.view = view

    @property
    def control(self) -> Widget:
        return self.view


class Closed(ViewMessage):
    """The session ended; ``reason`` says how."""

    def __init__(self, view: Widget, reason: str) -> None:
        super().__init__(view)
        self.reason = reason


class DetachRequested(ViewMessage):
    """The detach key was pressed (nothing was sent to the guest)."""


class ReconnectRequested(ViewMessage):
    """``r`` was pressed on a closed view: open a new session."""
