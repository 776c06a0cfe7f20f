"""Issue 32, the first hour tried again: each thing a newcomer hit, on the in-memory fake
remotes (alpha: web1 running, web2 stopped, vm1 running; beta: db1, hang running)."""

from __future__ import annotations

from textual.widgets import Input

from tui.widgets.instance_table import InstanceTable

from .test_fake_app import fake_env, press, running, select, settle, table_rows  # noqa: F401


def screen_lines(app) -> list[str]:
    """What the screen shows, one string per row."""
    return ["".join(seg.text for seg in strip) for strip in
            app.screen._compositor.render_strips()]


def shown(app) -> str:
    """The screen's rows joined with spaces (a sentence wrapped over rows reads whole)."""
    return " ".join(" ".join(line.replace("│", " ").split()) for line in screen_lines(app))


def box(app) -> Input:
    return app.screen.query_one("#filter", Input)


async def test_filter_one_rule_for_every_key_and_near_misses_named(fake_env):  # noqa: F811
    async with running(fake_env) as (app, pilot):
        assert "contained" in box(app).placeholder
        await press(pilot, app, "slash", *"status=stop")
        assert set(table_rows(app)) == {"alpha:web2"}
        await press(pilot, app, *["backspace"] * len("status=stop"), *"remote=alp")
        assert set(table_rows(app)) == {"alpha:web1", "alpha:web2", "alpha:vm1"}
        await press(pilot, app, *["backspace"] * len("remote=alp"), *"status=runing")
        assert "did you mean status=running" in str(box(app).border_title)
        assert box(app).has_class("-invalid")
        await press(pilot, app, *["backspace"] * len("status=runing"), *"status:running")
        assert "write status=running" in str(box(app).border_title)
        await press(pilot, app, *["backspace"] * len("status:running"), *"!a")
        # every instance has an 'a' somewhere (alpha, beta): the box says where
        assert table_rows(app) == {}
        title = str(box(app).border_title)
        assert "'!a' hides every instance" in title and "remote" in title
        await press(pilot, app, "escape")
        assert len(table_rows(app)) == 5 and box(app).border_title is None


async def test_home_and_end_jump_to_the_first_and_last_row(fake_env):  # noqa: F811
    async with running(fake_env, size=(60, 24)) as (app, pilot):
        table = app.screen.query_one(InstanceTable)
        table.move_cursor(row=2)
        await settle(pilot, app)
        await press(pilot, app, "end")
        assert table.cursor_row == table.row_count - 1
        await press(pilot, app, "home")
        assert table.cursor_row == 0
        first = table.selected_ref
        await press(pilot, app, "space")  # marks the row the cursor is on, the first
        assert table.marked == {first}


async def test_password_dialog_starts_in_the_password_field_and_never_shows_it():
    from textual.app import App

    from backends.models import InstanceRef
    from tui.screens.dialogs import PasswordDialog

    answers = []

    class One(App):
        def on_mount(self) -> None:
            self.push_screen(PasswordDialog(InstanceRef("lab", "c1")), answers.append)

    app = One()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press(*"uxpass123")  # typed at once, as a newcomer does
        await pilot.pause()
        assert app.screen.query_one("#pw-user", Input).value == "root"
        assert app.screen.query_one("#pw-1", Input).value == "uxpass123"
        assert "uxpass123" not in shown(app)
        await pilot.press("tab", *"uxpass123", "enter")
        await pilot.pause()
    assert answers == [("root", "uxpass123")]


async def test_bulk_delete_says_first_that_running_ones_are_stopped_by_force(fake_env):  # noqa: F811
    from tui.screens.dialogs import ConfirmDialog

    backends = fake_env[3]
    async with running(fake_env, size=(80, 24)) as (app, pilot):
        for ref in ("alpha:web1", "alpha:web2", "alpha:vm1", "beta:db1", "beta:hang"):
            select(app, ref)
            await press(pilot, app, "space")
        await press(pilot, app, "d")
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog)
        # said above the list, where 80x24 shows it, and on the button
        assert "4 of them are running" in str(dialog.message).split("•")[0]
        assert "stopped by force first" in shown(app)
        await look(app, pilot, "bulk-delete")
        assert "alpha:web1 (running)" in str(dialog.message)
        assert "alpha:web2 (running)" not in str(dialog.message)
        assert dialog.confirm_label == "Stop and delete all"
        await press(pilot, app, "escape")
        assert not any(c[0] == "delete" for b in backends.values() for c in b.calls)


