"""Pilot tests of the resource views, YAML editing and bulk actions against the real lab
daemons (LXD over unix, LXD over HTTPS, Incus over HTTPS), the CLIs as judges."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import sys
import textwrap
import uuid
from pathlib import Path

import yaml

from backends.models import ConnectionState
from tui.app import make_app
from tui.views.pane import ResourcePane
from tui.widgets.instance_table import InstanceTable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_real_app import rows, select, wait_for, write_config

CONNECTED = ("local", "lab2", "inc1")


def short(prefix=""):
    return f"{prefix}{uuid.uuid4().hex[:6]}"


def pane(app):
    return app.main_screen.query_one(ResourcePane)


def view_rows(app):
    return {(r.remote, r.name) for r in pane(app).table.items.values()}


def cli_names(daemon, *args):
    return {x["name"] for x in json.loads(daemon.cli(*args, "--format", "json").stdout)}


async def connected(pilot, app):
    await wait_for(pilot, lambda: all(
        app.inventory.statuses[n].state is ConnectionState.CONNECTED
        and app.inventory.statuses[n].listed for n in CONNECTED), what="remotes connected")


async def switch(pilot, word):
    await pilot.press("colon", *word, "enter")
    await pilot.pause(0.1)


def select_row(app, remote, name):
    table = pane(app).table
    for index, key in enumerate(table.shown):
        row = table.items[key]
        if row.remote == remote and row.name == name:
            table.move_cursor(row=index)
            table.focus()
            return
    raise AssertionError(f"{remote}:{name} not in the view")


async def confirm(pilot, app):
    await wait_for(pilot, lambda: app.screen.query("#confirm"), what="confirmation")
    await pilot.pause(0.2)
    await pilot.click("#confirm")


def mine(app):
    """Only the three lab remotes (the lxc/qemu remotes of the test config add nothing)."""
    return {(r, n) for r, n in view_rows(app) if r in CONNECTED}


async def select_in_view(pilot, app, view, remote, name):
    """Switch to ``view``, wait for its row ``remote``:``name`` and put the cursor on it."""
    await switch(pilot, view)
    await wait_for(pilot, lambda: (remote, name) in mine(app),
                   what=f"{remote}:{name} in the {view} view")
    select_row(app, remote, name)


@contextlib.asynccontextmanager
async def lab_app(tmp_path, lab_env):
    """(app, pilot): corral on the lab's remotes in a 160x45 Pilot, all of them connected."""
    app = make_app(write_config(tmp_path), env=lab_env)
    async with app.run_test(size=(160, 45)) as pilot:
        await connected(pilot, app)
        yield app, pilot


async def test_views_list_what_the_clis_list(lab, lab_env, tmp_path):
    daemons = {"local": lab.lxd1, "lab2": lab.lxd2, "inc1": lab.incus1}
    prof = short("vp-")
    for d in daemons.values():
        d.cli("profile", "create", prof)
    try:
        async with lab_app(tmp_path, lab_env) as (app, pilot):
            for word, args in (("profiles", ("profile", "list")),
                               ("net", ("network", "list")),
                               ("storage", ("storage", "list")),
                               ("proj", ("project", "list"))):
                await switch(pilot, word)

                def want(args=args):
                    # read again each time: the host's own interfaces (unmanaged networks)
                    # come and go with other programs, and send no events
                    pane(app).reload(None)
                    return {(n, x) for n, d in daemons.items() for x in cli_names(d, *args)}

                await wait_for(pilot, lambda: mine(app) == want(),
                               what=lambda word=word: f"{word}: {mine(app)} != {want()}")
                spec = pane(app).spec
                assert app.main_screen.sub_title == f"view: {spec.title.lower()}"
                assert pane(app).table.border_title.startswith(spec.title)
            await switch(pilot, "images")
            images = {(n, i["aliases"][0]["name"] if i["aliases"] else i["fingerprint"][:12])
                      for n, d in daemons.items()
                      for i in json.loads(d.cli("image", "list", "--format", "json").stdout)}
            await wait_for(pilot, lambda: mine(app) == images, what="images")
            # the filter and back to the instances with esc
            await switch(pilot, "profiles")
            await wait_for(pilot, lambda: (("lab2", prof) in mine(app)), what="profiles")
            await pilot.press("slash", *prof, "enter")
            table = pane(app).table
            await wait_for(pilot, lambda: {(table.items[k].remote, table.items[k].name)
                                           for k in table.shown}
                           == {(n, prof) for n in daemons}, what="filtered")
            # a profile made outside appears without a key press (events, not polling)
            other = short("ve-")
            await asyncio.to_thread(lab.incus1.cli, "profile", "create", other)
            await pilot.press("escape")  # leaves the filter
            await wait_for(pilot, lambda: ("inc1", other) in mine(app), what="event row")
            lab.incus1.cli("profile", "delete", other)
            await wait_for(pilot, lambda: ("inc1", other) not in mine(app), what="row gone")
            await pilot.press("escape")
            await wait_for(pilot, lambda: not app.main_screen.views.in_resource_view,
                           what="back to instances")
            assert app.main_screen.focused is app.main_screen.query_one(InstanceTable)
    finally:
        for d in daemons.values():
            d.cli("profile", "delete", prof, check=False)


