"""Escape sequences from outside never reach the terminal (the text gate, on the real app).

A fake remote whose every string — instance names, descriptions, images, profiles,
config, snapshot names and comments, file names and symlink targets, profiles and
networks of the ``:`` views, operations, limits, creation sources, the server's words and
every refusal — carries an OSC 52 clipboard write, a screen clear, BEL, 8-bit CSI/OSC and a
bidi override; a second remote refuses to connect in the same words; a local file in the
push dialog's folder has one in its name. The test walks the table, the details pane and
its tabs, the remotes pane, a refusal, the files panel with its dialogs and path
completion, the resource editor, the launch wizard, a confirmation, the command palette,
the views and their details, and looks at every update Textual would write to the terminal: no segment
of text holds a control character, and the bytes hold no OSC, BEL or C1.
"""

from __future__ import annotations

import re
import sys
from datetime import datetime, timezone
from pathlib import Path

from textual.widgets import Input

from backends.errors import OperationFailed, Unreachable
from backends.fake import FakeBackend
from backends.models import (
    BackendEvent,
    Capability,
    EventKind,
    FileEntry,
    Instance,
    InstanceRef,
    InstanceStatus,
    InstanceType,
    LimitField,
    Operation,
    Remote,
    Resource,
    ResourceKind,
    ServerInfo,
    Snapshot,
)
from backends.create_models import CreateOptions, CreateSource
from tui.app import make_app
from tui.flows import bulk
from tui.screens.dialogs import ConfirmDialog, InputDialog
from tui.screens.files import FilesScreen
from tui.screens.limits import LimitsScreen
from tui.widgets.instance_table import InstanceTable
from tui.widgets.plain import Plain, PlainInput, PlainLabel
from tui.widgets.remote_list import RemoteList

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_real_app import wait_for

PAYLOAD = "\x1b]52;c;cm0gLXJmIH4K\x07\x1b[2J\x07\x9b31m\x9d0;x\x9c\u202e"
"""OSC 52 (sets the clipboard), clear screen, BEL, 8-bit CSI and OSC, right-to-left."""


def evil(word: str) -> str:
    return f"{word}{PAYLOAD}"


NAME = evil("web")
WHEN = datetime(2026, 1, 2, 3, 4, tzinfo=timezone.utc)

CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
OWN = re.compile(r"\x1b\[[0-9;:?]*[A-Za-z]|\x1b\]8;[^\x1b\x07]*\x1b\\")
"""What Textual itself writes: CSI sequences (colours, cursor moves) and OSC 8 links."""


class Hostile(FakeBackend):
    capabilities = FakeBackend.capabilities | {
        Capability.SNAPSHOTS, Capability.FILES, Capability.PROFILES, Capability.NETWORKS}

    async def connect(self) -> ServerInfo:
        return ServerInfo(server=evil("lxd"), version=evil("5.0"), note=evil("note"))

    async def list_instances(self) -> list[Instance]:
        return [Instance(ref=InstanceRef(self.remote.name, NAME), type=InstanceType.CONTAINER,
                         status=InstanceStatus.RUNNING, image=evil("image"),
                         description=evil("description"), profiles=(evil("profile"),),
                         location=evil("member"), created_at=WHEN, snapshot_count=1,
                         config={evil("user.key"): evil("value")},
                         devices={evil("eth0"): {"type": evil("nic")}},
                         extra={"reason": evil("reason")})]

    async def get_instance(self, ref):
        return (await self.list_instances())[0]

    async def freeze(self, ref):
        raise OperationFailed(evil("refused"))

    async def list_snapshots(self, ref):
        return [Snapshot(ref, evil("snap"), created_at=WHEN, comment=evil("comment"))]

    async def list_files(self, ref, path):
        base = path.rstrip("/")
        return [FileEntry(f"{base}/{evil('file')}", "file", size=3),
                FileEntry(f"{base}/{evil('dir')}", "directory"),
                FileEntry(f"{base}/link", "symlink", target=evil("/target"))]

    def _resource(self, kind: ResourceKind, word: str) -> Resource:
        return Resource(kind, self.remote.name, evil(word), description=evil("about"),
                        used_by=(evil("/1.0/instances/x"),),
                        fields=((evil("key"), evil("field")),),
                        config={evil("limits.cpu"): evil("2")},
                        devices={evil("root"): {evil("pool"): evil("p")}})

    async def list_profiles(self):
        return [self._resource(ResourceKind.PROFILE, "profile")]

    async def list_networks(self):
        return [self._resource(ResourceKind.NETWORK, "net")]

    async def get_limits(self, ref):
        return [LimitField("cpus", evil("CPUs"), evil("2"), "live", evil("hint"),
                           pending=evil("4"))]

    async def create_sources(self):
        return [CreateSource("image", evil("busybox"), "fp", InstanceType.CONTAINER,
                             evil("detail"))]

    async def create_options(self):
        return CreateOptions(profiles=(evil("default"),), default_profiles=(),
                             storage_pools=(evil("pool"),), networks=(evil("br0"),),
                             max_cpus=8, user_data=False, can_cancel=True,
                             defaults={"cpus": evil("1"), "memory": "", "disk": ""})


