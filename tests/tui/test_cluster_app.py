"""The app on a real 3-member LXD cluster and Incus cluster (tests/lab_cluster.py): members under the cluster
remote, the Location column, ``location=`` in the filter, the member in the details, moving
an instance and evacuating a member from the UI, a member going offline and failover when
corral's own member dies — each checked with the `lxc` CLI."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from textual.widgets import Input, Static

from tui.actions import BY_NAME
from tui.app import make_app
from tui.widgets.details import DetailsPane
from tui.widgets.instance_table import InstanceTable
from tui.widgets.member_rows import member_key
from tui.widgets.remote_list import RemoteList

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_actions_app import action, pick, screen_name
from test_real_app import rows, select, wait_for, write_config
from test_wizard_app import notes
from wizard_keys import wizard

REMOTE = "clu"


@pytest.fixture(params=["lxd", "incus"])
def cluster(request):
    the_cluster = request.getfixturevalue(f"{request.param}_cluster")
    the_cluster.wait_online()  # a member a test killed and started again is back
    return the_cluster


def member_row(app, member):
    remotes = app.main_screen.query_one(RemoteList)
    try:
        return [str(c).strip() for c in remotes.get_row(member_key(REMOTE, member))]
    except Exception:  # not there (yet)
        return None


def cli_members(cluster):
    return {m["server_name"]: m for m in json.loads(
        cluster.cli("cluster", "list", "--format", "json").stdout)}


def location_cell(app, ref):
    return rows(app).get(ref, [""] * 11)[-1]


async def test_members_location_filter_and_details(cluster, unique, tmp_path):
    a, b = unique("a"), unique("b")
    cluster.cli("init", "busybox", a, "--target", "m2")
    cluster.cli("launch", "busybox", b, "--target", "m3")
    app = make_app(write_config(tmp_path), env=cluster.env())
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: f"{REMOTE}:{b}" in rows(app), what="the rows")
            await wait_for(pilot, lambda: member_row(app, "m3") is not None,
                           what="members under the remote")
            cli = cli_members(cluster)
            counts: dict[str, int] = {}
            for loc in cluster.locations().values():
                counts[loc] = counts.get(loc, 0) + 1
            for name, m in cli.items():
                await wait_for(pilot, lambda name=name: member_row(app, name)[3]
                               == str(counts.get(name, 0)), what=f"{name}'s count")
                row = member_row(app, name)
                assert row[0] == f"└ {name}" and row[2] == m["status"].lower()
            leader = next(n for n, m in cli.items() if "database-leader" in m["roles"])
            assert member_row(app, leader)[1] == "lead"
            # the member's details under the pane
            remotes = app.main_screen.query_one(RemoteList)
            remotes.focus()
            remotes.move_cursor(row=remotes.get_row_index(member_key(REMOTE, "m2")))

            def info() -> str:
                return str(app.main_screen.query_one("#remote-info", Static).render())

            # (the first screen's members are the first listing's; the backend reads them
            # again once connected, which may come after this under load)
            await wait_for(pilot, lambda: cli["m2"]["url"] in info(),
                           what="m2's details under the pane")
            shown = info()
            assert cli["m2"]["message"] in shown and "failure domain default" in shown
            # the Location column and location= in the filter
            table = app.main_screen.query_one(InstanceTable)
            assert table.show_location
            assert location_cell(app, f"{REMOTE}:{a}") == "m2"
            await pilot.press("2", "slash", *"location=m3", "enter")
            await wait_for(pilot, lambda: f"{REMOTE}:{a}" not in rows(app), what="the filter")
            assert f"{REMOTE}:{b}" in rows(app)
            assert all(v[-1] == "m3" for v in rows(app).values())
            app.main_screen.query_one("#filter", Input).value = ""
            await pilot.pause(0.2)
            select(app, f"{REMOTE}:{a}")
            await pilot.press("enter")
            await pilot.pause(0.3)
            text = DetailsPane.overview(app.inventory.instances[table.selected_ref], None,
                                        None, "")
            assert "Member  m2" in str(text)
    finally:
        cluster.cli("delete", "--force", a, b, check=False)


async def test_move_and_evacuate_from_the_ui(cluster, unique, tmp_path):
    a, r, o, project = unique("a"), unique("r"), unique("o"), unique("p")
    cluster.cli("init", "busybox", a, "--target", "m1")
    cluster.cli("launch", "busybox", r, "--target", "m2")
    cluster.cli("project", "create", project, "-c", "features.images=false",
                "-c", "features.profiles=false")
    cluster.cli("init", "busybox", o, "--target", "m1", "--project", project)
    app = make_app(write_config(tmp_path), env=cluster.env())
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: member_row(app, "m3") is not None
                           and f"{REMOTE}:{r}" in rows(app), what="members and rows")
            # a stopped instance moves
            await action(pilot, app, f"{REMOTE}:{a}", "move-member")
            await pick(pilot, app, "m3")
            await wait_for(pilot, lambda: cluster.locations().get(a) == "m3", timeout=60,
                           what=lambda: f"moved ({notes(app)})")
            await wait_for(pilot, lambda: location_cell(app, f"{REMOTE}:{a}") == "m3",
                           what="the new location on screen")
            # a running one: stop, move, start, after saying why in words
            await action(pilot, app, f"{REMOTE}:{r}", "move-member")
            await pick(pilot, app, "m1")
            await wait_for(pilot, lambda: screen_name(app) == "ConfirmDialog",
                           what="stop first?")
            message = str(app.screen.query_one("#dialog-message", Static).render())
            assert "stopping it first" in message
            await pilot.click("#confirm")
            await wait_for(pilot, lambda: cluster.locations().get(r) == "m1", timeout=90,
                           what=lambda: f"moved running ({notes(app)})")
            await wait_for(pilot, lambda: cluster.cli(
                "list", r, "-c", "s", "--format", "csv").stdout.strip() == "RUNNING",
                timeout=60, what="started again on m1")
            # evacuate m1: the confirmation lists what happens to its instances
            await wait_for(pilot, lambda: member_row(app, "m1")[3] == "1",
                           what=lambda: f"m1 counts the moved instance ({member_row(app, 'm1')}"
                           f", {r} on {location_cell(app, f'{REMOTE}:{r}')}, {notes(app)})")
            app.main_screen.run_action(BY_NAME["evacuate"], remote=REMOTE)
            await pick(pilot, app, "m1")
            await wait_for(pilot, lambda: screen_name(app) == "ConfirmDialog",
                           what="the evacuation confirmation")
            message = str(app.screen.query_one("#dialog-message", Static).render())
            assert f"{r}: running → stopped, moved, started again" in message
            # evacuation moves the instances of every project: those are listed too
            assert f"{o} (project {project}): stopped → moved (stopped)" in message
            assert f"{REMOTE}:{o}" not in rows(app)  # the table shows its own project
            await pilot.click("#confirm")
            await wait_for(pilot, lambda: cli_members(cluster)["m1"]["status"]
                           == "Evacuated", timeout=90, what=lambda: f"evacuated ({notes(app)})")
            await wait_for(pilot, lambda: member_row(app, "m1")[2] == "evacuated",
                           what="m1 evacuated on screen")
            await wait_for(pilot, lambda: cluster.locations().get(r, "m1") != "m1", timeout=90,
                           what="r moved off m1")
            await wait_for(pilot, lambda: not app.inventory.activity, timeout=90,
                           what="the evacuation's end")
            app.main_screen.run_action(BY_NAME["restore-member"], remote=REMOTE)
            await pick(pilot, app, "m1")
            await wait_for(pilot, lambda: screen_name(app) == "ConfirmDialog",
                           what="the restore confirmation")
            await pilot.click("#confirm")
            await wait_for(pilot, lambda: cli_members(cluster)["m1"]["status"]
                           == "Online", timeout=90, what=lambda: f"restored ({notes(app)})")
            await wait_for(pilot, lambda: member_row(app, "m1")[2] == "online",
                           what="m1 online on screen")
            await wait_for(pilot, lambda: cluster.locations().get(r) == "m1", timeout=30,
                           what="r back on m1")
            # the member is online before its restore ends: the other project's instance
            # comes back last (deleting it meanwhile fails the restore, and Incus then
            # marks the member evacuated again)
            await wait_for(pilot, lambda: not app.inventory.activity, timeout=90,
                           what="the restore's end")
            assert cluster.cli("list", o, "--project", project, "--format", "csv",
                               "-c", "L").stdout.strip() == "m1"
            assert cli_members(cluster)["m1"]["status"] == "Online"
    finally:
        if cli_members(cluster)["m1"]["status"] != "Online":
            cluster.cli("cluster", "restore", "m1", "--force", check=False)
        cluster.cli("delete", "--force", a, r, check=False)
        cluster.cli("delete", "--force", o, "--project", project, check=False)
        cluster.cli("project", "delete", project, check=False)


async def test_offline_member_and_failover_on_screen(cluster, unique, tmp_path):
    on1, on2 = unique("x"), unique("y")
    cluster.cli("init", "busybox", on1, "--target", "m1")
    cluster.cli("init", "busybox", on2, "--target", "m2")
    app = make_app(write_config(tmp_path), env=cluster.env())
    m1, m3 = cluster.member("m1"), cluster.member("m3")
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: member_row(app, "m3") is not None
                           and f"{REMOTE}:{on1}" in rows(app), what="members and rows")
            killed = time.monotonic()
            m3.kill()
            await wait_for(pilot, lambda: member_row(app, "m3")[2] == "offline", timeout=10,
                           what="m3 offline on screen")
            assert time.monotonic() - killed <= 5
            m3.start()
            await wait_for(pilot, lambda: member_row(app, "m3")[2] == "online", timeout=60,
                           what="m3 back online on screen")
            # corral's own member dies: it goes through another one and says so
            m1.kill()
            await wait_for(pilot, lambda: "reached through" in (
                getattr(app.inventory.statuses[REMOTE].server, "note", "") or ""),
                timeout=30, what="failover")
            await wait_for(pilot, lambda: member_row(app, "m1")[2] == "offline", timeout=10,
                           what="m1 offline on screen")
            # marked "unknown !": the reason (its member is offline) is the row's tooltip
            await wait_for(pilot, lambda: rows(app)[f"{REMOTE}:{on1}"][3] == "unknown !",
                           timeout=10,
                           what=lambda: f"its instance unknown ({rows(app).get(f'{REMOTE}:{on1}')})")
            assert "m1 is offline" in app.inventory.instances[
                table_ref(app, on1)].extra["reason"]
            select(app, f"{REMOTE}:{on2}")
            await pilot.press("S")
            await wait_for(pilot, lambda: rows(app)[f"{REMOTE}:{on2}"][3] == "running",
                           timeout=60, what="the others keep working")
            m1.start()
            await wait_for(pilot, lambda: member_row(app, "m1")[2] == "online", timeout=60,
                           what="m1 back online on screen")
            await wait_for(pilot, lambda: rows(app)[f"{REMOTE}:{on1}"][3] == "stopped",
                           timeout=30, what="its instance known again")
    finally:
        for m in (m1, m3):
            if not m.alive():
                m.start()
        cluster.cli("delete", "--force", on1, on2, check=False)


def table_ref(app, name):
    return next(r for r in app.inventory.instances if r.remote == REMOTE and r.name == name)


async def test_launch_wizard_places_on_a_member_or_lets_the_cluster(cluster, unique,
                                                                    tmp_path):
    chosen, auto = unique("p"), unique("q")
    app = make_app(write_config(tmp_path), env=cluster.env())
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: member_row(app, "m3") is not None, what="members")
            await wizard(pilot, app, remote=REMOTE, source=lambda s: "busybox" in s.label,
                         name=chosen, placement="m3", start=False, user_data="")
            await wait_for(pilot, lambda: any(f"{REMOTE}:{chosen} on member m3" in n
                                              for n in notes(app)), timeout=60,
                           what=lambda: f"created on m3 ({notes(app)})")
            assert cluster.locations()[chosen] == "m3"
            await wizard(pilot, app, remote=REMOTE, source=lambda s: "busybox" in s.label,
                         name=auto, start=False, user_data="")
            await wait_for(pilot, lambda: auto in cluster.locations(), timeout=60,
                           what=lambda: f"created ({notes(app)})")
            where = cluster.locations()[auto]
            await wait_for(pilot, lambda: any(f"{REMOTE}:{auto} on member {where}" in n
                                              for n in notes(app)), timeout=10,
                           what=lambda: f"where it went ({notes(app)})")
    finally:
        cluster.cli("delete", "--force", chosen, auto, check=False)