async def test_storage_enter_opens_volumes_and_new_volume_is_seen_by_cli(lab, lab_env,
                                                                         tmp_path):
    vol = short("vv-")
    lab.lxd2.cli("storage", "volume", "create", "default", vol)
    try:
        async with lab_app(tmp_path, lab_env) as (app, pilot):
            await select_in_view(pilot, app, "storage", "lab2", "default")
            await pilot.press("enter")
            await wait_for(pilot, lambda: pane(app).spec.name == "volumes"
                           and ("lab2", vol) in mine(app), what="volumes of the pool")
            assert {r for r, _ in mine(app)} == {"lab2"}
            await pilot.press("N")
            await wait_for(pilot, lambda: app.screen.query("#dialog-input"), what="name")
            await pilot.press(*(vol + "n"), "enter")
            await wait_for(pilot, lambda: "Size" in str(app.screen.label), what="size")
            await pilot.press(*"20MiB", "enter")
            await wait_for(pilot, lambda: ("lab2", vol + "n") in mine(app), what="new row")
            shown = yaml.safe_load(lab.lxd2.cli("storage", "volume", "show", "default",
                                                vol + "n").stdout)
            assert shown["config"]["size"] == "20MiB"
            await pilot.press("escape")
            await wait_for(pilot, lambda: pane(app).spec.name == "storage", what="pools")
    finally:
        for name in (vol, vol + "n"):
            lab.lxd2.cli("storage", "volume", "delete", "default", name, check=False)


async def test_deleting_a_used_profile_from_the_view_is_refused(lab, lab_env, unique,
                                                                tmp_path):
    prof, inst = short("vu-"), unique()
    lab.lxd1.cli("profile", "create", prof)
    lab.lxd1.cli("init", "busybox", inst, "-p", "default", "-p", prof)
    try:
        async with lab_app(tmp_path, lab_env) as (app, pilot):
            await select_in_view(pilot, app, "profiles", "local", prof)
            await pilot.press("d")
            await confirm(pilot, app)
            results = app.inventory.statuses["local"].results
            await wait_for(pilot, lambda: any(prof in r.description for r in results),
                           what="result recorded")
            result = [r for r in results if prof in r.description][-1]
            assert result.status == "Failure" and inst in result.error
            assert prof in cli_names(lab.lxd1, "profile", "list")
            await switch(pilot, "operations")
            await wait_for(pilot, lambda: any(prof in n for _, n in mine(app)),
                           what="the result in the operations view")
    finally:
        lab.lxd1.cli("delete", "-f", inst)
        lab.lxd1.cli("profile", "delete", prof, check=False)


EDITOR = textwrap.dedent("""\
    import os, subprocess, sys, yaml
    path = sys.argv[1]
    log = os.environ["CORRAL_TEST_LOG"]
    text = open(path).read()
    runs = open(log).read().count("RUN") if os.path.exists(log) else 0
    with open(log, "a") as f:
        f.write("RUN\\n" + text + "\\n")
    data = yaml.safe_load(text)
    if runs == 0:
        data["config"]["user.corral"] = "mine"
        side = os.environ.get("CORRAL_TEST_SIDE")
        if side:
            subprocess.run(side, shell=True, check=True)
    open(path, "w").write(yaml.safe_dump(data))
    """)