async def look(app, pilot, name: str) -> None:
    """With CORRAL_LOOK=dir: the screen as SVG in both themes, to be looked at."""
    import os

    where = os.environ.get("CORRAL_LOOK")
    if not where:
        return
    before, size = app.theme, app.size
    for w, h in ((80, 24), (200, 50)):
        await pilot.resize_terminal(w, h)
        for theme in ("corral-dark", "corral-light"):
            app.theme = theme
            await pilot.pause(0.2)
            app.save_screenshot(f"{name}-{w}x{h}-{theme}.svg", path=where)
    app.theme = before
    await pilot.resize_terminal(*size)
    await pilot.pause(0.2)


def renaming_env(base):
    """The fake remotes with rename and clone, each refused on a running instance (as
    every real backend does) and names checked against the instances there."""
    import dataclasses

    from backends.errors import Conflict
    from backends.fake import FakeBackend
    from backends.models import Capability, InstanceStatus

    class Renaming(FakeBackend):
        capabilities = FakeBackend.capabilities | {Capability.RENAME, Capability.CLONE}

        def check_name(self, name):
            return f"'{name}' is already taken on '{self.remote.name}'." \
                if name in self.data else None

        async def rename_instance(self, ref, new_name):
            self.calls.append(("rename", ref.name, {"to": new_name}))
            inst = self.data[ref.name]
            if inst.status is not InstanceStatus.STOPPED:
                raise Conflict(f"{ref} is running: stop it first to rename it.")
            return inst

    cfg, env, factory, backends = base

    def make(remote, timeout):
        plain = factory(remote, timeout)
        backends[remote.name] = b = Renaming(remote)
        b.data = plain.data
        if remote.name == "alpha":  # a copy of web2 exists already
            web2 = plain.data["web2"]
            b.data["web2-copy"] = dataclasses.replace(
                web2, ref=dataclasses.replace(web2.ref, name="web2-copy"))
        return b

    return cfg, env, make, backends


async def menu(pilot, app, ref: str, key: str) -> None:
    from textual.widgets import OptionList

    select(app, ref)
    await press(pilot, app, "a")
    options = app.screen.query_one(OptionList)
    ids = [options.get_option_at_index(i).id for i in range(options.option_count)]
    assert key in ids, ids
    options.highlighted = ids.index(key)
    await press(pilot, app, "enter")


async def test_rename_asks_to_stop_first_and_clone_prefills_a_free_name(fake_env):  # noqa: F811
    from tui.screens.dialogs import ConfirmDialog, InputDialog

    env = renaming_env(fake_env)
    backends = env[3]
    async with running(env, size=(80, 24)) as (app, pilot):
        await menu(pilot, app, "alpha:web1", "rename")  # running
        assert isinstance(app.screen, ConfirmDialog), "asked before the name is typed"
        assert "must be stopped to be renamed" in str(app.screen.message)
        await look(app, pilot, "rename-stop-first")
        await pilot.click("#confirm")
        await settle(pilot, app)
        assert isinstance(app.screen, InputDialog)
        problem = shown(app)
        assert "already taken" not in problem and "It is called web1 now" in problem
        await look(app, pilot, "rename-name")
        await press(pilot, app, "escape")
        assert ("stop", "web1", {"force": False}) in backends["alpha"].calls
        assert not any(c[0] == "rename" for c in backends["alpha"].calls)

        await menu(pilot, app, "alpha:web2", "clone")
        assert isinstance(app.screen, InputDialog)
        assert app.screen.query_one("#dialog-input", Input).value == "web2-copy-2"
        assert "already taken" not in shown(app)
        await press(pilot, app, "escape")


