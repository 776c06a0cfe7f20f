"""Fast Pilot tests of the main screen against the in-memory FakeBackend.

They check UI behaviour deterministically; tests/tui/test_real_app.py proves the same
screen against the real daemons."""

from __future__ import annotations

import contextlib

import pytest

from backends.errors import Unreachable
from backends.fake import FakeBackend
from backends.models import InstanceStatus, InstanceType, Remote
from tui.app import make_app
from tui.screens.dialogs import ConfirmDialog
from tui.screens.help import HelpScreen
from tui.widgets.instance_table import InstanceTable
from tui.widgets.remote_list import RemoteList

R, S = InstanceStatus.RUNNING, InstanceStatus.STOPPED
CT, VM = InstanceType.CONTAINER, InstanceType.VM


@pytest.fixture
def fake_env(tmp_path):
    """Two fake remotes configured through corral's own config file."""
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        '[ui]\nmetrics_interval = 60\n[lxc]\nenabled = false\n[qemu]\nenabled = false\n'
        '[[remote]]\nname = "alpha"\nkind = "lxd"\naddress = "/nonexistent/a.sock"\n'
        '[[remote]]\nname = "beta"\nkind = "lxd"\naddress = "/nonexistent/b.sock"\n'
    )
    backends = {}

    def factory(remote: Remote, timeout: float):
        specs = {
            "alpha": [("web1", CT, R), ("web2", CT, S), ("vm1", VM, R)],
            "beta": [("db1", CT, R), ("hang", CT, R)],
        }[remote.name]
        backends[remote.name] = FakeBackend(remote, instances=specs, hang_on_stop={"hang"})
        return backends[remote.name]

    env = {"HOME": str(tmp_path), "LXD_SOCKET": str(tmp_path / "no.sock"),
           "INCUS_SOCKET": str(tmp_path / "no2.sock")}
    return cfg, env, factory, backends


async def settle(pilot, app):
    """Until the app has taken every key posted so far and handled it (its key gate idle:
    on a busy machine that takes longer than any fixed pause), then a little longer for
    what the keys started (workers, timers)."""
    await pilot.pause()
    keys = getattr(app, "keys", None)
    if keys is not None:
        await keys.settle()
        for _ in range(100):
            if keys.idle:
                break
            await pilot.pause(0.05)
    for _ in range(5):
        await pilot.pause(0.05)


async def press(pilot, app, *keys):
    """Press ``keys``, then let the app settle."""
    await pilot.press(*keys)
    await settle(pilot, app)


@contextlib.asynccontextmanager
async def running(fake_env, size=(140, 40)):
    """(app, pilot): corral on the fake remotes, settled after its start."""
    cfg, env, factory, _ = fake_env
    app = make_app(cfg, env=env, factory=factory)
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        yield app, pilot


def table_rows(app):
    table = app.screen.query_one(InstanceTable)
    return {str(ref): table.get_row(key) for key, ref in table.refs.items()}


def status(app, ref_text):
    """The status cell of the row ``ref_text`` (remote:name)."""
    return str(table_rows(app)[ref_text][3])


def select(app, ref_text):
    table = app.screen.query_one(InstanceTable)
    for key, ref in table.refs.items():
        if str(ref) == ref_text:
            table.move_cursor(row=table.get_row_index(key))
            return
    raise AssertionError(f"{ref_text} not in table")


async def test_table_lists_all_remotes_and_filter_narrows(fake_env):
    async with running(fake_env) as (app, pilot):
        rows = table_rows(app)
        assert set(rows) == {"alpha:web1", "alpha:web2", "alpha:vm1", "beta:db1", "beta:hang"}
        assert str(rows["alpha:vm1"][2]) == "VM"
        await press(pilot, app, "slash", *"status=running", "space", *"type=vm")
        assert set(table_rows(app)) == {"alpha:vm1"}
        await press(pilot, app, "escape")
        assert len(table_rows(app)) == 5
        remotes = app.screen.query_one(RemoteList)
        assert str(remotes.get_row("alpha")[2]) == "connected"
        assert str(remotes.get_row("alpha")[3]).strip() == "2/3"


async def test_stop_key_and_force_dialog_when_graceful_stop_hangs(fake_env):
    backends = fake_env[3]
    async with running(fake_env) as (app, pilot):
        select(app, "beta:db1")
        await press(pilot, app, "s")
        assert status(app, "beta:db1") == "stopped"
        select(app, "beta:hang")
        await press(pilot, app, "s")
        assert isinstance(app.screen, ConfirmDialog)
        assert "did not shut down" in app.screen.message
        await pilot.click("#confirm")
        await settle(pilot, app)
        assert backends["beta"].calls[-1] == ("stop", "hang", {"force": True})
        assert status(app, "beta:hang") == "stopped"


