"""Every key whose action opens something (a dialog, a screen, the editor, a pane), on the
instance table, in the snapshots tab and in the ``:`` views: the key typed right after it,
in the same burst, goes there — never to the table the keys were typed on.

The keys come from the action table (``tui/actions.py``): a new key is covered as soon as
it is declared (and a new key without a flow must be said to open something or not,
below)."""

# ruff: noqa: F811 - pytest fixtures imported from test_fake_app are parameters here
from __future__ import annotations

import asyncio

from textual.widgets import DataTable, Input, OptionList

from backends.fake import FakeBackend
from backends.models import (
    Capability,
    ImageInfo,
    Operation,
    Resource,
    ResourceKind,
    Snapshot,
)
from tui.actions import ACTIONS, Scope
from tui.screens.dialogs import ActionsMenu
from tui.screens.files import FilesScreen
from tui.screens.main import MainScreen
from tui.views.command import CommandLine
from tui.views.pane import ResourcePane
from tui.widgets.details import SnapshotTable
from tui.widgets.instance_table import InstanceTable
from tui.widgets.remote_list import RemoteList
from tui.widgets.terminal import TerminalView

from .test_every_key import ConsoleFake, burst
from .test_fake_app import fake_env, running, select, settle  # noqa: F401

OPENS_WITHOUT_FLOW = {"filter": "the filter box", "command": "the command line",
                      "actions": "the actions menu", "operations": "the operations view",
                      "snapshots": "the snapshots tab", "remotes": "the remotes pane",
                      "console-focus": "the console tab"}
"""Keyed actions done by a screen method (no flow) that open something."""
STAYS = {"details", "clear", "retry", "refresh", "instances", "console-zoom",
         "console-close", "console-next", "console-previous"}
"""Keyed actions without a flow that open nothing: the next key is the table's again."""


class Everything(FakeBackend):
    """A remote offering every ability, with two of each object; reads take a moment, as
    a daemon's do (so a dialog opens well after its key has been handled)."""

    capabilities = frozenset(Capability)

    async def _rows(self, kind: ResourceKind, parent: str = "") -> list[Resource]:
        await asyncio.sleep(0.05)
        return [Resource(kind, self.remote.name, n, parent=parent,
                         used_by=("instance web1",)) for n in ("one", "two")]

    async def list_profiles(self):
        return await self._rows(ResourceKind.PROFILE)

    async def list_networks(self):
        return await self._rows(ResourceKind.NETWORK)

    async def list_storage_pools(self):
        return await self._rows(ResourceKind.POOL)

    async def list_volumes(self, pool):
        return await self._rows(ResourceKind.VOLUME, pool)

    async def list_projects(self):
        return await self._rows(ResourceKind.PROJECT)

    async def list_images(self):
        return [ImageInfo(f"{n}0123456789", aliases=(n, f"{n}-b")) for n in ("one", "two")]

    async def list_operations(self):
        return [Operation(f"op-{n}", self.remote.name, f"Backing up {n}", "Running",
                          may_cancel=True) for n in ("one", "two")]

    async def list_snapshots(self, ref):
        return [Snapshot(ref=ref, name="before"), Snapshot(ref=ref, name="after")]

    async def snapshot_counts(self, refs):
        return {r: 2 for r in refs}

    async def snapshot_settings(self, ref):
        await asyncio.sleep(0.1)
        return {}

    async def get_yaml(self, kind, name, parent=""):
        await asyncio.sleep(0.1)
        return f"name: {name}\n", "etag"


def everything(fake_env):
    cfg, env, factory, backends = fake_env

    def make(remote, timeout):
        plain = factory(remote, timeout)
        backends[remote.name] = made = Everything(remote)
        made.data = plain.data
        return made
    return cfg, env, make, backends


def position(widget) -> object:
    """Where the cursor of the table or list the keys were typed on is."""
    if isinstance(widget, DataTable):
        return widget.cursor_row
    if isinstance(widget, OptionList):
        return widget.highlighted
    return None


