"""Every key counts: keys typed in one burst (a fast typist, a paste, ``tmux send-keys``)
land, in order, in what the key before them opened — never on the instance table.

Keys are posted to the app the way the terminal driver posts one read's worth of input:
all at once, with no pause in between (Pilot's ``press`` waits for the app between keys,
which hides every one of these races).
"""

# ruff: noqa: F811 - pytest fixtures imported from test_fake_app are parameters here
from __future__ import annotations

import asyncio

from textual import events
from textual.widgets import Input

from backends.fake import FakeBackend, RecordingSession
from backends.models import Capability, InstanceStatus, InstanceType, Remote
from tui._textual_compat import XTermParser, key_name
from tui.app import make_app
from tui.driver import AltKeys
from tui.screens.add_remote import AddRemoteDialog
from tui.screens.dialogs import ConfirmDialog
from tui.screens.limits import LimitsScreen
from tui.screens.help import HelpScreen
from tui.screens.main import MainScreen
from tui.screens.wizard import WizardScreen
from tui.widgets.instance_table import InstanceTable
from tui.views.command import CommandLine
from tui.views.table import ResourceTable
from tui.widgets.terminal import TerminalView

from .test_fake_app import fake_env, running, select, settle, table_rows  # noqa: F401

NAMES = {"/": "slash", "\r": "enter", " ": "space", ":": "colon", "?": "question_mark",
         "\t": "tab", "=": "equals_sign", "-": "minus", "+": "plus"}


def burst(app, *keys: str) -> None:
    """Post ``keys`` as one read of the terminal: single characters as typed, longer
    names as keys (``ctrl+n``, ``escape``)."""
    for key in keys:
        if len(key) == 1:
            app.post_message(events.Key(NAMES.get(key, key), key))
        else:
            app.post_message(events.Key(key, None))


def read(app, text: str) -> list[str]:
    """Post ``text`` as one read of the terminal, as corral's input thread does
    (tui/driver.py: Esc then punctuation made one Alt key, the rest through Textual's own
    key parser, flushed as its time-out would); the key names, to say what came."""
    parser, names = XTermParser(), []
    for piece in AltKeys(key_name).pieces(text):
        keys = [e for e in (parser.feed(piece) if isinstance(piece, str) else [piece])
                if isinstance(e, events.Key)]
        for key in keys:
            app.post_message(key)
        names += [k.key for k in keys]
    for key in parser.feed(""):  # (what the parser holds for its time-out: a lone Esc)
        if isinstance(key, events.Key):
            app.post_message(key)
            names.append(key.key)
    return names


def typed(text: str) -> list[str]:
    return list(text)


def cursor(app) -> int:
    return app.main_screen.query_one(InstanceTable).cursor_row


async def test_filter_burst_lands_in_the_filter(fake_env):
    async with running(fake_env) as (app, pilot):
        burst(app, *typed("/web1\r"))
        await settle(pilot, app)
        assert app.main_screen.query_one("#filter", Input).value == "web1"
        assert set(table_rows(app)) == {"alpha:web1"}
        assert isinstance(app.focused, InstanceTable)  # enter went back to the table
        assert isinstance(app.screen, MainScreen)  # no verb key opened anything
        # a longer one with key=value, then a key that belongs to the table again
        burst(app, *typed("/"), "ctrl+u", *typed("db remote=beta\r"), "j")
        await settle(pilot, app)
        assert app.main_screen.query_one("#filter", Input).value == "db remote=beta"
        assert set(table_rows(app)) == {"beta:db1"}
        assert isinstance(app.screen, MainScreen)