async def test_delete_asks_naming_the_instance_and_cancel_keeps_it(fake_env):
    backends = fake_env[3]
    async with running(fake_env) as (app, pilot):
        select(app, "alpha:web1")
        await press(pilot, app, "d")
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog)
        assert "alpha:web1" in dialog.title_text
        assert "stopped by force" in dialog.message  # it is running
        await pilot.press("enter")  # focus starts on Cancel: a stray enter deletes nothing
        await settle(pilot, app)
        assert "alpha:web1" in table_rows(app)
        assert not any(c[0] == "delete" for c in backends["alpha"].calls)
        await press(pilot, app, "d")
        await pilot.click("#confirm")
        await settle(pilot, app)
        assert "alpha:web1" not in table_rows(app)
        assert backends["alpha"].calls[-1] == ("delete", "web1", {"force": True})


async def test_external_change_shows_without_a_keypress(fake_env):
    backends = fake_env[3]
    async with running(fake_env) as (app, pilot):
        backends["alpha"].set_status("web2", InstanceStatus.RUNNING)
        await settle(pilot, app)
        assert status(app, "alpha:web2") == "running"


async def test_pause_resume_start_and_disabled_actions(fake_env):
    async with running(fake_env) as (app, pilot):
        select(app, "alpha:web1")
        await press(pilot, app, "p")
        assert status(app, "alpha:web1") == "frozen"
        await press(pilot, app, "p")
        assert status(app, "alpha:web1") == "running"
        select(app, "alpha:web2")
        await settle(pilot, app)
        # a stopped instance cannot be stopped: the action is disabled, nothing is called
        assert app.screen.check_action("stop_instance", ()) is None
        await press(pilot, app, "S")
        assert status(app, "alpha:web2") == "running"


async def test_help_lists_every_instance_key_and_keymap_rebinds(fake_env, tmp_path):
    cfg = fake_env[0]
    cfg.write_text(cfg.read_text() + '[keymap]\n"instance.stop" = "x"\n')
    async with running(fake_env) as (app, pilot):
        await press(pilot, app, "question_mark")
        assert isinstance(app.screen, HelpScreen)
        ids = {bid for _, _, bid in app.screen.rows}
        for needed in ("instance.start", "instance.stop", "instance.restart", "instance.pause",
                       "instance.delete", "view.filter", "view.details", "app.quit"):
            assert needed in ids
        stop_keys = [k for k, _, bid in app.screen.rows if bid == "instance.stop"]
        assert stop_keys == ["x"]
        await pilot.press("escape")
        select(app, "beta:db1")
        await press(pilot, app, "x")
        assert status(app, "beta:db1") == "stopped"


async def test_sort_cycles_and_keeps_selection(fake_env):
    async with running(fake_env) as (app, pilot):
        table = app.screen.query_one(InstanceTable)
        def names():
            return [table.refs[table.coordinate_to_cell_key((i, 0)).row_key.value].name
                    for i in range(table.row_count)]

        assert names() == sorted(names())
        select(app, "beta:db1")
        await press(pilot, app, "I")
        assert names() == sorted(names(), reverse=True)
        assert str(table.selected_ref) == "beta:db1"


async def test_command_palette_offers_instance_actions(fake_env):
    backends = fake_env[3]
    async with running(fake_env) as (app, pilot):
        await press(pilot, app, "ctrl+p")
        await pilot.press(*"Stop beta:db1")
        await pilot.pause(0.5)
        await press(pilot, app, "enter")
        assert ("stop", "db1", {"force": False}) in backends["beta"].calls
        # screens are in the palette too: the launch wizard
        await press(pilot, app, "ctrl+p")
        await pilot.press(*"New instance")
        await pilot.pause(0.5)
        await press(pilot, app, "enter")
        assert app.screen.__class__.__name__ == "WizardScreen"


async def test_usage_figures_fill_the_table_after_sampling(fake_env):
    async with running(fake_env, size=(160, 40)) as (app, pilot):
        await pilot.pause(0.6)  # the first sample runs 0.3 s after a listing
        await settle(pilot, app)
        row = table_rows(app)["alpha:web1"]
        assert str(row[5]) == "1.5%"
        assert str(row[4]) == "10.0.0.2"
        assert str(row[6]).startswith("4")
        assert str(table_rows(app)["alpha:web2"][5]) == ""  # stopped: no figures
        # and it is on the screen, not only in the table's data
        await pilot.pause(0.1)
        assert "1.5%" in app.export_screenshot()