async def key_then_j(app, pilot, key: str, view: str = "instances") -> str:
    """Type ``key`` and ``j`` in one burst on the focused table (of ``view``): ``j`` must
    not move it, but land in what ``key`` opened (or be dropped, in words, if it opened
    nothing that takes keys: the editor, a flow that said why not). What took it; all
    closed again (``view`` shown again)."""
    table = app.focused
    before, dropped = position(table), app.keys.dropped
    burst(app, key, "j")
    await settle(pilot, app)
    for _ in range(40):  # a flow still opening holds the j
        if app.keys.idle:
            break
        await pilot.pause(0.05)
    await settle(pilot, app)
    if app.focused is app.main_screen.query_one("#filter"):
        assert app.focused.value == "j"  # (it filters the table: its rows change)
    else:
        assert position(table) == before, f"the j after {key} moved {type(table).__name__}"
    took = type(app.screen).__name__ if not isinstance(app.screen, MainScreen) else \
        "dropped" if app.keys.dropped > dropped else type(app.focused).__name__
    assert took != type(table).__name__, f"{key} opened nothing and kept no key"
    for _ in range(4):  # close what it opened
        if isinstance(app.focused, TerminalView):
            burst(app, "ctrl+right_square_bracket")
        elif not isinstance(app.screen, MainScreen) or isinstance(
                app.focused, (Input, CommandLine)) or app.main_screen.views.name != view:
            burst(app, "escape")
        else:
            break
        await settle(pilot, app)
    assert isinstance(app.screen, MainScreen), (key, app.screen)
    assert app.main_screen.views.name == view, (key, app.main_screen.views.name)
    return took


def main_keys(*scopes: Scope) -> list[tuple[str, str]]:
    """(action name, key) of every keyed action of ``scopes`` that opens something."""
    out = []
    for action in ACTIONS:
        if not action.key or action.scope not in scopes:
            continue
        if action.flow is None:
            assert action.name in OPENS_WITHOUT_FLOW or action.name in STAYS, \
                f"does key {action.key} ({action.name}) open something? Say so above"
            # the key gate drops the keys after one refused (tui/keyboard.py): those that
            # can be refused say so in the table; none that opens nothing does
            assert not (action.opening and action.name in STAYS), action.name
            if action.name in STAYS:
                continue
        elif action.background:
            continue
        out += [(action.name, key) for key in action.key.split(",")]
    return out


async def test_every_key_that_opens_something_takes_the_key_after_it(fake_env,
                                                                      monkeypatch):
    monkeypatch.setenv("VISUAL", "true")  # E: an editor that changes nothing
    monkeypatch.delenv("EDITOR", raising=False)
    took = {}
    async with running(everything(fake_env)) as (app, pilot):
        keys = [*main_keys(Scope.INSTANCE, Scope.REMOTE, Scope.VIEW), ("help", "question_mark")]
        assert {"a", "P", "f", "n", "minus", "E", "d", "L", "N", "w"} <= {k for _, k in keys}
        for name, key in keys:
            select(app, "alpha:web1")
            if name == "remove-remote":  # in the remotes pane: its remote
                burst(app, "1")
                await settle(pilot, app)
                assert isinstance(app.focused, RemoteList)
            else:
                app.main_screen.query_one(InstanceTable).focus()
            await settle(pilot, app)
            took[name] = await key_then_j(app, pilot, key)
    assert took["actions"] == ActionsMenu.__name__  # the measured failure: a, then text
    assert took["files"] == FilesScreen.__name__
    assert took["profiles"] == "InputDialog" and took["snapshot"] == "SnapshotDialog"
    assert took["operations"] == "ResourceTable"  # the operations view's
    assert took["edit"] == "dropped"  # the editor had the terminal: not the table's
    assert took["remove-remote"] == "dropped"  # alpha is not corral's to remove: said so