async def test_a_run_of_text_in_a_burst_filters_the_table_once(fake_env, monkeypatch):
    """A paste or a fast typist's word reaches the filter box as one run: the table is
    filtered for the whole word, not once per letter behind a round trip each (at start,
    with every remote connecting, each of those took tens of milliseconds)."""
    from tui.screens.main import MainScreen as Main

    applied: list[str] = []
    apply = Main._apply_filter_once

    def counted(self):
        applied.append(self.query_one("#filter", Input).value)
        return apply(self)

    monkeypatch.setattr(Main, "_apply_filter_once", counted)
    async with running(fake_env) as (app, pilot):
        burst(app, *typed("/alpha-web1\r"))
        await settle(pilot, app)
        assert app.main_screen.query_one("#filter", Input).value == "alpha-web1"
        assert applied == ["alpha-web1"]


async def test_command_line_burst_switches_the_view(fake_env):
    async with running(fake_env) as (app, pilot):
        burst(app, *typed(":re\r"))
        await settle(pilot, app)
        assert app.main_screen.views.name == "remotes"
        burst(app, *typed(":op\r"))
        await settle(pilot, app)
        assert app.main_screen.views.name == "operations"
        burst(app, *typed(":in\r"))
        await settle(pilot, app)
        assert app.main_screen.views.name == "instances"


async def test_keys_after_a_dialog_key_go_to_the_dialog(fake_env):
    """For each key that opens a dialog, the key after it (``j``: cursor down on the
    table) must reach the dialog, not move the table; ``escape`` then closes it."""
    backends = fake_env[3]
    async with running(fake_env) as (app, pilot):
        for key, screen in (("d", ConfirmDialog), ("?", HelpScreen), ("N", WizardScreen),
                            ("L", LimitsScreen), ("+", AddRemoteDialog)):
            select(app, "alpha:web1")
            await settle(pilot, app)
            row = cursor(app)
            burst(app, key, "j")
            await settle(pilot, app)
            assert isinstance(app.screen, screen), (key, app.screen)
            assert cursor(app) == row, f"the j after {key} moved the table"
            burst(app, "escape")
            await settle(pilot, app)
            assert isinstance(app.screen, MainScreen), key
        # w: the operations view, its table takes the j; escape goes back to the instances
        select(app, "alpha:web1")
        await settle(pilot, app)
        row = cursor(app)
        burst(app, "w", "j")
        await settle(pilot, app)
        assert app.main_screen.views.name == "operations"
        assert isinstance(app.focused, ResourceTable)
        assert cursor(app) == row, "the j after w moved the instance table"
        burst(app, "escape")
        await settle(pilot, app)
        assert app.main_screen.views.name == "instances" and cursor(app) == row
        # d then enter: the enter lands on the dialog's Cancel (its first focus)
        select(app, "alpha:web1")
        await settle(pilot, app)
        burst(app, "d", "enter")
        await settle(pilot, app)
        assert isinstance(app.screen, MainScreen)
        assert "alpha:web1" in table_rows(app)
        assert not any(c[0] == "delete" for c in backends["alpha"].calls)


async def test_wizard_opening_key_then_next_in_one_burst(fake_env):
    async with running(fake_env) as (app, pilot):
        burst(app, "N", "ctrl+n")
        await settle(pilot, app)
        assert isinstance(app.screen, WizardScreen)
        assert app.screen.step != "where", "ctrl+n right after N was lost"


async def test_escape_then_a_key_in_one_read_are_both_kept(fake_env):
    """A terminal sends Alt+N as Esc N, so Esc then N typed fast arrive in one read and
    Textual's parser names them ``alt+shift+n``. Nothing binds that: it is Esc (the help
    closes), then N (the wizard opens) - not one key that nothing handles."""
    async with running(fake_env) as (app, pilot):
        for opener, screen in (("?", HelpScreen), ("w", MainScreen)):
            burst(app, opener)
            await settle(pilot, app)
            assert isinstance(app.screen, screen)
            if opener == "w":  # the operations view: its Esc goes back to the instances
                assert app.main_screen.views.name == "operations"
            app.post_message(events.Key("alt+shift+n", "N"))  # what the parser makes of Esc N
            await settle(pilot, app)
            assert isinstance(app.screen, WizardScreen), (opener, app.screen)
            burst(app, "escape")
            await settle(pilot, app)
            assert isinstance(app.screen, MainScreen)
            assert app.main_screen.views.name == "instances"
        # lower case, on the table: Esc (nothing to close) then j moves the cursor
        select(app, "alpha:web1")
        await settle(pilot, app)
        row = cursor(app)
        app.post_message(events.Key("alt+j", "j"))
        await settle(pilot, app)
        assert cursor(app) == row + 1