async def test_export_and_clone_ask_about_snapshots_only_when_there_are_some(fake_env):  # noqa: F811
    import dataclasses

    from backends.models import Capability
    from tui.screens.dialogs import ChoiceDialog, InputDialog

    cfg, env, make, backends = renaming_env(fake_env)

    def factory(remote, timeout):
        b = make(remote, timeout)
        b.capabilities = b.capabilities | {Capability.EXPORT}
        for name, count in (("web1", 0), ("web2", 2)):
            if name in b.data:
                b.data[name] = dataclasses.replace(b.data[name], snapshot_count=count)

        async def export_instance(ref, path, *, with_snapshots=True, progress=None):
            b.calls.append(("export", ref.name, {"with_snapshots": with_snapshots}))
            return 10
        b.export_instance = export_instance
        return b

    async with running((cfg, env, factory, backends), size=(80, 24)) as (app, pilot):
        await menu(pilot, app, "alpha:web1", "export")  # no snapshot
        assert isinstance(app.screen, InputDialog)
        assert "snapshot" not in shown(app).lower()
        await press(pilot, app, "enter")
        assert not isinstance(app.screen, ChoiceDialog)
        assert ("export", "web1", {"with_snapshots": False}) in backends["alpha"].calls

        await menu(pilot, app, "alpha:web1", "clone")
        await press(pilot, app, "enter")  # the free name offered: no choice to make
        assert not isinstance(app.screen, ChoiceDialog)

        await menu(pilot, app, "alpha:web2", "export")  # two snapshots: asked
        await press(pilot, app, "enter")
        assert isinstance(app.screen, ChoiceDialog)
        assert "With its snapshots (2)" in shown(app)
        dialog = app.screen.query_one("#dialog").region  # centred, not in the top left
        assert dialog.x > 0 and dialog.y > 0
        await look(app, pilot, "export-choice")
        await press(pilot, app, "escape")


async def test_details_tabs_by_left_and_right_and_the_snapshot_keys_as_the_footer(fake_env):  # noqa: F811
    from textual.widgets import TabbedContent

    from backends.fake import FakeBackend
    from backends.models import Capability, Snapshot
    from tui.widgets.details import DetailsPane, SnapshotTable

    cfg, env, factory, backends = fake_env

    class Snapshots(FakeBackend):
        capabilities = FakeBackend.capabilities | {Capability.SNAPSHOTS}

        async def list_snapshots(self, ref):
            return [Snapshot(ref=ref, name="before")]

        async def snapshot_counts(self, refs):
            return {r: 1 for r in refs}

    def make(remote, timeout):
        plain = factory(remote, timeout)
        backends[remote.name] = b = Snapshots(remote)
        b.data = plain.data
        return b

    async with running((cfg, env, make, backends), size=(80, 24)) as (app, pilot):
        select(app, "alpha:web1")
        await press(pilot, app, "enter")  # the details pane
        pane = app.screen.query_one(DetailsPane)
        assert "←/→" in str(pane.border_subtitle)
        for _ in range(3):  # into the pane with tab
            if pane.has_focus_within:
                break
            await press(pilot, app, "tab")
        assert pane.has_focus_within
        tabs = pane.query_one(TabbedContent)
        assert tabs.active == "tab-overview"
        await press(pilot, app, "right")
        assert tabs.active == "tab-snapshots"
        await press(pilot, app, "tab")
        assert isinstance(app.focused, SnapshotTable)
        await press(pilot, app, "right")  # from inside the snapshot table too
        assert tabs.active == "tab-config"
        await press(pilot, app, "left")  # and from the config's scroll
        assert tabs.active == "tab-snapshots"
        assert isinstance(app.focused, SnapshotTable)
        await settle(pilot, app)
        # the tab's line names the keys the footer shows, in its words
        note = str(pane.query_one("#snapshot-note").render())
        footer = " ".join(screen_lines(app)[-1].split())
        assert "del Delete snapshot" in footer
        assert "del delete snapshot" in note and "d delete" not in note.replace("del", "")
        await look(app, pilot, "details-snapshots")