async def test_yaml_edit_in_editor_and_concurrent_change(lab, lab_env, tmp_path,
                                                         monkeypatch):
    prof = short("ve-")
    lab.lxd1.cli("profile", "create", prof)
    script = tmp_path / "editor.py"
    script.write_text(EDITOR)
    log = tmp_path / "editor.log"
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("CORRAL_TEST_LOG", str(log))
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in lab.lxd1._env().items()
                   if k in ("LXD_DIR", "LXD_CONF", "HOME"))
    # the hermetic LXD_SOCKET (no system daemon) would win over LXD_DIR
    monkeypatch.setenv("CORRAL_TEST_SIDE", f"env -u LXD_SOCKET {env} lxc profile set {prof} user.other=1")
    try:
        async with lab_app(tmp_path, lab_env) as (app, pilot):
            await select_in_view(pilot, app, "profiles", "local", prof)
            await pilot.press("E")
            # the editor changed the text while someone else changed the profile: refused
            await wait_for(pilot, lambda: app.screen.query("#choice-list"),
                           what="the refusal with 'edit again'", timeout=30)
            shown = yaml.safe_load(lab.lxd1.cli("profile", "show", prof).stdout)
            assert shown["config"] == {"user.other": "1"}
            await pilot.press("enter")  # edit again (my text kept)
            await wait_for(pilot, lambda: "user.corral" in yaml.safe_load(lab.lxd1.cli(
                "profile", "show", prof).stdout)["config"], what="saved", timeout=30)
            runs = log.read_text().split("RUN\n")
            assert len(runs) == 3
            assert "user.corral: mine" in runs[2]  # the text is kept for the re-edit
            assert "changed by someone else" in runs[2]  # said in words, as a comment
            assert "#   user.other: '1'" in runs[2]  # with the current version to merge
            shown = yaml.safe_load(lab.lxd1.cli("profile", "show", prof).stdout)
            assert shown["config"] == {"user.corral": "mine"}  # what the user saved
    finally:
        lab.lxd1.cli("profile", "delete", prof, check=False)


async def test_bulk_stop_of_three_marked_and_a_partial_failure(lab, lab_env, unique,
                                                               tmp_path):
    prefix = unique()
    names = [f"{prefix}-{i}" for i in range(3)]
    for n in names:
        lab.lxd1.cli("launch", "busybox", n)
    try:
        async with lab_app(tmp_path, lab_env) as (app, pilot):
            await wait_for(pilot, lambda: all(f"local:{n}" in rows(app) for n in names),
                           what="instances")
            await pilot.press("slash", *prefix, "enter")
            await wait_for(pilot, lambda: len(rows(app)) == 3, what="filtered")
            await pilot.press("asterisk")
            table = app.main_screen.query_one(InstanceTable)
            assert len(table.marked) == 3
            await pilot.press("s")
            await confirm(pilot, app)

            def cli_states():
                out = lab.lxd1.cli("list", prefix, "--format", "csv", "-c", "ns").stdout
                return dict(line.split(",") for line in out.split())

            await wait_for(pilot, lambda: set(cli_states().values()) == {"STOPPED"},
                           what=lambda: f"all stopped: {cli_states()}", timeout=60)
            # now delete all three where one is protected: that row fails, the others go
            for _ in range(50):  # the stop operation may still be finishing
                done = lab.lxd1.cli("config", "set", names[1],
                                    "security.protection.delete=true", check=False)
                if done.returncode == 0:
                    break
                await pilot.pause(0.2)
            await pilot.press("d")
            await confirm(pilot, app)
            await wait_for(pilot, lambda: set(cli_states()) == {names[1]},
                           what=lambda: f"two deleted: {cli_states()}", timeout=60)
            results = [r for r in app.inventory.statuses["local"].results
                       if r.description.startswith("delete ")]
            failed = [r for r in results if r.status == "Failure"]
            assert [r.instances for r in failed] == [(names[1],)]
            assert {r.instances[0] for r in results if r.status == "Success"} == \
                {names[0], names[2]}
            assert table.marked  # marks stay until cleared
            await pilot.press("ctrl+u")
            assert not table.marked
    finally:
        lab.lxd1.cli("config", "unset", names[1], "security.protection.delete", check=False)
        for n in names:
            lab.lxd1.cli("delete", "-f", n, check=False)


INSTANCE_EDITOR = textwrap.dedent("""\
    import sys, yaml
    path = sys.argv[1]
    data = yaml.safe_load(open(path))
    data["config"]["user.edited"] = "by-editor"
    open(path, "w").write(yaml.safe_dump(data))
    """)