async def test_escape_then_a_command_line_in_one_read_after_a_filter(fake_env):
    """``/web⏎`` and then ``Esc :op⏎`` in one read, through the terminal's key parser:
    Esc and ``:`` come as one key, ``alt+colon``, which must be Esc then ``:`` as Textual
    names it alone (``colon``) - the command line opens, ``op`` goes in it, not into
    the filter - and the same for an upper-case letter (``alt+shift+n``: ``N``)."""
    async with running(fake_env) as (app, pilot):
        read(app, "/web\r")
        await settle(pilot, app)
        assert app.main_screen.query_one("#filter", Input).value == "web"
        assert "alt+colon" in read(app, "\x1b:op\r")
        await settle(pilot, app)
        assert app.main_screen.views.name == "operations"
        assert app.main_screen.query_one("#filter", Input).value != "web:op"
        read(app, "\x1b:in\r")
        await settle(pilot, app)
        assert app.main_screen.views.name == "instances"
        assert "alt+shift+n" in read(app, "\x1bN")
        await settle(pilot, app)
        assert isinstance(app.screen, WizardScreen), app.screen


async def test_focus_stays_in_the_filter_while_everything_changes(fake_env):
    backends = fake_env[3]
    async with running(fake_env) as (app, pilot):
        burst(app, *typed("/we"))
        await settle(pilot, app)
        box = app.main_screen.query_one("#filter", Input)
        for status in (InstanceStatus.RUNNING, InstanceStatus.STOPPED,
                       InstanceStatus.RUNNING):
            backends["alpha"].set_status("web2", status)  # rows change underneath
            burst(app, "b")
            await asyncio.sleep(0.05)
        app.main_screen.action_retry_remote()  # the remote's state changes
        await asyncio.sleep(0.05)
        burst(app, *typed("1"))
        app.main_screen._sample(reschedule=False)  # metrics arrive
        await settle(pilot, app)
        assert box.value == "webbb1"
        assert app.focused is box
        assert isinstance(app.screen, MainScreen)


async def test_keys_typed_before_the_ui_is_up_are_kept(fake_env, monkeypatch):
    """A key typed while corral starts waits for the main screen, then goes where it
    would have gone had the UI been there at once."""
    cfg, env, factory, _ = fake_env
    original = MainScreen.on_mount

    def early_keys(self):
        burst(self.app, *typed("/db\r"))  # before the screen has mounted its table
        original(self)

    monkeypatch.setattr(MainScreen, "on_mount", early_keys)
    app = make_app(cfg, env=env, factory=factory)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        for _ in range(40):
            if set(table_rows(app)) == {"beta:db1"}:
                break
            await pilot.pause(0.05)
        assert app.main_screen.query_one("#filter", Input).value == "db"
        assert set(table_rows(app)) == {"beta:db1"}


class ConsoleFake(FakeBackend):
    capabilities = FakeBackend.capabilities | {Capability.CONSOLE, Capability.EXEC}
    opened: list[RecordingSession] = []

    async def open_console(self, ref, *, width=80, height=24, kind="console"):
        await asyncio.sleep(0.3)  # the daemon takes its time: keys typed meanwhile wait
        session = RecordingSession(start_delay=0.2)  # the handshake: keys wait
        ConsoleFake.opened.append(session)
        return session

    async def open_shell(self, ref, command=None, *, width=80, height=24):
        return await self.open_console(ref, width=width, height=height)


