"""The resource views follow outside changes on the real daemons from the moment they
are open: for LXD (lab2, over HTTPS) and Incus (inc1), each view sees an object made,
changed, renamed and deleted with the CLI — in a fresh corral per view and daemon, the view
opened the moment ``:`` offers it and before the remote can connect (it is reached through
a relay that is down until then: tests/lab_relay.py), the first change made as it
connects; and later, every view in one corral connected a while ago. The CLI is the judge.
The operations and remotes views are in test_views_follow_live.py."""

from __future__ import annotations

import asyncio
import io
import sys
import tarfile
import time
import uuid
from pathlib import Path

import pytest
import yaml
from lab_relay import Relay, through  # tests/ (tests/conftest.py puts it on the path)

from backends.models import ConnectionState
from tui.app import make_app
from tui.views.specs import resolve

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_real_app import wait_for, write_config
from test_views_app import EDITOR, connected, pane, select_in_view, switch

WAIT = 15.0
REMOTES = {"lab2": "lxd2", "inc1": "incus1"}
"""The remotes the views are tried on, and the lab's daemon behind each."""


def daemon(lab, remote):
    return getattr(lab, REMOTES[remote])


def short(prefix):
    return f"{prefix}{uuid.uuid4().hex[:5]}"


def row(app, remote, name):
    for r in pane(app).table.items.values():
        if r.remote == remote and r.name == name:
            return r
    return None


def config_of(app, remote, name):
    r = row(app, remote, name)
    return dict(getattr(r.obj, "config", {}) or {}) if r is not None else {}


def ops(app):
    return [(r.remote, r.cell("instances"), r.cell("status"))
            for r in pane(app).table.items.values()]


