"""Issue 32, the smaller ones found on the way, on the in-memory fake remotes: the sort
goes both ways, every modal screen is drawn in the middle, and the wizard's chosen remote
reads without colour."""

from __future__ import annotations

import importlib
import pkgutil

from textual.app import ComposeResult
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static

import tui
from backends.models import InstanceRef
from backends.create_models import CreateSource
from tui.screens.convert_vm import ConvertScreen
from tui.screens.tables import NicScreen
from tui.screens.wizard import WizardScreen
from tui.views.pane import ResourcePane
from tui.widgets.instance_table import InstanceTable

from .test_fake_app import fake_env, press, running, select, settle  # noqa: F401
from .test_first_hour_app import look, screen_lines


async def test_sort_cycles_back_with_O_and_reverses_with_I(fake_env):  # noqa: F811
    async with running(fake_env, size=(200, 50)) as (app, pilot):
        table = app.screen.query_one(InstanceTable)
        keys = [k for k, _, _ in table.active_columns]
        assert table.sort_column == "name"
        await press(pilot, app, "o")
        assert table.sort_column == keys[1]
        await press(pilot, app, "O", "O")  # back past the first column: the last
        assert (table.sort_column, table.sort_reverse) == (keys[-1], False)
        select(app, "beta:db1")
        await press(pilot, app, "I")
        assert (table.sort_column, table.sort_reverse) == (keys[-1], True)
        assert str(table.selected_ref) == "beta:db1"
        footer = " ".join(screen_lines(app)[-1].split())
        assert "o Sort" in footer and "O Sort back" in footer, footer
        await look(app, pilot, "sort-footer")
        await press(pilot, app, "question_mark")
        by_id = {bid: keys for keys, _, bid in app.screen.rows}
        assert (by_id["table.sort"], by_id["table.sort_back"], by_id["table.reverse"]) == \
            ("o", "O", "I")
        await press(pilot, app, "escape")
        # the views' tables: the same keys
        await press(pilot, app, "colon", *"remotes", "enter")
        view = app.screen.query_one(ResourcePane).table
        columns = view.column_keys
        await press(pilot, app, "O")
        assert (view.sort_column, view.sort_reverse) == (columns[-1], False)
        await press(pilot, app, "o")
        assert view.sort_column == columns[0]
        await press(pilot, app, "I")
        assert view.sort_reverse
        await press(pilot, app, "question_mark")  # the same keys and meanings: listed once
        said = [(keys, desc) for keys, desc, _ in app.screen.rows
                if "sort" in desc.lower()]
        assert [k for k, _ in said] == ["o", "O", "I"], said


async def test_footer_at_80_columns_keeps_help_filter_new_quit_beside_the_sort_keys(
        fake_env):  # noqa: F811
    async with running(fake_env, size=(80, 24)) as (app, pilot):
        footer = " ".join(screen_lines(app)[-1].split())
        for key in ("? Help", "/ Filter", "N New", "q Quit"):
            assert key in footer, footer


def _modal_screens() -> list[type[ModalScreen]]:
    """Every modal screen class of corral (its modules imported first)."""
    for info in pkgutil.walk_packages(tui.__path__, "tui."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    out, todo = [], [ModalScreen]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith("tui."):
                out.append(sub)
    return out


def _centred(region, size) -> None:
    left, right = region.x, size.width - region.right
    top, bottom = region.y, size.height - region.bottom
    assert left > 0 and top > 0, (region, size)
    assert abs(left - right) <= 1 and abs(top - bottom) <= 1, (region, size)


async def test_every_modal_screen_is_drawn_in_the_middle(fake_env):  # noqa: F811
    backends = fake_env[3]
    async with running(fake_env, size=(80, 24)) as (app, pilot):
        # the NIC list and the conversion, as they open
        for screen in (
                NicScreen(backends["alpha"], InstanceRef("alpha", "web1"),
                          app.inventory.remote_capabilities("alpha")),
                ConvertScreen(InstanceRef("alpha", "vm1"), "qemu", backends["alpha"],
                              CreateSource("vm-import", "the VM")),
        ):
            app.push_screen(screen)
            await settle(pilot, app)
            assert app.screen is screen
            _centred(screen.query_one("#dialog").region, app.size)
            await look(app, pilot, type(screen).__name__)
            app.pop_screen()
            await settle(pilot, app)

        # every modal screen class, also one no key here reaches: a stand-in with its
        # CSS names and its own CSS, and a box of its own
        classes = _modal_screens()
        assert {ConvertScreen, NicScreen, WizardScreen} <= set(classes)
        for cls in classes:
            own = "\n".join(c.__dict__.get("DEFAULT_CSS", "") for c in cls.__mro__
                            if c.__module__.startswith("tui."))

            def compose(self) -> ComposeResult:
                yield Static("box", id="probe")

            stand_in = type(cls.__name__, (ModalScreen,),
                            {"DEFAULT_CSS": own + "\n#probe { width: 20; height: 5; }",
                             "compose": compose})
            stand_in._css_type_names = cls._css_type_names
            screen = stand_in()
            app.push_screen(screen)
            await settle(pilot, app)
            assert (screen.styles.align_horizontal, screen.styles.align_vertical) == \
                ("center", "middle"), cls.__name__
            _centred(screen.query_one("#probe").region, app.size)
            app.pop_screen()
            await settle(pilot, app)


async def test_the_wizards_chosen_remote_is_marked_in_words(fake_env):  # noqa: F811
    async with running(fake_env, size=(80, 24)) as (app, pilot):
        select(app, "beta:db1")  # the wizard opens on the remote of the selected row
        await press(pilot, app, "N")
        assert isinstance(app.screen, WizardScreen)
        remotes = app.screen.query_one("#wizard-remote", OptionList)

        def prompts() -> list[str]:
            return [str(getattr(o.prompt, "plain", o.prompt)) for o in remotes.options]

        assert prompts() == ["  alpha  (lxd)", "▸ beta  (lxd)"]
        assert any("▸ beta" in line for line in screen_lines(app))
        await look(app, pilot, "wizard-where")
        await press(pilot, app, "up")
        assert prompts() == ["▸ alpha  (lxd)", "  beta  (lxd)"]
        assert app.screen.remote == "alpha"