async def test_text_typed_after_c_or_e_reaches_the_instance(fake_env):
    cfg, env, _, _ = fake_env

    def factory(remote: Remote, timeout: float):
        return ConsoleFake(remote, instances=[("web1", InstanceType.CONTAINER,
                                                InstanceStatus.RUNNING)])

    ConsoleFake.opened = []
    app = make_app(cfg, env=env, factory=factory)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        for key in ("c", "e"):
            select(app, "alpha:web1")
            await settle(pilot, app)
            before = len(ConsoleFake.opened)
            burst(app, key, *typed("echo hi"), "enter")
            for _ in range(60):
                if len(ConsoleFake.opened) > before and \
                        bytes(ConsoleFake.opened[-1].sent).endswith(b"\r"):
                    break
                await pilot.pause(0.05)
            assert len(ConsoleFake.opened) == before + 1, f"{key} opened no console"
            assert bytes(ConsoleFake.opened[-1].sent) == b"echo hi\r", key
            assert not ConsoleFake.opened[-1].too_early  # (a real session drops those)
            assert isinstance(app.focused, TerminalView)
            # in a console Alt+b stays Alt+b: the guest gets the Esc b a terminal sends
            session = ConsoleFake.opened[-1]
            sent = len(session.sent)
            app.post_message(events.Key("alt+b", "b"))
            for _ in range(60):
                if len(session.sent) > sent:
                    break
                await pilot.pause(0.05)
            assert bytes(session.sent[sent:]) == b"\x1bb", key
            assert not app.main_screen.query_one(InstanceTable).marked  # the space…
            burst(app, "ctrl+right_square_bracket")  # leave the console
            await settle(pilot, app)
        assert len(ConsoleFake.opened) == 2  # e and c of the text opened nothing more


class SlowConnect(FakeBackend):
    """A remote whose daemon answers only when the test says (``gate``), or fails."""

    gate: asyncio.Event
    fail = False

    async def connect(self):
        await SlowConnect.gate.wait()
        if SlowConnect.fail:
            from backends.errors import Unreachable
            raise Unreachable("connection refused")
        return await super().connect()


async def _verb_while_connecting(fake_env, *, fail: bool):
    cfg, env, _, _ = fake_env
    made = {}
    SlowConnect.gate, SlowConnect.fail = asyncio.Event(), fail

    def factory(remote: Remote, timeout: float):
        made[remote.name] = SlowConnect(remote, instances=[
            ("web1", InstanceType.CONTAINER, InstanceStatus.RUNNING)] if remote.name ==
            "alpha" else [])
        return made[remote.name]

    app = make_app(cfg, env=env, factory=factory)
    seen = []
    original = app.notify
    app.notify = lambda message, **kw: (seen.append(message), original(message, **kw))
    # the rows of the last run, shown while the remote connects
    from backends.models import Instance, InstanceRef
    app.inventory.seed("alpha", [Instance(ref=InstanceRef("alpha", "web1"),
                                          type=InstanceType.CONTAINER,
                                          status=InstanceStatus.RUNNING, image="busybox")])
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        select(app, "alpha:web1")
        await settle(pilot, app)
        burst(app, "s", "j")  # stop, then a key for the table
        await settle(pilot, app)
        assert any("Stop alpha:web1: waiting for alpha" in m for m in seen), seen
        assert not made["alpha"].calls
        SlowConnect.gate.set()
        for _ in range(60):
            if made["alpha"].calls or any("was not done" in m for m in seen):
                break
            await pilot.pause(0.05)
        return made["alpha"].calls, seen


async def test_a_verb_on_a_connecting_remote_runs_once_it_connects(fake_env):
    calls, _ = await _verb_while_connecting(fake_env, fail=False)
    assert calls[0][:2] == ("stop", "web1")