async def test_light_theme_and_semantic_status_colours(fake_env):
    cfg = fake_env[0]
    cfg.write_text(cfg.read_text().replace("[ui]\n", '[ui]\ntheme = "corral-light"\n'))
    async with running(fake_env) as (app, pilot):
        assert app.theme == "corral-light"
        variables = app.get_css_variables()
        assert variables["status-running"].upper() == "#2E7D32"
        table = app.screen.query_one(InstanceTable)
        key = next(k for k, r in table.refs.items() if str(r) == "alpha:web1")
        status_cell = table.get_row(key)[3]
        assert status_cell.style.color.triplet.hex.upper() == "#2E7D32"
        app.theme = "corral-dark"
        await settle(pilot, app)
        await pilot.pause(0.2)
        # the running colour follows the theme without a restart
        assert app.get_css_variables()["status-running"].upper() == "#7BC47F"
        status_cell = table.get_row(key)[3]
        assert status_cell.style.color.triplet.hex.upper() == "#7BC47F"


async def test_read_only_remote_offers_no_actions(fake_env):
    cfg = fake_env[0]
    cfg.write_text(cfg.read_text() + '[remotes]\nread_only = ["beta"]\n')
    backends = fake_env[3]
    async with running(fake_env) as (app, pilot):
        select(app, "beta:db1")
        await settle(pilot, app)
        assert app.screen.check_action("stop_instance", ()) is None
        await press(pilot, app, "s", "d")
        assert backends["beta"].calls == []
        assert not isinstance(app.screen, ConfirmDialog)


async def test_textual_builtin_theme_works(fake_env):
    cfg = fake_env[0]
    cfg.write_text(cfg.read_text().replace("[ui]\n", '[ui]\ntheme = "textual-dark"\n'))
    async with running(fake_env) as (app, pilot):
        assert app.theme == "textual-dark"
        assert status(app, "alpha:web1") == "running"
        app.theme = "nord"
        await settle(pilot, app)
        assert status(app, "alpha:web1") == "running"


async def test_an_unknown_theme_is_said_and_corral_dark_is_used(fake_env, monkeypatch):
    """The theme is set before anything is styled (once, not again after mount); an
    unknown one still gets its words once the screen is there."""
    from tui.app import CorralApp

    said: list[str] = []
    real = CorralApp.notify
    monkeypatch.setattr(CorralApp, "notify",
                        lambda self, message, **kw: (said.append(message), real(self, message, **kw))[1])
    cfg = fake_env[0]
    cfg.write_text(cfg.read_text().replace("[ui]\n", '[ui]\ntheme = "no-such-theme"\n'))
    async with running(fake_env) as (app, pilot):
        assert app.theme == "corral-dark"
        assert app.has_class("-theme-corral-dark")
        assert app.get_css_variables()["status-running"].upper() == "#7BC47F"
        assert "Unknown theme 'no-such-theme'; using corral-dark." in said


async def test_usage_is_sampled_periodically(fake_env):
    cfg = fake_env[0]
    cfg.write_text(cfg.read_text().replace("metrics_interval = 60", "metrics_interval = 1"))
    backends = fake_env[3]
    async with running(fake_env) as (app, pilot):
        before = backends["alpha"].state_calls
        await pilot.pause(3.5)
        assert backends["alpha"].state_calls >= before + 2


async def row_shown(pilot, app, key: str, timeout: float = 6.0) -> None:
    """Until the table has the row ``key`` (asserted after ``timeout`` seconds)."""
    for _ in range(int(timeout / 0.05)):
        if key in table_rows(app):
            return
        await pilot.pause(0.05)
    assert key in table_rows(app)


async def test_failed_listing_is_retried_and_the_remote_recovers(fake_env):
    cfg, env, factory, backends = fake_env

    def stumbling(remote, timeout):
        backend = factory(remote, timeout)
        backend.fail_lists = 2 if remote.name == "alpha" else 0
        return backend

    app = make_app(cfg, env=env, factory=stumbling)
    async with app.run_test(size=(140, 40)) as pilot:
        await row_shown(pilot, app, "alpha:web1")
        assert app.screen.inventory.statuses["alpha"].state.value == "connected"