async def test_each_view_keeps_its_own_filter_and_gets_it_back(fake_env):  # noqa: F811
    from tui.views.pane import ResourcePane

    def view_names(app):
        table = app.screen.query_one(ResourcePane).table
        return {table.items[k].name for k in table.shown}

    async with running(fake_env, size=(80, 24)) as (app, pilot):
        await press(pilot, app, "slash", *"web", "enter")
        assert set(table_rows(app)) == {"alpha:web1", "alpha:web2"}
        await press(pilot, app, "colon", *"remotes", "enter")
        assert box(app).value == "" and not box(app).has_class("-visible")
        assert view_names(app) == {"alpha", "beta"}, "the view is not filtered by 'web'"
        assert not app.screen.query_one("#empty").display, "no word about instances here"
        await press(pilot, app, "slash", *"alp", "enter")
        assert view_names(app) == {"alpha"}
        await look(app, pilot, "view-filter")
        await press(pilot, app, "colon", *"instances", "enter")
        assert box(app).value == "web" and box(app).has_class("-visible")
        assert set(table_rows(app)) == {"alpha:web1", "alpha:web2"}
        assert app.screen.query_one(InstanceTable).border_title.startswith("Instances (2/5)")
        await press(pilot, app, "colon", *"remotes", "enter")
        assert box(app).value == "alp" and view_names(app) == {"alpha"}
        # esc clears this view's filter, esc again goes back: the instances' filter is kept
        await press(pilot, app, "escape", "escape")
        assert app.screen.views.name == "instances"
        assert box(app).value == "web"
        assert set(table_rows(app)) == {"alpha:web1", "alpha:web2"}


async def palette_hits(pilot, app, query: str) -> list[str]:
    """The palette's entries for ``query``, best first (the palette closed again)."""
    from textual.command import CommandList

    await press(pilot, app, "ctrl+p")
    await pilot.press(*query)
    await pilot.pause(0.6)
    await settle(pilot, app)
    found = app.screen.query_one(CommandList)
    hits = [str(getattr(found.get_option_at_index(i).prompt, "plain",
                        found.get_option_at_index(i).prompt)).split("\n")[0]
            for i in range(found.option_count)]
    await press(pilot, app, "escape")
    return hits


async def test_palette_finds_every_action_and_view_by_name_first(fake_env):  # noqa: F811
    from backends.fake import FakeBackend
    from backends.models import Capability

    cfg, env, factory, backends = fake_env

    class More(FakeBackend):
        capabilities = FakeBackend.capabilities | {
            Capability.SNAPSHOTS, Capability.CONSOLE, Capability.PROFILES}

    def make(remote, timeout):
        plain = factory(remote, timeout)
        backends[remote.name] = b = More(remote)
        b.data = plain.data
        return b

    async with running((cfg, env, make, backends), size=(100, 30)) as (app, pilot):
        for query, first in (("snapshot", "Snapshot"), ("console", "Console"),
                             ("help", "Help: every key"), ("launch", "New instance…"),
                             ("limit", "Limits"), ("operations", "Operations"),
                             ("profiles", "Profiles")):
            hits = await palette_hits(pilot, app, query)
            assert hits, f"no match for {query!r}"
            assert hits[0].startswith(first), (query, hits[:5])
        hits = await palette_hits(pilot, app, "profiles")
        assert "Profiles view (:profiles)" in hits[:3], hits[:5]
        hits = await palette_hits(pilot, app, "stop beta:db1")
        assert hits[0] == "Stop beta:db1"