class Refusing(FakeBackend):
    async def connect(self) -> ServerInfo:
        raise Unreachable(evil("cannot reach"))


class Terminal:
    """What the app would write to the terminal: every update of every screen."""

    def __init__(self, app) -> None:
        self.app = app
        self.texts: list[str] = []
        self.output: list[str] = []
        original = app._display

        def display(screen, update) -> None:
            if update is not None and hasattr(update, "render_segments"):
                for strip in self._strips(update):
                    self.texts += [s.text for s in strip if not s.control]
                self.output.append(update.render_segments(app.console))
            original(screen, update)

        app._display = display

    @staticmethod
    def _strips(update):
        """The strips of an update (a full layout: lines of strips; a partial one: chops
        of lines), each line made a list first: it may be a one-pass iterator."""
        if hasattr(update, "strips"):
            update.strips = [list(line) for line in update.strips]
            for line in update.strips:
                yield from line
        for chop in getattr(update, "chops", ()):
            yield from (s for s in chop.values() if s is not None)

    def check(self, where: str, *words: str) -> None:
        """Nothing written so far holds a control character from outside; each of
        ``words`` was shown (so the walk did reach what it means to look at)."""
        for text in self.texts:
            assert not CONTROL.search(text), f"{where}: {text!r}"
        for out in self.output:
            rest = OWN.sub("", out)
            assert "\x1b" not in rest and "\x07" not in rest, \
                f"{where}: {rest[rest.find(chr(27)) - 20:][:80]!r}"
            assert not re.search("[\x80-\x9f]", out), where
        shown = "".join(self.texts)
        for word in words:
            assert word in shown, f"{where}: {word!r} was not on the screen: " + repr(
                [t for t in self.texts if t.strip()])
        self.texts.clear()
        self.output.clear()


def hostile_env(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        '[ui]\nmetrics_interval = 60\n[lxc]\nenabled = false\n[qemu]\nenabled = false\n'
        '[[remote]]\nname = "alpha"\nkind = "lxd"\naddress = "/nonexistent/a.sock"\n'
        '[[remote]]\nname = "omega"\nkind = "lxd"\naddress = "/nonexistent/o.sock"\n')
    backends = {}

    def factory(remote: Remote, timeout: float):
        cls = Hostile if remote.name == "alpha" else Refusing
        backends[remote.name] = cls(remote)
        return backends[remote.name]

    env = {"HOME": str(tmp_path), "LXD_SOCKET": str(tmp_path / "no.sock"),
           "INCUS_SOCKET": str(tmp_path / "no2.sock")}
    return cfg, env, factory, backends


async def settle(pilot, n: int = 6) -> None:
    for _ in range(n):
        await pilot.pause(0.05)


VISIBLE = "␛]52;c;cm0gLXJmIH4K␇"
"""How the payload shows: the escape and the bell as control pictures."""