async def test_images_of_a_remote_is_the_images_view_and_takes_the_keys_after(fake_env):
    """"Images of this remote" in the actions menu shows the images view with that
    remote's rows only; the keys typed after the choice, in the same burst, go to that
    view's table (not to the instance table below the menu)."""
    async with running(everything(fake_env)) as (app, pilot):
        pane = app.main_screen.query_one(ResourcePane)
        burst(app, ":", *"images", "enter")  # read once, as a switch before would have
        for _ in range(40):
            if pane.table.row_count == 4:
                break
            await pilot.pause(0.05)
        assert pane.table.row_count == 4  # two images on each remote
        burst(app, "escape")
        await settle(pilot, app)
        select(app, "alpha:web1")
        await settle(pilot, app)
        instances = app.main_screen.query_one(InstanceTable)
        row = instances.cursor_row
        burst(app, "a")
        await settle(pilot, app)
        menu = app.screen.query_one(OptionList)
        ids = [menu.get_option_at_index(i).id for i in range(menu.option_count)]
        burst(app, *["down"] * ids.index("images"), "enter", "j")
        await settle(pilot, app)
        for _ in range(40):
            if app.keys.idle:
                break
            await pilot.pause(0.05)
        assert isinstance(app.screen, MainScreen)
        assert app.main_screen.views.name == "images"
        assert app.main_screen.query_one("#filter", Input).value == "remote=alpha"
        assert {pane.table.items[k].remote for k in pane.table.shown} == {"alpha"}
        assert app.focused is pane.table and pane.table.cursor_row == 1  # the j
        assert instances.cursor_row == row
        burst(app, "escape")  # clears the filter first: every remote's images
        await settle(pilot, app)
        assert pane.table.row_count == 4
        burst(app, "escape")
        await settle(pilot, app)
        assert app.main_screen.views.name == "instances" and app.focused is instances


async def test_snapshot_tab_keys_take_the_key_after_them(fake_env):
    took = {}
    async with running(everything(fake_env)) as (app, pilot):
        for name, key in main_keys(Scope.SNAPSHOT):
            select(app, "alpha:web1")
            await settle(pilot, app)
            if not isinstance(app.focused, SnapshotTable):
                burst(app, "i")  # the snapshots tab, its table focused
                await settle(pilot, app)
            snapshots = app.main_screen.query_one(SnapshotTable)
            for _ in range(40):
                if snapshots.row_count == 2:
                    break
                await pilot.pause(0.05)
            snapshots.focus()
            snapshots.move_cursor(row=0)
            await settle(pilot, app)
            took[name] = await key_then_j(app, pilot, key)
    assert set(took) == {"snapshot-new", "snapshot-restore", "snapshot-delete",
                         "snapshot-rename", "snapshot-schedule"}
    assert "dropped" not in took.values(), took


async def test_view_keys_take_the_key_after_them(fake_env, monkeypatch):
    monkeypatch.setenv("VISUAL", "true")
    monkeypatch.delenv("EDITOR", raising=False)
    took = {}
    async with running(everything(fake_env)) as (app, pilot):
        for verb in ACTIONS:
            if verb.scope is not Scope.ROWS or verb.background:
                continue
            view = verb.view
            if app.main_screen.views.name != view:
                burst(app, ":", *view, "enter")
                await settle(pilot, app)
            pane = app.main_screen.query_one(ResourcePane)
            for _ in range(40):
                if pane.table.row_count >= 2:
                    break
                await pilot.pause(0.05)
            assert pane.table.row_count >= 2, view
            pane.table.focus()
            pane.table.move_cursor(row=0)
            await settle(pilot, app)
            took[verb.name] = await key_then_j(app, pilot, verb.key, view)
    assert took["profiles.edit"] == "dropped"  # the editor's, not the table's
    assert "images.alias-add" in took and "volumes.attach" in took
    assert took["operations.cancel"] == "ConfirmDialog"


async def test_console_tab_keys_take_the_key_after_them(fake_env, monkeypatch):
    from backends.fake import RecordingSession

    monkeypatch.setattr(RecordingSession, "special_keys", (), raising=False)  # none own

    class Consoles(Everything):
        open_console = ConsoleFake.open_console
        open_shell = ConsoleFake.open_shell

    cfg, env, _, backends = everything(fake_env)
    plain = fake_env[2]

    def make(remote, timeout):
        backends[remote.name] = made = Consoles(remote)
        made.data = plain(remote, timeout).data
        return made

    took = {}
    async with running((cfg, env, make, backends)) as (app, pilot):
        select(app, "alpha:web1")
        burst(app, "c")  # a console tab, then back to the table
        for _ in range(60):
            if isinstance(app.focused, TerminalView):
                break
            await pilot.pause(0.05)
        burst(app, "ctrl+right_square_bracket")
        await settle(pilot, app)
        keys = main_keys(Scope.CONSOLE)
        assert ("special-keys", "K") in keys
        for name, key in keys:
            app.main_screen.query_one(InstanceTable).focus()
            await settle(pilot, app)
            took[name] = await key_then_j(app, pilot, key)
    assert took == {"special-keys": "SpecialKeysMenu", "console-focus": "TerminalView"}, took