async def test_a_verb_on_a_remote_that_fails_is_refused_in_words(fake_env):
    calls, seen = await _verb_while_connecting(fake_env, fail=True)
    assert not calls
    assert any("Stop alpha:web1 was not done: alpha is" in m for m in seen), seen


async def test_ctrl_q_quits_even_while_keys_are_held(fake_env):
    """A flow that waits for a remote holds the keys typed after it; the app's own quit
    key is never held behind it."""
    async with running(fake_env) as (app, pilot):
        never = asyncio.Event()

        async def hangs(ctx):
            await never.wait()

        from tui.actions import BY_NAME
        app.main_screen.run_worker(hangs(None), group="test-hold")
        worker = next(w for w in app.workers if w.group == "test-hold")
        app.keys.hold(worker, BY_NAME["new"].label)
        burst(app, "j", "ctrl+q")
        for _ in range(40):
            if not app.is_running:
                break
            await pilot.pause(0.05)
        assert app._exit, "ctrl+q waited behind a held flow"


async def test_palette_burst_runs_what_was_typed(fake_env, monkeypatch):
    """ctrl+p, the entry's words and enter in one write: the palette takes them all, and
    enter waits for the search of what was typed (it takes a while over many instances:
    an enter before its results picks nothing, or what matched a shorter text)."""
    from tui.commands import InstanceCommands

    search = InstanceCommands.search

    async def slow_search(self, query):
        await asyncio.sleep(0.3)  # thousands of entries to match
        async for hit in search(self, query):
            yield hit

    monkeypatch.setattr(InstanceCommands, "search", slow_search)
    backends = fake_env[3]
    async with running(fake_env) as (app, pilot):
        burst(app, "ctrl+p", *typed("Stop beta:db1"), "enter")  # no pause at all
        for _ in range(60):
            if backends["beta"].calls:
                break
            await pilot.pause(0.05)
        assert backends["beta"].calls and backends["beta"].calls[0][:2] == ("stop", "db1")
        assert not backends["alpha"].calls  # no letter of it reached the table as a verb



async def _refused_burst(app, pilot, seen, key, ref="alpha:web2"):
    """``key`` then ``echo lx-$((1+2))`` and enter in one read on ``ref``: every key after
    ``key`` dropped, in words, none run on the table (a space marks, ``-`` removes a
    remote, ``e`` and ``c`` open things)."""
    table = app.main_screen.query_one(InstanceTable)
    select(app, ref)
    await settle(pilot, app)
    row, dropped = cursor(app), app.keys.dropped
    text = "echo lx-$((1+2))"
    burst(app, key, *typed(text), "enter")
    await settle(pilot, app)
    assert app.keys.dropped - dropped == len(text) + 1, (key, seen)
    assert any(f"{len(text) + 1} keys typed after it were not used" in m for m in seen), seen
    assert isinstance(app.screen, MainScreen), key  # no dialog of "-" nor "?"
    assert isinstance(app.focused, InstanceTable), key
    assert not table.marked and cursor(app) == row, key
    assert not app.main_screen.query(TerminalView), key
    burst(app, "j")  # the keys after it are the table's again
    await settle(pilot, app)
    assert cursor(app) == row + 1, key


def _seen(app) -> list[str]:
    seen: list[str] = []
    original = app.notify
    app.notify = lambda message, **kw: (seen.append(message), original(message, **kw))
    return seen


async def test_text_after_a_refused_opening_key_is_not_run(fake_env):
    """``e`` or ``c`` on a stopped instance is refused in words before any flow starts
    (the key is greyed): the text typed after it in the same burst is not run."""
    cfg, env, _, _ = fake_env

    def factory(remote: Remote, timeout: float):
        return ConsoleFake(remote, instances=[
            ("web1", InstanceType.CONTAINER, InstanceStatus.RUNNING),
            ("web2", InstanceType.CONTAINER, InstanceStatus.STOPPED),
            ("web3", InstanceType.CONTAINER, InstanceStatus.RUNNING)])

    ConsoleFake.opened = []
    app = make_app(cfg, env=env, factory=factory)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        seen = _seen(app)
        for key in ("e", "c"):
            await _refused_burst(app, pilot, seen, key)
            assert any("not possible for alpha:web2: it is stopped" in m for m in seen), seen
            seen.clear()
        assert ConsoleFake.opened == []