async def test_daemon_gone_during_the_listing_is_offline_and_reconnects(fake_env):
    """A listing that finds the daemon gone (connection refused or broken off) shows the
    remote offline, not "error", and reconnects from the start with a new connection: its
    event stream went with the daemon."""
    cfg, env, factory, backends = fake_env
    made, seen = [], []

    def going(remote, timeout):
        backend = factory(remote, timeout)
        if remote.name == "alpha" and not made:
            async def gone():
                raise Unreachable("'alpha' refused the connection. Is the daemon running?")
            backend.list_instances = gone
        if remote.name == "alpha":
            made.append(backend)
        return backend

    app = make_app(cfg, env=env, factory=going)
    states = app.inventory.state  # every state alpha goes through, however briefly
    set_connection = states.set_connection

    def recorded(name, state, message=""):
        if name == "alpha":
            seen.append(state.value)
        set_connection(name, state, message)

    states.set_connection = recorded
    async with app.run_test(size=(140, 40)) as pilot:
        await row_shown(pilot, app, "alpha:web1")
        assert "disconnected" in seen and "error" not in seen, seen
        assert len(made) == 2  # connected again, on a new backend
        assert app.screen.inventory.statuses["alpha"].state.value == "connected"


async def test_reconnect_key_reconnects_the_selected_remote(fake_env):
    backends = fake_env[3]
    async with running(fake_env) as (app, pilot):
        first = backends["beta"]
        select(app, "beta:db1")
        await pilot.press("R")
        for _ in range(40):
            await pilot.pause(0.1)
            if backends["beta"] is not first:
                break
        assert backends["beta"] is not first  # a new backend object: a new connection
        await settle(pilot, app)
        assert app.screen.inventory.statuses["beta"].state.value == "connected"


async def test_greyed_key_says_why(fake_env):
    backends = fake_env[3]
    async with running(fake_env) as (app, pilot):
        select(app, "alpha:web2")  # stopped
        await settle(pilot, app)
        await press(pilot, app, "s")
        messages = [n.message for n in app._notifications]
        assert any("not possible for alpha:web2: it is stopped" in m for m in messages)
        assert backends["alpha"].calls == []


async def test_wizard_shows_progress_and_cancels_a_running_creation(fake_env):
    backends = fake_env[3]
    async with running(fake_env, size=(150, 45)) as (app, pilot):
        backends["alpha"].slow_create = 30
        await press(pilot, app, "N")
        wizard = app.screen
        wizard.remote = "alpha"
        await press(pilot, app, "enter")
        await pilot.press("ctrl+n")
        await press(pilot, app, *"new1", "enter")
        for _ in range(3):  # resources, network, cloud-init
            await press(pilot, app, "ctrl+n")
        assert wizard.step == "summary"
        await pilot.press("ctrl+n")  # create
        await settle(pilot, app)
        assert "unpacking image 10%" in str(wizard.query_one("#wizard-progress").render())
        await pilot.press("escape")  # cancels the creation, the wizard stays open
        await settle(pilot, app)
        assert ("create-cancelled", "new1", {}) in backends["alpha"].calls
        assert "Cancelled" in str(wizard.query_one("#wizard-progress").render())
        assert app.screen is wizard and "new1" not in backends["alpha"].data
        await pilot.press("ctrl+n")  # after a cancel: back on the summary, no crash
        await settle(pilot, app)
        assert wizard.step == "summary" and app.screen is wizard
        await pilot.press("ctrl+b", "ctrl+b", "ctrl+b")  # to the resources step
        await settle(pilot, app)
        assert wizard.step == "resources"
        box = wizard.query_one("#wizard-cpus")
        box.value = "²"  # a Unicode digit: refused in words, not a crash
        await settle(pilot, app)
        assert wizard.query_one("#next").disabled


async def test_small_terminal_gives_the_remotes_room_to_the_table(fake_env):
    cfg, env, factory, backends = fake_env
    app = make_app(cfg, env=env, factory=factory)
    async with app.run_test(size=(90, 28)) as pilot:
        await settle(pilot, app)
        remotes = app.screen.query_one("#remotes")
        assert not remotes.display or remotes.region.width == 0
        assert app.screen.query_one(InstanceTable).region.width >= 85
        await pilot.press("1")  # asked for: shown and focused
        await settle(pilot, app)
        assert remotes.region.width > 0 and app.screen.query_one(RemoteList).has_focus
        await press(pilot, app, "2")
        assert remotes.region.width == 0
    async with make_app(cfg, env=env, factory=factory).run_test(size=(150, 40)) as pilot:
        await settle(pilot, pilot.app)
        assert pilot.app.screen.query_one("#remotes").region.width > 0
