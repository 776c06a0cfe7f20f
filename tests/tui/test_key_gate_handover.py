"""The key gate and flows that give the terminal to another program (an editor): that
program is what the flow opened, so a key typed once it has ended — while the flow still
applies what was edited — goes on to the app instead of being dropped as if the flow had
opened nothing (a `P` typed right after `E` was lost while the edit was being applied)."""

from __future__ import annotations

import asyncio

from textual import events, work
from textual.app import App
from textual.widgets import Label

from tui.keyboard import KeyGate, handed_over


class Tiny(App):
    """The app's side of the gate as corral's app has it (``CorralApp.on_event``)."""

    BINDINGS = [("e", "edit", "Edit"), ("p", "profiles", "Profiles")]

    def __init__(self, hand_over: bool) -> None:
        super().__init__()
        self.hand_over = hand_over
        self.notes: list[str] = []
        self.keys = KeyGate(self, notify=self.notes.append)
        self.editor_done = asyncio.Event()
        self.applied = asyncio.Event()
        self.ran: list[str] = []

    def compose(self):
        yield Label("main")

    open_at_mount = True

    def on_mount(self) -> None:
        if self.open_at_mount:
            self.keys.open()

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, (events.Key, events.Paste)) and not event.is_forwarded:
            if self.keys.admit(event) and self._screen_stack:
                await super().on_event(event)
                self.keys.dispatched(event)
            return
        await super().on_event(event)

    def action_edit(self) -> None:
        self.keys.hold(self._edit(), "Edit c1")

    @work
    async def _edit(self) -> None:
        if self.hand_over:
            handed_over(self)  # the editor gets the terminal
        self.editor_done.set()  # (the editor has ended)
        await self.applied.wait()  # the edit is being applied (a daemon round trip)

    def action_profiles(self) -> None:
        self.ran.append("profiles")


async def _type_after_the_editor(hand_over: bool) -> Tiny:
    app = Tiny(hand_over)
    async with app.run_test() as pilot:
        await pilot.press("e")
        await asyncio.wait_for(app.editor_done.wait(), 10)
        app.post_message(events.Key("p", "p"))  # typed once the editor has ended
        await pilot.pause(0.2)
        app.applied.set()
        for _ in range(100):
            if app.ran or app.notes:
                break
            await pilot.pause(0.05)
    return app


async def test_a_key_typed_after_the_editor_ended_is_not_dropped():
    app = await _type_after_the_editor(hand_over=True)
    assert app.ran == ["profiles"] and app.notes == []


async def test_without_the_hand_over_the_flow_opened_nothing_and_its_keys_are_dropped():
    """(What the gate does for a flow that opened nothing: the key is not the table's.)"""
    app = await _type_after_the_editor(hand_over=False)
    assert app.ran == []
    assert app.notes == ["Edit c1 opened nothing: the 1 key typed after it were not used."]


class Late(Tiny):
    """The gate opens only when the test says (corral's opens once its main screen is up)."""

    open_at_mount = False


async def test_the_keys_typed_before_the_ui_was_ready_are_handled_before_the_remotes_connect():
    """The remotes connect once the keys typed while corral started are handled
    (``typed_ahead``): their imports and handshakes are not in the way of the user's filter.
    With nothing typed, at once; a verb whose flow waits (for that very remote) counts as
    handled, or the two would wait for each other."""
    app = Late(hand_over=False)
    async with app.run_test() as pilot:
        for key in "pp":
            app.post_message(events.Key(key, key))  # typed while corral started
        await pilot.pause(0.1)
        assert not app.keys.typed_ahead.is_set() and app.ran == []
        app.keys.open()
        await asyncio.wait_for(app.keys.typed_ahead.wait(), 10)
        assert app.ran == ["profiles", "profiles"]  # handled first

    app = Late(hand_over=False)
    async with app.run_test() as pilot:
        app.keys.open()  # nothing typed
        assert app.keys.typed_ahead.is_set()

    app = Late(hand_over=False)
    async with app.run_test() as pilot:
        app.post_message(events.Key("e", "e"))  # a flow that waits (the edit is applied)
        app.post_message(events.Key("p", "p"))
        await pilot.pause(0.1)
        app.keys.open()
        await asyncio.wait_for(app.keys.typed_ahead.wait(), 10)
        assert app.ran == []  # the p waits behind the flow, which waits for the remote
        app.applied.set()