async def test_text_after_an_opening_key_the_remote_cannot_do_is_not_run(fake_env):
    """The same where the key is not offered at all (a remote with no shell, no
    snapshots) or cannot be now (``t``: back into a console, with none open)."""
    backends = fake_env[3]
    async with running(fake_env) as (app, pilot):
        seen = _seen(app)
        for key in ("e", "c", "i", "t"):
            await _refused_burst(app, pilot, seen, key, ref="alpha:web1")
        assert backends["alpha"].calls == [] and backends["beta"].calls == []


async def test_text_after_an_opening_key_with_nothing_selected_is_not_run(fake_env):
    """The same when the key is refused for want of a row (a filter that keeps none)."""
    async with running(fake_env) as (app, pilot):
        burst(app, *typed("/nothing-here\r"))
        await settle(pilot, app)
        assert table_rows(app) == {}
        dropped = app.keys.dropped
        burst(app, "d", *typed("ls -l"), "enter")
        await settle(pilot, app)
        assert app.keys.dropped - dropped == 6
        assert isinstance(app.screen, MainScreen)
        assert app.main_screen.query_one("#filter", Input).value == "nothing-here"


async def test_text_after_a_refused_view_verb_is_not_run(fake_env):
    """A view's verb refused for want of a row (``:profiles`` with none): the keys typed
    after it in the burst are dropped, in words, as the instance table's are."""
    from .test_views_follow_fake import SlowProfiles

    cfg, env, _, _ = fake_env

    def factory(remote, timeout):
        backend = SlowProfiles(remote, timeout=timeout)
        backend.profiles = []
        return backend

    app = make_app(cfg, env=env, factory=factory)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        burst(app, *typed(":profiles\r"))
        await settle(pilot, app)
        assert isinstance(app.focused, ResourceTable)
        seen = _seen(app)
        dropped = app.keys.dropped
        burst(app, "m", *typed("new-name"), "enter")
        await settle(pilot, app)
        assert app.keys.dropped - dropped == 9, seen
        assert any("Rename (profiles) opened nothing" in m for m in seen), seen
        assert isinstance(app.screen, MainScreen) and isinstance(app.focused, ResourceTable)


def _connecting(fake_env, kind=None, *, fail=False):
    """corral on remotes that connect when the test sets ``SlowConnect.gate`` (or fail
    then), alpha's web1 shown from the last run meanwhile: (app, what it said)."""
    from backends.models import Instance, InstanceRef

    cfg, env, _, _ = fake_env
    SlowConnect.gate, SlowConnect.fail = asyncio.Event(), fail
    web1 = ("web1", InstanceType.CONTAINER, InstanceStatus.RUNNING)
    app = make_app(cfg, env=env, factory=lambda remote, timeout: (kind or SlowConnect)(
        remote, instances=[web1] if remote.name == "alpha" else []))
    app.inventory.seed("alpha", [Instance(ref=InstanceRef("alpha", "web1"),
                                          type=InstanceType.CONTAINER,
                                          status=InstanceStatus.RUNNING, image="busybox")])
    return app, _seen(app)


async def _connect_then_settle(pilot, app, done) -> None:
    """Let the remote answer; then until ``done()`` and the key gate is idle."""
    SlowConnect.gate.set()
    for _ in range(60):
        if done() and app.keys.idle:
            break
        await pilot.pause(0.05)
    await settle(pilot, app)