async def test_instance_yaml_edit_and_profiles_in_order(lab, lab_env, unique, tmp_path,
                                                        monkeypatch):
    name, prof = unique(), short("ip-")
    lab.incus1.cli("profile", "create", prof)
    lab.incus1.cli("init", "busybox", name)
    script = tmp_path / "editor.py"
    script.write_text(INSTANCE_EDITOR)
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")
    monkeypatch.delenv("VISUAL", raising=False)
    try:
        async with lab_app(tmp_path, lab_env) as (app, pilot):
            await wait_for(pilot, lambda: f"inc1:{name}" in rows(app), what="instance")
            select(app, f"inc1:{name}")
            await pilot.press("E")
            await wait_for(pilot, lambda: yaml.safe_load(lab.incus1.cli(
                "config", "show", name).stdout)["config"].get("user.edited") == "by-editor",
                what="the instance edited", timeout=30)
            select(app, f"inc1:{name}")
            await pilot.press("P")
            await wait_for(pilot, lambda: app.screen.query("#dialog-input"), what="profiles")
            box = app.screen.query_one("#dialog-input")
            box.value = f"{prof}, default"
            await pilot.press("enter")
            await wait_for(pilot, lambda: yaml.safe_load(lab.incus1.cli(
                "config", "show", name).stdout)["profiles"] == [prof, "default"],
                what="profiles in the order typed", timeout=30)
    finally:
        lab.incus1.cli("delete", "-f", name, check=False)
        lab.incus1.cli("profile", "delete", prof, check=False)


async def test_project_switch_is_remembered_per_remote(lab, lab_env, unique, tmp_path,
                                                       monkeypatch):
    monkeypatch.setenv("CORRAL_STATE_DIR", str(tmp_path / "state"))
    proj, name, later = short("sw-"), unique(), short("sl-")
    # sharing the default project's images and profiles (the root disk)
    lab.lxd2.cli("project", "create", proj, "-c", "features.images=false",
                 "-c", "features.profiles=false")
    lab.lxd2.cli("init", "busybox", name, "--project", proj)
    try:
        async with lab_app(tmp_path, lab_env) as (app, pilot):
            assert f"lab2:{name}" not in rows(app)
            await select_in_view(pilot, app, "projects", "lab2", proj)
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.inventory.remotes["lab2"].project == proj
                           and app.inventory.statuses["lab2"].listed
                           and f"lab2:{name}" in rows(app), what="lab2 in the project",
                           timeout=30)
            await wait_for(pilot, lambda: any(r.name == proj and r.cell("shown") == "yes"
                                              for r in pane(app).table.items.values()
                                              if r.remote == "lab2"), what="shown: yes")
            assert app.inventory.remotes["local"].project == "default"
            # a project created elsewhere reaches the view from lab2's events, although
            # lab2 is shown in another project (one stream for every project)
            lab.lxd2.cli("project", "create", later)
            await wait_for(pilot, lambda: ("lab2", later) in mine(app), what="new project row")
        # a new run shows lab2 in that project again
        app = make_app(write_config(tmp_path), env=lab_env)
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: f"lab2:{name}" in rows(app), what="remembered",
                           timeout=30)
            assert app.inventory.remotes["lab2"].project == proj
    finally:
        lab.lxd2.cli("delete", "-f", name, "--project", proj, check=False)
        lab.lxd2.cli("project", "delete", proj, check=False)
        lab.lxd2.cli("project", "delete", later, check=False)


async def test_new_profile_as_a_copy_onto_another_remote(lab, lab_env, tmp_path):
    src, name = short("cs-"), short("cc-")
    lab.lxd1.cli("profile", "create", src)
    lab.lxd1.cli("profile", "set", src, "limits.memory=128MiB")
    try:
        async with lab_app(tmp_path, lab_env) as (app, pilot):
            await select_in_view(pilot, app, "profiles", "local", src)
            await pilot.press("N")

            def choose(option_id):
                box = app.screen.query_one("#choice-list")
                box.highlighted = next(i for i in range(box.option_count)
                                       if box.get_option_at_index(i).id == option_id)
                box.action_select()

            await wait_for(pilot, lambda: app.screen.query("#choice-list"), what="how")
            choose("copy")
            await wait_for(pilot, lambda: app.screen.query("#choice-list")
                           and app.screen.query_one("#choice-list").option_count == 3,
                           what="which remote")
            choose("inc1")
            await wait_for(pilot, lambda: app.screen.query("#dialog-input"), what="name")
            app.screen.query_one("#dialog-input").value = name
            await pilot.press("enter")
            await wait_for(pilot, lambda: ("inc1", name) in mine(app), what="the copy")
            shown = yaml.safe_load(lab.incus1.cli("profile", "show", name).stdout)
            assert shown["config"] == {"limits.memory": "128MiB"}
    finally:
        lab.lxd1.cli("profile", "delete", src, check=False)
        lab.incus1.cli("profile", "delete", name, check=False)
