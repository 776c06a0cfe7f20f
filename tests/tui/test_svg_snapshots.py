"""SVG snapshots of the main screen (two sizes, both themes), of each launch-wizard step and
of the resource editor, against the in-memory FakeBackend (deterministic). Update after an intended change with
``pytest tests/tui/test_svg_snapshots.py --snapshot-update`` and look at the report."""

from __future__ import annotations

import pytest

from backends.fake import FakeBackend
from backends.models import ConnectionState, InstanceStatus, InstanceType, Remote
from tui.app import make_app
from tui.widgets.instance_table import InstanceTable

from .test_real_app import wait_for

SIZE = (130, 40)


def build_app(tmp_path, theme: str | None = None):
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        '[ui]\nmetrics_interval = 600\n[lxc]\nenabled = false\n[qemu]\nenabled = false\n'
        '[[remote]]\nname = "alpha"\nkind = "lxd"\naddress = "/nonexistent/a.sock"\n')

    def factory(remote: Remote, timeout: float):
        return FakeBackend(remote, instances=[
            ("web1", InstanceType.CONTAINER, InstanceStatus.RUNNING),
            ("db1", InstanceType.VM, InstanceStatus.STOPPED)])

    env = {"HOME": str(tmp_path), "LXD_SOCKET": str(tmp_path / "no.sock"),
           "INCUS_SOCKET": str(tmp_path / "no2.sock")}
    return make_app(cfg, env=env, factory=factory, theme=theme)


async def settle(pilot):
    """Let the screen settle, with every text cursor steady: a blinking one is drawn or not
    by when the picture is taken (a busy CI machine took one between blinks)."""
    for _ in range(6):
        for widget in pilot.app.screen.query("Input, TextArea"):
            widget.cursor_blink = False
        await pilot.pause(0.05)


async def open_wizard(pilot, step: str):
    await settle(pilot)
    await pilot.press("N")
    await settle(pilot)
    app = pilot.app
    if step == "where":
        return
    await pilot.press("enter")
    await settle(pilot)
    if step == "what":
        return
    await pilot.press("ctrl+n")
    await settle(pilot)
    await pilot.press(*("9bad" if step == "bad-name" else "web3"))
    await settle(pilot)
    if step in ("name", "bad-name"):
        return
    await pilot.press("enter")
    await settle(pilot)
    if step == "resources":
        return
    await pilot.press("ctrl+n")
    await settle(pilot)
    if step == "network":
        return
    await pilot.press("ctrl+n")
    await settle(pilot)
    if step == "cloud-init":
        area = app.screen.query_one("#wizard-user-data")
        area.text = "#cloud-config\nruncmd: [unclosed\n"
        await settle(pilot)
        return
    await pilot.press("ctrl+n")
    await settle(pilot)


@pytest.mark.parametrize("step", ["where", "what", "name", "bad-name", "resources",
                                  "network", "cloud-init", "summary"])
def test_wizard_step(snap_compare, tmp_path, step):
    async def run_before(pilot):
        await open_wizard(pilot, step)

    assert snap_compare(build_app(tmp_path), terminal_size=SIZE, run_before=run_before)


def test_resource_editor(snap_compare, tmp_path):
    async def run_before(pilot):
        await settle(pilot)
        await pilot.press("j")  # web1: running, so live fields and a pending value
        await pilot.press("L")
        await settle(pilot)

    assert snap_compare(build_app(tmp_path), terminal_size=SIZE, run_before=run_before)


async def main_screen_settled(pilot):
    """The remote connected, both rows in the table, the footer's keys laid out and every
    pending repaint done: the picture is the same however busy the machine is."""
    app = pilot.app

    def ready() -> bool:
        status = app.inventory.statuses.get("alpha")
        if status is None or status.state is not ConnectionState.CONNECTED:
            return False
        table = app.main_screen.query_one(InstanceTable)
        return table.row_count == 2

    await wait_for(pilot, ready, what="alpha connected with its two rows")
    await settle(pilot)
    await pilot.wait_for_scheduled_animations()
    await settle(pilot)


@pytest.mark.parametrize("theme", ["corral-dark", "corral-light"])
@pytest.mark.parametrize("size", [(100, 30), (200, 50)], ids=["100x30", "200x50"])
def test_main_screen(snap_compare, tmp_path, theme, size):
    async def run_before(pilot):
        await main_screen_settled(pilot)

    assert snap_compare(build_app(tmp_path, theme), terminal_size=size, run_before=run_before)