async def test_the_actions_menu_on_a_connecting_remote_opens_once_it_connects(fake_env):
    """``a`` on a row of a remote still connecting (the rows of the last run are shown)
    waits for it, says so, then opens the menu; the keys typed after ``a`` go there."""
    from textual.widgets import OptionList

    from tui.screens.dialogs import ActionsMenu

    class Offers(SlowConnect):  # a menu of three: export, clone, profiles
        capabilities = SlowConnect.capabilities | {Capability.EXPORT, Capability.CLONE,
                                                   Capability.PROFILES}

    app, seen = _connecting(fake_env, Offers)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        select(app, "alpha:web1")
        await settle(pilot, app)
        burst(app, "a", "down", "down")
        await settle(pilot, app)
        assert any("Actions alpha:web1: waiting for alpha" in m for m in seen), seen
        assert isinstance(app.screen, MainScreen) and cursor(app) == 0
        await _connect_then_settle(pilot, app, lambda: isinstance(app.screen, ActionsMenu))
        assert isinstance(app.screen, ActionsMenu), seen
        assert app.screen.query_one(OptionList).highlighted == 2  # both downs went there
        assert app.keys.dropped == 0


async def test_the_actions_menu_on_a_remote_that_fails_says_why(fake_env):
    app, seen = _connecting(fake_env, fail=True)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        select(app, "alpha:web1")
        burst(app, "a", "j", "j")
        await settle(pilot, app)
        await _connect_then_settle(pilot, app, lambda: any(
            "Actions alpha:web1 was not done" in m for m in seen))
        assert any("Actions alpha:web1 was not done: alpha is disconnected" in m
                   for m in seen), seen
        assert app.keys.dropped == 2 and cursor(app) == 0  # the j's moved nothing
        assert isinstance(app.screen, MainScreen)


async def test_the_snapshots_key_on_a_connecting_remote_waits_for_it(fake_env):
    """``i`` on a row of a remote still connecting waits for it; then, the remote offering
    no snapshots, it says so in words, and the key typed after it is not the table's."""
    app, seen = _connecting(fake_env)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        select(app, "alpha:web1")
        burst(app, "i", "j")
        await settle(pilot, app)
        assert any("Snapshots alpha:web1: waiting for alpha" in m for m in seen), seen
        await _connect_then_settle(pilot, app, lambda: any(
            "Snapshots alpha:web1 is not possible now" in m for m in seen))
        assert any("Snapshots alpha:web1 is not possible now" in m for m in seen), seen
        assert app.keys.dropped == 1 and cursor(app) == 0


async def test_a_view_typed_while_its_remote_connects_is_shown_once_it_is(fake_env):
    """``:profiles⏎`` typed the moment corral starts, before any remote offers profiles:
    the command line waits for the remotes, then shows the view; the key typed after
    ``enter`` goes to the view's table."""
    from tui.views.pane import ResourcePane

    from .test_views_follow_fake import SlowProfiles

    class Profiles(SlowConnect, SlowProfiles):
        pass

    app, seen = _connecting(fake_env, Profiles)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        burst(app, *typed(":profiles\r"), "j")
        await settle(pilot, app)
        assert isinstance(app.focused, CommandLine)  # waiting, the text kept
        assert "waiting for the remotes" in str(app.focused.border_title)
        pane = app.main_screen.query_one(ResourcePane)
        await _connect_then_settle(pilot, app, lambda: app.main_screen.views.name == "profiles"
                                   and pane.table.row_count >= 2)
        assert app.main_screen.views.name == "profiles"
        assert isinstance(app.focused, ResourceTable) and app.keys.dropped == 0
        assert pane.table.cursor_row == 1  # the j after enter moved the view's cursor


async def test_an_unknown_view_is_still_said_at_once_while_remotes_connect(fake_env):
    app, seen = _connecting(fake_env)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        burst(app, *typed(":nothing\r"))
        await settle(pilot, app)
        assert "No view 'nothing' here" in str(app.focused.border_title)
