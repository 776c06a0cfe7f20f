"""The console dock: open consoles and shells as tabs beside (or instead of) the table.

Each tab is a :class:`~tui.widgets.terminal.TerminalView` on one console session (or a
:class:`~tui.widgets.graphic_console.GraphicView` on a VM's graphical screen). A tab
stays connected while the user works elsewhere (detach only moves the focus); ``r`` on a
closed console opens a new session in the same tab; closing a tab detaches its session
(local consoles keep running in their console server, an LXD exec shell ends).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Awaitable, Callable, cast

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.widgets import TabbedContent, TabPane, Tabs

from backends.base import ConsoleSession
from backends.errors import BackendError
from backends.models import InstanceRef
from backends.screen import ScreenSession

from ..actions import ACTIONS
from ..format import printable
from . import view_messages

if TYPE_CHECKING:  # the views are imported with the first console, not at start-up
    from .graphic_console import GraphicView
    from .terminal import TerminalView

Opener = Callable[[int, int], Awaitable[ConsoleSession | ScreenSession]]
"""Opens a session of the given width and height: a console session for a terminal's tab,
a screen session for a tab opened with a :data:`ViewFactory` (the casts below rely on it)."""

ViewFactory = Callable[[ScreenSession, str], "GraphicView"]
"""Builds the view of a session that is not a terminal (the graphical screen)."""

KIND_LABEL = {"console": "console", "shell": "shell", "vga": "VGA", "screen": "screen"}


@dataclass
class ConsoleTab:
    ref: InstanceRef
    kind: str
    opener: Opener
    pane_id: str
    view: TerminalView | GraphicView


class ConsoleDock(Vertical):
    """Console tabs. Hidden while there is none."""

    BINDINGS = [replace(a, show=True).binding("screen.") for name in (
        "console-zoom", "console-focus", "console-next", "console-previous", "console-close",
        "special-keys", "screenshot") for a in ACTIONS if a.name == name and a.key]
    """The console tabs' keys, in the footer while the tab bar has the focus (inside a
    console the screen offers none of them: every key goes to the console)."""

    DEFAULT_CSS = """
    ConsoleDock {
        display: none;
        height: 3fr;
        &.-open { display: block; }
        TabbedContent { height: 1fr; }
        TabPane { padding: 0; height: 1fr; }
        ContentSwitcher { height: 1fr; }
    }
    """

    class Detached(Message):
        """The user left a console (detach key): the screen moves the focus away."""

    class Emptied(Message):
        """The last console tab was closed."""

    def __init__(self, *, detach_key: str = "ctrl+right_square_bracket",
                 record_dir: str = "", id: str | None = None) -> None:
        super().__init__(id=id)
        self.detach_key = detach_key
        self.record_dir = record_dir
        self.tabs: dict[str, ConsoleTab] = {}
        self._ids = itertools.count(1)
        self._reconnecting: set[str] = set()

    def compose(self) -> ComposeResult:
        yield TabbedContent()

    @property
    def tabbed(self) -> TabbedContent:
        return self.query_one(TabbedContent)

    # Opening ---------------------------------------------------------------------------

    def find(self, ref: InstanceRef, kind: str) -> ConsoleTab | None:
        return next((t for t in self.tabs.values() if t.ref == ref and t.kind == kind), None)

    @property
    def active(self) -> ConsoleTab | None:
        pane = self.tabbed.active_pane
        return self.tabs.get(pane.id) if pane is not None and pane.id else None

    def _console_size(self) -> tuple[int, int]:
        width, height = self.size.width or self.app.size.width, self.size.height
        return max(20, width - 2), max(5, (height or self.app.size.height // 2) - 4)

    async def open(self, ref: InstanceRef, kind: str, opener: Opener,
                   make_view: ViewFactory | None = None) -> ConsoleTab:
        """Show the console ``kind`` of ``ref``: its tab if open (reconnected if it had
        ended), else a new tab on a new session (drawn by ``make_view`` when given, else
        by a terminal).

        Raises:
            BackendError: the session could not be opened (nothing is added).
        """
        tab = self.find(ref, kind)
        if tab is not None:
            self._opened(True)
            self.tabbed.active = tab.pane_id
            if tab.view.is_closed:
                await self._reconnect(tab)
            tab.view.focus()
            return tab
        width, height = self._console_size()
        session = await opener(width, height)
        pane_id = f"console-{next(self._ids)}"
        title = f"{ref} · {KIND_LABEL.get(kind, kind)}"
        record = None
        if self.record_dir and make_view is None:
            directory = Path(self.record_dir).expanduser()
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            stamp = time.strftime("%Y%m%d-%H%M%S")
            record = directory / f"{ref.remote}-{ref.name}-{kind}-{stamp}.cast"
        view: TerminalView | GraphicView
        if make_view is not None:
            view = make_view(cast(ScreenSession, session), title)
        else:
            from .terminal import TerminalView

            view = TerminalView(cast(ConsoleSession, session), title,
                                detach_key=self.detach_key, record_path=record)
        tab = ConsoleTab(ref, kind, opener, pane_id, view)
        self.tabs[pane_id] = tab
        self._opened(True)
        await self.tabbed.add_pane(TabPane(Content(printable(title)), view, id=pane_id))
        self.tabbed.active = pane_id
        view.focus()
        return tab

    async def _reconnect(self, tab: ConsoleTab) -> None:
        if tab.pane_id in self._reconnecting:
            return  # one reconnect at a time per tab (r pressed twice, or r then c)
        self._reconnecting.add(tab.pane_id)
        try:
            from .terminal import TerminalView

            view = tab.view
            width, height = ((view.emulator.columns, view.emulator.lines)
                             if isinstance(view, TerminalView) else view.size)
            try:
                session = await tab.opener(width, height)
            except BackendError as e:
                self.app.notify(printable(f"Cannot reconnect {tab.ref}: {e}"), severity="error")
                return
            if not tab.view.is_closed or tab.pane_id not in self.tabs:
                await session.close()  # reconnected meanwhile, or the tab went away
                return
            if isinstance(view, TerminalView):
                view.attach(cast(ConsoleSession, session))
            else:
                view.attach(cast(ScreenSession, session))
        finally:
            self._reconnecting.discard(tab.pane_id)

    def _opened(self, is_open: bool) -> None:
        self.set_class(is_open, "-open")
        self.screen.set_class(is_open, "-consoles-open")

    # Tabs ------------------------------------------------------------------------------

    async def close_active(self) -> None:
        tab = self.active
        if tab is None:
            return
        self.tabs.pop(tab.pane_id, None)
        await self.tabbed.remove_pane(tab.pane_id)  # the view closes (detaches) its session
        if not self.tabs:
            self._opened(False)
            self.post_message(self.Emptied())

    def cycle(self, step: int) -> None:
        ids = list(self.tabs)
        if not ids:
            return
        current = self.active
        index = ids.index(current.pane_id) if current else 0
        self.tabbed.active = ids[(index + step) % len(ids)]

    def focus_tabs(self) -> bool:
        """Focus the tab bar (keys go to the screen, not to a console); False: no tab."""
        if not self.tabs:
            return False
        self.tabbed.query_one(Tabs).focus()
        return True

    def focus_active(self) -> bool:
        tab = self.active
        if tab is None:
            return False
        tab.view.focus()
        return True

    # Messages from the views -------------------------------------------------------------

    @on(view_messages.DetachRequested)  # either view's (they subclass these)
    def _view_detach_requested(self, event: Message) -> None:
        event.stop()
        self.post_message(self.Detached())

    @on(view_messages.ReconnectRequested)
    async def _view_reconnect_requested(self, event: view_messages.ReconnectRequested
                                        ) -> None:
        event.stop()
        tab = next((t for t in self.tabs.values() if t.view is event.view), None)
        if tab is not None:
            await self._reconnect(tab)

    @on(view_messages.Closed)
    def _view_closed(self, event: view_messages.Closed) -> None:
        event.stop()
        tab = next((t for t in self.tabs.values() if t.view is event.view), None)
        if tab is not None and event.reason not in ("detached",):
            self.app.notify(printable(f"{tab.ref} {KIND_LABEL.get(tab.kind, tab.kind)}: "
                                      f"{event.reason}"), severity="information", timeout=4)