async def test_remotes_pane_keys_reconnect_report_words_and_read_only(fake_env):  # noqa: F811
    from tui.views.pane import ResourcePane
    from tui.widgets.remote_list import RemoteList

    from backends.errors import NotResponding
    from backends.fake import FakeBackend

    cfg, env, factory, backends = fake_env
    cfg.write_text(cfg.read_text() + '[remotes]\nread_only = ["alpha"]\n')

    class Flaky(FakeBackend):
        refuse = 0

        async def connect(self):
            if Flaky.refuse:
                Flaky.refuse -= 1
                raise NotResponding(f"'{self.remote.name}' is not responding.")
            return await super().connect()

    def make(remote, timeout):
        plain = factory(remote, timeout)
        backends[remote.name] = b = Flaky(remote)
        b.data = plain.data
        return b

    async with running((cfg, env, make, backends), size=(120, 30)) as (app, pilot):
        await press(pilot, app, "1")  # the remotes pane
        remotes = app.screen.query_one(RemoteList)
        assert remotes.has_focus
        footer = " ".join(screen_lines(app)[-1].split())
        for key in ("R Reconnect", "+ Add remote", "- Remove remote"):
            assert key in footer, footer
        for _ in range(200):  # both connected (a busy machine takes its time)
            if str(remotes.get_row("beta")[2]).strip() == "connected" and \
                    str(remotes.get_row("alpha")[2]).strip() == "read-only":
                break
            await pilot.pause(0.05)
        assert str(remotes.get_row("alpha")[2]).strip() == "read-only"
        assert str(remotes.get_row("beta")[2]).strip() == "connected"
        await look(app, pilot, "remotes-pane")
        remotes.move_cursor(row=1)  # beta; its next connection fails
        Flaky.refuse = 1

        async def told(what) -> list[str]:
            """What the app said, once it said ``what`` (a busy machine takes its time)."""
            for _ in range(200):
                said = [n.message for n in app._notifications]
                if any(what(m) for m in said):
                    break
                await pilot.pause(0.05)
            return said

        await press(pilot, app, "R")
        said = await told(lambda m: m.startswith("beta: still no answer"))
        assert any(m.startswith("beta: still no answer") for m in said), said
        await press(pilot, app, "R")
        said = await told(lambda m: m == "beta: connected.")
        assert "beta: connected." in said, said
        # the :remotes view says the pane's words
        await press(pilot, app, "colon", *"remotes", "enter")
        table = app.screen.query_one(ResourcePane).table
        states = {table.items[k].name: table.items[k].cell("state") for k in table.shown}
        assert states == {"alpha": "read-only", "beta": "connected"}


async def test_footer_keeps_help_filter_new_and_quit_at_any_width(fake_env):  # noqa: F811
    for size in ((80, 24), (60, 15), (200, 50)):
        async with running(fake_env, size=size) as (app, pilot):
            footer = " ".join(screen_lines(app)[-1].split())
            for key in ("? Help", "/ Filter", "N New", "q Quit"):
                assert key in footer, (size, footer)
            if size == (60, 15):
                await look(app, pilot, "footer")


async def test_help_in_sections_without_widget_noise_and_fits_80x24(fake_env):  # noqa: F811
    from tui.screens.help import HelpScreen

    async with running(fake_env, size=(80, 24)) as (app, pilot):
        await press(pilot, app, "question_mark")
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        titles = [title for title, _ in help_screen.sections]
        assert titles[0] == "Everywhere" and "Instance table" in titles
        assert "Console tabs" in titles and "Views (:)" in titles
        assert "Snapshots tab (i)" in titles
        rows = help_screen.rows
        keys = [k for k, _, _ in rows]
        descs = " ".join(d for _, d, _ in rows)
        assert "ctrl+]" in keys and ":volumes" not in keys  # the fakes have no storage
        assert any(k == ":remotes" for k in keys)
        assert "Move cursor" not in descs and "select" not in descs.lower().split()
        assert sum(1 for k in keys if "P" in k.split(", ")) == 1, "P means one thing"
        assert "^q" not in keys
        lines = screen_lines(app)
        top = next(line for line in lines if "corral keys" in line)
        assert top.rstrip()[-1] in "▜┓╗┐╮▌▐█", "its right border is on the screen"
        await look(app, pilot, "help")