async def test_no_escape_from_outside_reaches_the_terminal(tmp_path):
    cfg, env, factory, backends = hostile_env(tmp_path)
    app = make_app(cfg, env=env, factory=factory)
    terminal = Terminal(app)
    async with app.run_test(size=(160, 50), notifications=True) as pilot:
        table = app.main_screen.query_one(InstanceTable)
        await wait_for(pilot, lambda: table.row_count == 1, what="the hostile row")
        await settle(pilot)
        terminal.check("the table", "web" + VISIBLE[:5], "image␛")

        # the details pane: overview, config, events; the snapshots tab
        table.focus()
        app.main_screen.action_toggle_details()
        await settle(pilot)
        backends["alpha"].queue.put_nowait(BackendEvent(
            EventKind.OPERATION, "alpha", operation=Operation(
                "op1", "alpha", evil("Creating"), "Running", progress=evil("50%"),
                instances=(NAME,))))
        await settle(pilot)
        terminal.check("the details pane and the activity line", "reason␛", "member␛",
                       "Creating␛", "50%␛")
        tabs = app.main_screen.query_one("#details-tabs")
        for tab in ("tab-config", "tab-events"):
            tabs.active = tab
            await settle(pilot)
        terminal.check("the config and events tabs", "value␛", "Creating␛")
        await pilot.press("i")
        await wait_for(pilot, lambda: "snap␛" in "".join(terminal.texts), what="snapshots")
        terminal.check("the snapshots tab", "comment␛")

        # the remotes pane: the server's words, the refusing remote's
        remotes = app.main_screen.query_one(RemoteList)
        remotes.focus()
        await settle(pilot)
        for _ in range(2):
            await pilot.press("down")
            await settle(pilot)
        await pilot.press("up")
        await settle(pilot)
        terminal.check("the remotes pane", "note␛", "reach␛")

        # a refusal, as a notification
        table.focus()
        await pilot.press("p")
        await settle(pilot, 10)
        terminal.check("a refusal", "refused␛")

        # the files panel: names, a symlink's target, the title, the go-to dialog
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FilesScreen), what="files")
        screen = app.screen
        await wait_for(pilot, lambda: len(screen.entries) == 3, what="the listing")
        await settle(pilot)
        terminal.check("the files panel", "file␛", "/target␛")
        dir_path = next(p for p, e in screen.entries.items() if e.kind == "directory")
        screen.load(dir_path)
        await wait_for(pilot, lambda: screen.path == dir_path, what="the directory")
        await settle(pilot)
        terminal.check("a directory's title", "dir␛")
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(app.screen, InputDialog), what="go to")
        await settle(pilot)
        terminal.check("the go-to dialog", "dir␛")
        assert app.screen.query_one(Input).value == dir_path  # the value kept exact
        await pilot.press("escape")
        await settle(pilot)

        # path completion of a local file whose name carries the payload
        local = tmp_path / "push"
        local.mkdir()
        (local / evil("local")).write_text("x")
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, InputDialog), what="push")
        box = app.screen.query_one(Input)
        box.value = f"{local}/lo"
        box.cursor_position = len(box.value)
        await pilot.press("tab")
        await settle(pilot)
        assert box.value == f"{local}/{evil('local')}"  # completes to the real name
        terminal.check("path completion", "local␛")
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.main_screen, what="main screen")

        # the resource editor
        app.push_screen(LimitsScreen(backends["alpha"], InstanceRef("alpha", NAME)))
        await wait_for(pilot, lambda: isinstance(app.screen, LimitsScreen), what="limits")
        await settle(pilot, 10)
        terminal.check("the resource editor", "CPUs␛", "hint␛", "4␛")
        await pilot.press("escape")
        await settle(pilot)

        # the launch wizard: remotes, sources, options
        table.focus()
        await pilot.press("N")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "WizardScreen",
                       what="wizard")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot, 10)
        terminal.check("the wizard", "busybox␛", "detail␛")
        await pilot.press("escape")
        await settle(pilot)

        # a confirmation naming the instance
        table.focus()
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="confirm")
        await settle(pilot)
        terminal.check("the delete confirmation", "web␛")
        await pilot.press("escape")
        await settle(pilot)

        # the command palette, browsed and searched
        table.focus()
        await pilot.press("ctrl+p")
        await settle(pilot, 10)
        terminal.check("the palette", "web␛")
        await pilot.press(*"stop")
        await settle(pilot, 10)
        terminal.check("a palette search", "web␛")
        await pilot.press("escape")
        await settle(pilot)

        # the : views and a row's details; a bulk result kept for :operations
        bulk.record(app.inventory, "alpha", evil("Delete profile"), evil("in use"), (NAME,))
        for view, word in (("profiles", "profile␛"), ("networks", "net␛"),
                           ("operations", "Delete profile␛")):
            await pilot.press("colon", *view, "enter")
            await wait_for(pilot, lambda w=word: w in "".join(terminal.texts),
                           what=f":{view}")
            await settle(pilot)
            app.main_screen.query_one("ResourcePane").action_toggle_details()
            await settle(pilot)
            terminal.check(f":{view}", *(() if view == "operations" else
                                          ("about␛", "limits.cpu␛")))
        await pilot.press("colon", *"remotes", "enter")
        await wait_for(pilot, lambda: "lxd␛" in "".join(terminal.texts), what=":remotes")
        await settle(pilot)
        terminal.check(":remotes")
        assert app.is_running


async def test_the_gated_widgets_gate_every_way_in(tmp_path):
    """Plain, PlainLabel and PlainInput: at construction, by update, by content; an
    input's value stays exact."""
    from textual.app import App

    class One(App):
        def compose(self):
            yield Plain(evil("built"), id="a")
            yield PlainLabel(evil("label"), id="b")
            yield PlainInput(evil("typed"), id="c")

    app = One()
    terminal = Terminal(app)
    async with app.run_test(size=(100, 10)) as pilot:
        await settle(pilot)
        terminal.check("built", "built␛", "label␛", "typed␛")
        app.query_one("#a", Plain).update(evil("updated"))
        await settle(pilot)
        terminal.check("updated", "updated␛")
        app.query_one("#b", PlainLabel).content = evil("content")
        await settle(pilot)
        terminal.check("content", "content␛")
        assert app.query_one("#c", PlainInput).value == evil("typed")