def tiny_image(tmp_path: Path, tag: str) -> Path:
    """A unified image of one file, unique to ``tag`` (its own fingerprint)."""
    path = tmp_path / f"{tag}.tar.gz"
    meta = f"architecture: x86_64\ncreation_date: {int(time.time())}\nproperties:\n" \
           f"  description: {tag}\n".encode()
    with tarfile.open(path, "w:gz") as tar:
        for name, data in (("metadata.yaml", meta), ("rootfs/tag", tag.encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def leftovers(view, d, names, fingerprint):
    """Delete what a failed round of ``view`` may have left (nothing when it is gone)."""
    if view == "images":
        for ref in (fingerprint.get("fp"), *names):
            if ref:
                d.cli("image", "delete", ref, check=False)
        return
    kind = {"profiles": ("profile",), "net": ("network",), "storage": ("storage",),
            "vol": ("storage", "volume", "delete", "default"), "proj": ("project",)}[view]
    for name in names:
        d.cli(*kind, *(() if view == "vol" else ("delete",)), name, check=False)


def steps(view, d, remote, tmp_path, made=None):
    """(what, CLI arguments or a callable, predicate on the app) for one view; ``made``
    gets a function that deletes whatever the steps may have left."""
    a, b = short("fa"), short("fb")
    fp: dict[str, str] = {}
    if made is not None:
        made.append(lambda: leftovers(view, d, (a, b, "z" + a), fp))
    has = lambda n: lambda app: row(app, remote, n) is not None  # noqa: E731
    gone = lambda n: lambda app: row(app, remote, n) is None  # noqa: E731
    keyed = lambda n: lambda app: config_of(app, remote, n).get("user.k") == "1"  # noqa: E731
    if view == "profiles":
        return [("create", ("profile", "create", a), has(a)),
                ("change", ("profile", "set", a, "user.k=1"), keyed(a)),
                ("rename", ("profile", "rename", a, b), lambda app: has(b)(app)
                 and gone(a)(app)),
                ("delete", ("profile", "delete", b), gone(b))]
    if view == "net":
        return [("create", ("network", "create", a, "ipv4.address=none",
                            "ipv6.address=none"), has(a)),
                ("change", ("network", "set", a, "user.k=1"), keyed(a)),
                ("rename", ("network", "rename", a, b), lambda app: has(b)(app)
                 and gone(a)(app)),
                ("delete", ("network", "delete", b), gone(b))]
    if view == "storage":  # a pool cannot be renamed (neither daemon has the API)
        return [("create", ("storage", "create", a, "dir"), has(a)),
                ("change", ("storage", "set", a, "user.k=1"), keyed(a)),
                ("delete", ("storage", "delete", a), gone(a))]
    if view == "vol":
        return [("create", ("storage", "volume", "create", "default", a), has(a)),
                ("change", ("storage", "volume", "set", "default", a, "user.k=1"), keyed(a)),
                ("rename", ("storage", "volume", "rename", "default", a, b),
                 lambda app: has(b)(app) and gone(a)(app)),
                ("delete", ("storage", "volume", "delete", "default", b), gone(b))]
    if view == "proj":
        return [("create", ("project", "create", a), has(a)),
                ("change", ("project", "set", a, "user.k=1"), keyed(a)),
                ("rename", ("project", "rename", a, b), lambda app: has(b)(app)
                 and gone(a)(app)),
                ("delete", ("project", "delete", b), gone(b))]
    if view == "images":  # an image is named by its first alias
        image = tiny_image(tmp_path, a)

        def create():
            d.cli("image", "import", str(image), "--alias", a)
            fp["fp"] = d.cli("image", "info", a).stdout.split("Fingerprint:")[1].split()[0]

        def aliases(app):
            for r in pane(app).table.items.values():
                if r.remote == remote and r.key.endswith(fp.get("fp", "?")):
                    return set(r.cell("aliases").split(", "))
            return None

        return [("create", create, has(a)),
                ("change", lambda: d.cli("image", "alias", "create", b, fp["fp"]),
                 lambda app: aliases(app) == {a, b}),
                ("rename", ("image", "alias", "rename", a, "z" + a),
                 lambda app: aliases(app) == {b, "z" + a}),
                ("delete", lambda: d.cli("image", "delete", fp["fp"]),
                 lambda app: aliases(app) is None)]
    raise AssertionError(view)


VIEWS = ("profiles", "net", "storage", "vol", "proj", "images")


async def follow(pilot, app, view, d, remote, tmp_path, when, log):
    """Each step of ``view`` on ``remote`` made with the CLI, and waited for in the view."""
    made: list = []
    try:
        for what, change, seen in steps(view, d, remote, tmp_path, made):
            t0 = time.monotonic()
            if callable(change):
                await asyncio.to_thread(change)
            else:
                await asyncio.to_thread(d.cli, *change)
            t1 = time.monotonic()
            await wait_for(pilot, lambda seen=seen: seen(app), timeout=WAIT,
                           what=f"{when}: {view} on {remote} shows the {what}")
            log.append(f"{when} {view} {remote} {what}: shown {time.monotonic() - t1:.2f}s "
                       f"after the CLI returned (the CLI took {t1 - t0:.2f}s)")
    except BaseException:
        for undo in made:
            await asyncio.to_thread(undo)
        raise


async def open_at_start(pilot, app, view, remote):
    """Open ``view`` in a corral just started, the moment ``:`` offers it (once a first
    remote has said what it can fill: the local LXD over its unix socket); what ``remote``
    was then, in words."""
    spec = resolve(view)
    screen = app.main_screen
    await wait_for(pilot, lambda: spec in screen.views.offered(), what=f":{view} offered")
    status = app.inventory.statuses[remote]
    was = status.state.value + (" and listed" if status.listed else "")
    await switch(pilot, view)
    assert screen.views.name == spec.name and pane(app).spec is spec, screen.views.name
    return was


@pytest.mark.parametrize("remote", REMOTES)
@pytest.mark.parametrize("view", VIEWS)
async def test_a_view_opened_at_start_follows_the_cli_at_once(view, remote, lab, lab_env,
                                                             tmp_path):
    """A fresh corral per view and daemon: the view is open while ``remote`` cannot connect
    yet (its relay is down); the relay goes up and the CLI creates, changes, renames and
    deletes at once, each shown before the next is made."""
    d = daemon(lab, remote)
    log: list[str] = []
    with Relay(d) as relay:
        app = make_app(write_config(tmp_path), env=through(lab, lab_env, tmp_path, remote,
                                                           d, relay))
        async with app.run_test(size=(160, 45)) as pilot:
            was = await open_at_start(pilot, app, view, remote)
            assert app.inventory.statuses[remote].state is not ConnectionState.CONNECTED
            await asyncio.to_thread(relay.up)
            await follow(pilot, app, view, d, remote, tmp_path,
                         f"right after start ({remote} {was} as :{view} opened)", log)
    print("\n".join(log))


async def test_views_follow_outside_changes_later(lab, lab_env, tmp_path):
    """Every view in turn, in one corral connected a while ago."""
    app = make_app(write_config(tmp_path), env=lab_env)
    log: list[str] = []
    async with app.run_test(size=(160, 45)) as pilot:
        await connected(pilot, app)
        await pilot.pause(2)
        for view in VIEWS:
            await switch(pilot, view)
            for remote in REMOTES:
                await follow(pilot, app, view, daemon(lab, remote), remote, tmp_path,
                             "later", log)
    print("\n".join(log))


async def test_views_follow_changes_that_send_no_event_of_their_own(lab, lab_env, tmp_path):
    """No daemon sends a profile event when an instance starts using the profile, nor an
    operation lifecycle event: the instance's and the operation's events read the view."""
    made = []
    app = make_app(write_config(tmp_path), env=lab_env)
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            for remote, d in (("lab2", lab.lxd2), ("inc1", lab.incus1)):
                prof, inst = short("fu"), short("fc")
                d.cli("profile", "create", prof)
                made.append((d, prof, inst))
                await switch(pilot, "profiles")
                await wait_for(pilot, lambda: row(app, remote, prof) is not None,
                               timeout=WAIT, what=f"{remote}:{prof}")
                await asyncio.to_thread(d.cli, "launch", "busybox", inst, "-p", "default",
                                        "-p", prof)

                def used(remote=remote, prof=prof):
                    r = row(app, remote, prof)
                    return r is not None and any(inst in u for u in r.obj.used_by)

                await wait_for(pilot, used, timeout=WAIT,
                               what=f"{remote}:{prof} used by {inst}")
                await switch(pilot, "ops")
                job = asyncio.ensure_future(asyncio.to_thread(
                    d.cli, "exec", inst, "--", "sleep", "3"))

                def running_op(remote=remote, inst=inst):
                    return any(r.remote == remote and inst in r.cell("instances")
                               and r.cell("status").lower() == "running"
                               for r in pane(app).table.items.values())

                await wait_for(pilot, running_op, timeout=WAIT,
                               what=f"the exec operation of {remote}:{inst}")
                await job
                await wait_for(pilot, lambda running_op=running_op: not running_op(),
                               timeout=WAIT, what=lambda remote=remote, inst=inst:
                               f"the exec of {remote}:{inst} done: {ops(app)}")
    finally:
        for d, prof, inst in made:
            d.cli("delete", "--force", inst, check=False)
            d.cli("profile", "delete", prof, check=False)


async def test_yaml_edit_of_a_profile_made_outside_a_moment_before(lab, lab_env, tmp_path,
                                                                  monkeypatch):
    """Made with the CLI while corral runs, edited at once through ``E`` (a scripted
    ``$EDITOR``), read back with the CLI, on LXD and Incus."""
    script = tmp_path / "editor.py"
    script.write_text(EDITOR)
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.delenv("CORRAL_TEST_SIDE", raising=False)
    made = []
    app = make_app(write_config(tmp_path), env=lab_env)
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await connected(pilot, app)
            for remote, d in (("lab2", lab.lxd2), ("inc1", lab.incus1)):
                monkeypatch.setenv("CORRAL_TEST_LOG", str(tmp_path / f"{remote}.log"))
                prof = short("fe")
                await asyncio.to_thread(d.cli, "profile", "create", prof)
                made.append((d, prof))
                await select_in_view(pilot, app, "profiles", remote, prof)
                await pilot.press("E")

                def saved(d=d, prof=prof):
                    shown = yaml.safe_load(d.cli("profile", "show", prof).stdout)
                    return shown["config"] == {"user.corral": "mine"}

                await wait_for(pilot, saved, what=f"{remote}:{prof} saved", timeout=30)
                await wait_for(pilot, lambda remote=remote, prof=prof: config_of(
                    app, remote, prof) == {"user.corral": "mine"}, timeout=WAIT,
                    what=f"{remote}:{prof} edited in the view")
    finally:
        for d, prof in made:
            d.cli("profile", "delete", prof, check=False)