async def test_zoomed_consoles_keep_z_brackets_and_help_as_the_help_says(fake_env):  # noqa: F811
    from backends.models import InstanceRef
    from tui.widgets.console_dock import ConsoleDock
    from tui.widgets.view_messages import ConsoleView

    async with running(fake_env, size=(80, 24)) as (app, pilot):
        dock = app.screen.query_one(ConsoleDock)
        from backends.fake import RecordingSession

        sessions = [RecordingSession(), RecordingSession()]
        for name, session in zip(("web1", "db1"), sessions):
            async def opener(w, h, session=session):
                return session
            await dock.open(InstanceRef("alpha" if name == "web1" else "beta", name),
                            "console", opener)
            await settle(pilot, app)
        await press(pilot, app, "z")  # typed into the console
        assert sessions[1].sent == b"z" and not app.screen.has_class("-console-zoom")
        await press(pilot, app, "ctrl+right_square_bracket", "z")  # out, then zoom
        assert app.screen.has_class("-console-zoom")
        assert isinstance(app.focused, ConsoleView), "z goes into the current console"
        footer = " ".join(screen_lines(app)[-1].split())
        assert "^] Leave console" in footer and "q Quit" not in footer, footer
        await press(pilot, app, "ctrl+right_square_bracket")  # out of it, still zoomed
        assert app.screen.has_class("-console-zoom")
        assert not isinstance(app.focused, ConsoleView)
        footer = " ".join(screen_lines(app)[-1].split())
        for key in ("z Zoom", "] Next tab", "t To console"):
            assert key in footer, footer
        await look(app, pilot, "zoomed-tabs")
        first = dock.active
        await press(pilot, app, "right_square_bracket")  # the next tab, not the guest's
        assert dock.active is not first and b"]" not in sessions[1].sent
        await press(pilot, app, "question_mark")
        assert app.screen.__class__.__name__ == "HelpScreen"
        await press(pilot, app, "escape", "z")  # back beside the table
        assert not app.screen.has_class("-console-zoom")
        assert b"?" not in sessions[0].sent + sessions[1].sent


async def test_wizard_cancel_button_asks_before_discarding_filled_steps(fake_env):  # noqa: F811
    from tui.screens.dialogs import ConfirmDialog
    from tui.screens.wizard import WizardScreen

    backends = fake_env[3]
    async with running(fake_env, size=(80, 24)) as (app, pilot):
        await press(pilot, app, "N")
        wizard = app.screen
        assert isinstance(wizard, WizardScreen)
        wizard.remote = "alpha"
        await press(pilot, app, "enter")
        await pilot.press("ctrl+n")
        await press(pilot, app, *"draft1", "enter")
        for _ in range(2):  # resources, network: on cloud-init now
            await press(pilot, app, "ctrl+n")
        assert wizard.step == "cloud-init"
        wizard.query_one("#cancel").focus()  # where Tab from the text area lands
        await press(pilot, app, "enter")
        assert isinstance(app.screen, ConfirmDialog), "asked, not closed"
        assert "filled in is lost" in str(app.screen.message)
        await look(app, pilot, "wizard-leave")
        await press(pilot, app, "enter")  # its focus is on its Cancel: the wizard stays
        assert app.screen is wizard and wizard.step == "cloud-init"
        assert wizard.query_one("#wizard-name").value == "draft1"
        wizard.query_one("#cancel").focus()
        await press(pilot, app, "enter")
        await pilot.click("#confirm")
        await settle(pilot, app)
        assert not isinstance(app.screen, WizardScreen)
        assert "draft1" not in backends["alpha"].data
        # on its first steps nothing was typed: Cancel leaves at once
        await press(pilot, app, "N")
        app.screen.query_one("#cancel").focus()
        await press(pilot, app, "enter")
        assert not isinstance(app.screen, (WizardScreen, ConfirmDialog))


async def test_a_long_bulk_confirmation_keeps_its_buttons_on_an_80x24_screen(fake_env):  # noqa: F811
    from tui.screens.dialogs import ConfirmDialog

    cfg, env, factory, backends = fake_env

    def many(remote, timeout):
        b = factory(remote, timeout)
        if remote.name == "alpha":
            from backends.models import Instance, InstanceRef, InstanceStatus, InstanceType
            for i in range(20):
                ref = InstanceRef("alpha", f"n{i:02d}")
                b.data[ref.name] = Instance(ref=ref, type=InstanceType.CONTAINER,
                                            status=InstanceStatus.STOPPED, image="busybox")
        return b

    async with running((cfg, env, many, backends), size=(80, 24)) as (app, pilot):
        await press(pilot, app, "asterisk", "d")
        assert isinstance(app.screen, ConfirmDialog)
        text = shown(app)
        assert "more" in text and "Stop and delete all" in text and "Cancel" in text
        await press(pilot, app, "escape")
