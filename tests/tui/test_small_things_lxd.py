"""Small things against the lab's real LXD daemons: a stop-and-copy offers to start the
source again; a snapshot with an empty name says what is missing."""

from __future__ import annotations

import sys
from pathlib import Path

from tui.actions import BY_NAME
from tui.app import make_app
from tui.flows.transfer import copy_targets

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_actions_app import action, answer, names, pick, screen_name
from test_real_app import rows, select, status, wait_for, write_config


async def test_stop_and_copy_offers_to_start_again(lab, lab_env, unique, tmp_path):
    a = unique("a")
    lab.lxd1.cli("launch", "busybox", a)
    copy = unique("c")
    app = make_app(write_config(tmp_path), env=lab_env)
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: status(app, f"local:{a}") == "running",
                           what="running")
            ctx = app.main_screen.context(
                BY_NAME["copy"], ref=next(r for r in app.inventory.instances if r.name == a))
            assert list(copy_targets(ctx)) == sorted(copy_targets(ctx))  # alphabetical
            await action(pilot, app, f"local:{a}", "copy")
            await pick(pilot, app, "lab2")
            await answer(pilot, app, copy)
            await wait_for(pilot, lambda: screen_name(app) == "ConfirmDialog", what="stop?")
            await pilot.pause(0.3)
            await pilot.click("#confirm")
            await wait_for(pilot, lambda: screen_name(app) == "ConfirmDialog"
                           and "again" in app.screen.title_text, timeout=90,
                           what="start it again?")
            assert copy in names(lab.lxd2)
            await pilot.pause(0.3)
            await pilot.click("#confirm")
            await wait_for(pilot, lambda: status(app, f"local:{a}") == "running",
                           what=lambda: f"running again ({rows(app).get(f'local:{a}')})")
            assert "RUNNING" in lab.lxd1.cli("list", a, "-c", "s", "--format", "csv").stdout
    finally:
        lab.lxd1.delete(a)
        lab.lxd2.cli("delete", "--force", copy, check=False)


async def test_empty_snapshot_name_says_what_is_missing(lab, lab_env, unique, tmp_path):
    a = unique("s")
    lab.lxd1.cli("init", "busybox", a)
    app = make_app(write_config(tmp_path), env=lab_env)
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: f"local:{a}" in rows(app), what="the row")
            select(app, f"local:{a}")
            await pilot.press("n")
            await wait_for(pilot, lambda: screen_name(app) == "SnapshotDialog", what="dialog")
            box = app.screen.query_one("#snapshot-name")
            default = box.value
            assert default
            box.focus()
            await pilot.press("end", "ctrl+u", "enter")
            await pilot.pause(0.3)
            assert screen_name(app) == "SnapshotDialog"  # not taken, and not silent:
            said = str(app.screen.query_one("#dialog-problem").render())
            assert "needs a name" in said and default in said, said
            assert app.screen.query_one("#snapshot-name").value == default
            await pilot.press("enter")  # the default, taken
            await wait_for(pilot, lambda: default in lab.lxd1.cli("info", a).stdout,
                           what="the snapshot")
    finally:
        lab.lxd1.delete(a)
