"""Bulk verbs of the resource views against the real lab daemons (LXD over unix and HTTPS,
Incus over HTTPS), the CLIs as judges: rows marked with ``space``/``*``, one confirmation
listing them, every row tried (one refusal does not stop the others), each result in the
operations view, and marks kept until cleared."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tui.app import make_app
from tui.widgets.instance_table import InstanceTable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_real_app import rows, select, wait_for, write_config
from test_views_app import cli_names, connected, mine, pane, select_row, short, switch


def results_of(app, remote, word):
    return [r for r in app.inventory.statuses[remote].results if word in r.description]


async def choose_if_asked(pilot, app, option_id):
    """A choice dialog, when one opens (the remote or pool to copy to), answered."""
    await pilot.pause(0.5)
    if not app.screen.query("#choice-list"):
        return
    box = app.screen.query_one("#choice-list")
    box.highlighted = next(i for i in range(box.option_count)
                           if box.get_option_at_index(i).id == option_id)
    box.action_select()
    await pilot.pause(0.2)


async def confirm_listing(pilot, app, names):
    """The one confirmation: it lists every marked row."""
    await wait_for(pilot, lambda: app.screen.query("#confirm"), what="confirmation")
    text = str(app.screen.query_one("#dialog-message").render())
    assert all(n in text for n in names), text
    await pilot.pause(0.2)
    await pilot.click("#confirm")


async def mark_filtered(pilot, app, prefix, count):
    await pilot.press("slash", *prefix, "enter")
    table = pane(app).table
    await wait_for(pilot, lambda: len(table.shown) == count,
                   what=lambda: f"{count} rows shown: {table.shown}")
    table.focus()
    await pilot.press("asterisk")  # every row the filter shows
    assert len(table.marked) == count


@pytest.mark.parametrize("remote", ["local", "inc1"])
async def test_bulk_delete_of_three_profiles_where_one_is_used(lab, lab_env, unique, tmp_path,
                                                               remote):
    daemon = {"local": lab.lxd1, "inc1": lab.incus1}[remote]
    prefix = short("bd")
    names = [f"{prefix}-{i}" for i in range(3)]
    inst = unique()
    for n in names:
        daemon.cli("profile", "create", n)
    daemon.cli("init", "busybox", inst, "-p", "default", "-p", names[1])
    app = make_app(write_config(tmp_path), env=lab_env)
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await connected(pilot, app)
            await switch(pilot, "profiles")
            await wait_for(pilot, lambda: {(remote, n) for n in names} <= mine(app),
                           what="profile rows")
            await mark_filtered(pilot, app, prefix, 3)
            await pilot.press("d")
            await confirm_listing(pilot, app, names)
            await wait_for(pilot, lambda: len(results_of(app, remote, prefix)) == 3,
                           what="three results", timeout=30)
            left = {n for n in cli_names(daemon, "profile", "list") if n.startswith(prefix)}
            assert left == {names[1]}  # the two unused went, the used one stays
            failed = [r for r in results_of(app, remote, prefix) if r.status == "Failure"]
            assert len(failed) == 1 and names[1] in failed[0].description
            assert inst in failed[0].error  # refused in words: who uses it
            table = pane(app).table
            await wait_for(pilot, lambda: {table.items[k].name for k in table.marked}
                           == {names[1]}, what="the refused row still marked")
            # the results are in the operations view
            await switch(pilot, "operations")
            await wait_for(pilot, lambda: sum(prefix in n for r, n in mine(app)
                                              if r == remote) == 3,
                           what="three results in the operations view")
            await switch(pilot, "profiles")
            assert pane(app).table.marked  # kept while another view was shown
            select_row(app, remote, names[1])
            await pilot.press("m")  # rename: one row at a time, and it says so
            await wait_for(pilot, lambda: app.screen.query("#dialog-input"), what="rename")
            assert any("one row at a time" in n.message and names[1] in n.message
                       for n in app._notifications)
            await pilot.press("escape")
            await pilot.press("ctrl+u")
            assert not pane(app).table.marked
    finally:
        daemon.cli("delete", "-f", inst, check=False)
        for n in names:
            daemon.cli("profile", "delete", n, check=False)


async def test_bulk_copy_of_volumes_where_one_name_is_taken(lab, lab_env, tmp_path):
    """Incus: three volumes copied into their own pool (as <name>-copy); one copy's name
    is taken, so that row is refused and the other two are copied."""
    daemon = lab.incus1
    prefix = short("bv")
    names = [f"{prefix}-{i}" for i in range(3)]
    for n in names:
        daemon.cli("storage", "volume", "create", "default", n)
    daemon.cli("storage", "volume", "create", "default", f"{names[2]}-copy")
    app = make_app(write_config(tmp_path), env=lab_env)

    def vols():
        out = json.loads(daemon.cli("storage", "volume", "list", "default", "--format",
                                    "json").stdout)
        return {v["name"] for v in out if v["type"] == "custom"
                and v["name"].startswith(prefix)}

    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await connected(pilot, app)
            await switch(pilot, "volumes")
            await wait_for(pilot, lambda: {("inc1", n) for n in names} <= mine(app),
                           what="volume rows")
            await pilot.press("slash", *prefix, "enter")
            table = pane(app).table
            await wait_for(pilot, lambda: len(table.shown) == 4, what="four shown")
            table.focus()
            for n in names:  # space on each of the three (not the existing copy)
                select_row(app, "inc1", n)
                await pilot.press("space")
            assert {table.items[k].name for k in table.marked} == set(names)
            await pilot.press("c")
            await choose_if_asked(pilot, app, "inc1")  # another Incus remote may exist
            await choose_if_asked(pilot, app, "default")
            await confirm_listing(pilot, app, [f"{n}-copy" for n in names])
            await wait_for(pilot, lambda: len(results_of(app, "inc1", prefix)) == 3,
                           what="three results", timeout=60)
            assert vols() == set(names) | {f"{n}-copy" for n in names}
            failed = [r for r in results_of(app, "inc1", prefix) if r.status == "Failure"]
            assert len(failed) == 1 and names[2] in failed[0].description
            assert failed[0].error
            assert len(table.marked) == 3  # marks stay until cleared
    finally:
        for n in names + [f"{n}-copy" for n in names]:
            daemon.cli("storage", "volume", "delete", "default", n, check=False)


async def test_bulk_copy_of_images_to_another_lxd_remote(lab, lab_env, tmp_path):
    """Two images of local marked and copied to lab2 with one confirmation; lab2's CLI
    lists both, with their aliases."""
    prefix = short("bi")
    inst = f"{prefix}-src"
    aliases = [f"{prefix}-{i}" for i in range(2)]
    lab.lxd1.cli("init", "busybox", inst)
    for i, alias in enumerate(aliases):  # a property of its own: another fingerprint
        lab.lxd1.cli("publish", inst, "--alias", alias, f"description=bulk {i}")
    app = make_app(write_config(tmp_path), env=lab_env)

    def on_lab2():
        out = json.loads(lab.lxd2.cli("image", "list", "--format", "json").stdout)
        return {a["name"] for i in out for a in i["aliases"] if a["name"].startswith(prefix)}

    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await connected(pilot, app)
            await switch(pilot, "images")
            await wait_for(pilot, lambda: {("local", a) for a in aliases} <= mine(app),
                           what="image rows")
            await mark_filtered(pilot, app, prefix, 2)
            await pilot.press("c")
            await choose_if_asked(pilot, app, "lab2")
            await confirm_listing(pilot, app, [f"{a} to lab2" for a in aliases])
            await wait_for(pilot, lambda: len(results_of(app, "local", prefix)) == 2,
                           what="two results", timeout=120)
            assert all(r.status == "Success" for r in results_of(app, "local", prefix)), \
                [(r.description, r.error) for r in results_of(app, "local", prefix)]
            assert on_lab2() == set(aliases)
    finally:
        lab.lxd1.cli("delete", "-f", inst, check=False)
        for alias in aliases:
            lab.lxd1.cli("image", "delete", alias, check=False)
            lab.lxd2.cli("image", "delete", alias, check=False)


async def test_a_single_instance_verb_with_marks_says_it_acts_on_one(lab, lab_env, unique,
                                                                      tmp_path):
    prefix = unique()
    names = [f"{prefix}-{i}" for i in range(2)]
    for n in names:
        lab.lxd1.cli("init", "busybox", n)
    app = make_app(write_config(tmp_path), env=lab_env)
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await connected(pilot, app)
            await wait_for(pilot, lambda: all(f"local:{n}" in rows(app) for n in names),
                           what="instances")
            await pilot.press("slash", *prefix, "enter")
            await wait_for(pilot, lambda: len(rows(app)) == 2, what="filtered")
            await pilot.press("asterisk")
            assert len(app.main_screen.query_one(InstanceTable).marked) == 2
            select(app, f"local:{names[0]}")
            await pilot.press("P")  # assigning profiles: one instance at a time
            await wait_for(pilot, lambda: app.screen.query("#dialog-input"), what="profiles")
            said = [n.message for n in app._notifications]
            assert any("one instance at a time" in m and names[0] in m
                       and "2 marked" in m for m in said), said
            await pilot.press("escape")
    finally:
        for n in names:
            lab.lxd1.cli("delete", "-f", n, check=False)


async def test_bulk_refresh_of_images_refuses_each_in_words(lab, lab_env, tmp_path):
    """Incus: two marked images that were not copied from an image server: each row is
    tried and refused in words, and both images stay."""
    prefix = short("br")
    inst, alias = f"{prefix}-src", f"{prefix}-img"
    lab.incus1.cli("init", "busybox", inst)
    lab.incus1.cli("publish", inst, "--alias", alias)
    app = make_app(write_config(tmp_path), env=lab_env)

    def aliases():
        out = json.loads(lab.incus1.cli("image", "list", "--format", "json").stdout)
        return {a["name"] for i in out for a in i["aliases"]}

    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await connected(pilot, app)
            await switch(pilot, "images")
            await wait_for(pilot, lambda: {("inc1", alias), ("inc1", "busybox")} <= mine(app),
                           what="image rows")
            for name in (alias, "busybox"):
                select_row(app, "inc1", name)
                await pilot.press("space")
            assert len(pane(app).table.marked) == 2
            await pilot.press("U")
            await confirm_listing(pilot, app, [f"inc1:{alias}", "inc1:busybox"])

            def done():
                return [r for r in app.inventory.statuses["inc1"].results
                        if r.description.startswith("refresh image")]

            await wait_for(pilot, lambda: len(done()) == 2, what="two results", timeout=30)
            assert all(r.status == "Failure" and "nothing to refresh it from" in r.error
                       for r in done()), [(r.description, r.error) for r in done()]
            assert {alias, "busybox"} <= aliases()
    finally:
        lab.incus1.cli("delete", "-f", inst, check=False)
        lab.incus1.cli("image", "delete", alias, check=False)
