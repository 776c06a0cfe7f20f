"""The first listing in the app: rows the ``corral`` command listed before the UI existed
are in the first frame as current rows, while the backend is still connecting; verbs wait
for it. A listing of another project or one that failed changes nothing (Pilot with fake
backends; the lab proof is at the end)."""

from __future__ import annotations

import asyncio
import sys
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path


from backends.models import (
    ConnectionState,
    FirstListing,
    Instance,
    InstanceRef,
    InstanceStatus,
    InstanceType,
    ServerInfo,
)
from tui.app import CorralApp
from tui.config import load_config
from tui.services import startup
from tui.widgets.remote_list import RemoteList

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_warm_start import first_run, make_factory, rows, until_frozen

R, S = InstanceStatus.RUNNING, InstanceStatus.STOPPED
CT = InstanceType.CONTAINER


def listed(start, names_status, remote=None):
    remote = remote or start.remotes[0]
    future: Future = Future()
    future.set_result(FirstListing(remote, ServerInfo("lxd", "5.0.2"), tuple(
        Instance(ref=InstanceRef(remote.name, n), type=CT, status=st)
        for n, st in names_status)))
    return future


async def wait(pilot, predicate, what):
    for _ in range(200):
        if predicate():
            return
        await pilot.pause(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def test_the_start_up_freeze_waits_for_a_listed_remote_to_connect(setup, gc_calls):
    """The collection before the freeze stalls the loop for 80-400 ms: a remote whose rows
    came with the first listing but which is still connecting must not wait behind it (it
    did: it was shown "connecting" that much longer). It runs once the remote is connected
    and its listing after connecting is in, and the inventory has been quiet."""
    cfg, env = setup
    config = load_config(cfg)
    start = startup.resolve(config, env)
    start.first_listings = {"alpha": listed(start, [("web1", R)])}
    gate = asyncio.Event()
    app = CorralApp(config, env=env, start=start, factory=make_factory(
        [("web1", CT, R)], gate=gate))
    async with app.run_test(size=(140, 40)) as pilot:
        await wait(pilot, lambda: app.inventory.statuses["alpha"].listed, "the first listing")
        for _ in range(20):  # well past the quiet delay
            await pilot.pause(0.02)
        assert gc_calls == []
        assert app.inventory.statuses["alpha"].state is ConnectionState.CONNECTING
        gate.set()
        await until_frozen(pilot, gc_calls)
        assert app.inventory.statuses["alpha"].state is ConnectionState.CONNECTED
        assert gc_calls == ["collect", "freeze", "enable"]


async def test_first_listing_is_the_first_frame_and_verbs_wait_for_the_backend(setup):
    cfg, env = setup
    await first_run(cfg, env, [("old", CT, R)])  # a cache the first listing replaces
    config = load_config(cfg)
    start = startup.resolve(config, env)
    start.first_listings = {"alpha": listed(start, [("web1", R), ("web2", S)])}
    gate = asyncio.Event()
    made = []
    app = CorralApp(config, env=env, start=start, factory=make_factory(
        [("web1", CT, S), ("web3", CT, R)], gate=gate, made=made))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        shown = rows(app)
        assert set(shown) == {"web1", "web2"}  # the first listing's, not the cache's
        assert shown["web1"][3] == "running" and shown["web2"][3] == "stopped"  # current
        remotes = app.main_screen.query_one(RemoteList)
        assert str(remotes.get_row("alpha")[2]) == "connecting"
        assert str(remotes.get_row("alpha")[3]).strip() == "1/2"
        assert app.inventory.statuses["alpha"].state is ConnectionState.CONNECTING
        await pilot.press("s")  # no backend yet: nothing is sent anywhere
        await pilot.pause()
        assert not [c for b in made for c in b.calls]

        gate.set()  # the backend connects and lists again (its events follow from here)
        await wait(pilot, lambda: set(rows(app)) == {"web1", "web3"}, "the backend's rows")
        assert rows(app)["web1"][3] == "stopped"
        assert str(remotes.get_row("alpha")[2]) == "connected"


async def test_a_first_listing_still_under_way_arrives_before_the_backend(setup):
    cfg, env = setup
    config = load_config(cfg)
    start = startup.resolve(config, env)
    pending: Future = Future()
    start.first_listings = {"alpha": pending}
    gate = asyncio.Event()
    app = CorralApp(config, env=env, start=start,
                    factory=make_factory([("web1", CT, R)], gate=gate))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        assert rows(app) == {}
        pending.set_result(listed(start, [("web1", S)]).result())
        await wait(pilot, lambda: "web1" in rows(app), "the first listing")
        assert rows(app)["web1"][3] == "stopped"
        gate.set()
        await wait(pilot, lambda: rows(app)["web1"][3] == "running", "the backend's listing")


async def test_a_first_listing_of_another_project_or_that_failed_is_not_shown(setup):
    cfg, env = setup
    config = load_config(cfg)
    start = startup.resolve(config, env)
    failed: Future = Future()
    failed.set_exception(OSError("connection refused"))
    for future in (listed(start, [("elsewhere", R)],
                          remote=replace(start.remotes[0], project="other")), failed):
        start.first_listings = {"alpha": future}
        gate = asyncio.Event()
        app = CorralApp(config, env=env, start=start,
                        factory=make_factory([("web1", CT, R)], gate=gate))
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.pause()
            assert "elsewhere" not in rows(app)  # (web1 is the cache of the first app)
            assert not app.inventory.statuses["alpha"].listed
            gate.set()
            await wait(pilot, lambda: set(rows(app)) == {"web1"}, "the backend's listing")


async def test_the_corral_command_lists_the_lab_before_the_ui(lab, lab_env, unique, tmp_path):
    made = unique()
    lab.lxd2.cli("init", "busybox", made)
    cfg = tmp_path / "config.toml"
    cfg.write_text('[ui]\nmetrics_interval = 60\nnetwork_timeout = 5\n[lxc]\nenabled = false\n'
                   f'[qemu]\npath = "{tmp_path / "vms"}"\n')
    try:
        start = startup.prepare(cfg, lab_env)
        assert {"local", "lab2", "inc1"} <= set(start.first_listings)
        for name in ("local", "lab2", "inc1"):
            start.first_listings[name].result(timeout=30)
        app = CorralApp(start.config, env=lab_env, start=start)
        # in before the app runs: the first frame holds them, current, not the cache's
        assert app.inventory.statuses["lab2"].listed
        assert app.inventory.instances[InstanceRef("lab2", made)].status is S
        async with app.run_test(size=(160, 45)) as pilot:
            await pilot.pause()
            assert rows(app)[made][3] == "stopped"
            await wait(pilot, lambda: app.inventory.statuses["lab2"].state
                       is ConnectionState.CONNECTED, "the backend")
            assert rows(app)[made][3] == "stopped"
    finally:
        lab.lxd2.cli("delete", "--force", made, check=False)


async def test_a_listed_remotes_backend_waits_for_the_first_frame(setup):
    from tui.services.inventory import Inventory

    cfg, env = setup
    start = startup.resolve(load_config(cfg), env)
    made = []
    inv = Inventory(start.remotes, on_change=lambda remote, refs: None,
                    factory=make_factory([("web1", CT, R)], made=made),
                    first_listings={"alpha": listed(start, [("web1", S)])})
    inv.first_frame = asyncio.Event()
    task = asyncio.ensure_future(inv.run_remote("alpha"))
    try:
        for _ in range(20):
            await asyncio.sleep(0.01)
        assert inv.statuses["alpha"].listed and made == []  # rows shown, no backend yet
        inv.first_frame.set()
        for _ in range(100):
            if inv.statuses["alpha"].state is ConnectionState.CONNECTED:
                break
            await asyncio.sleep(0.02)
        assert len(made) == 1
        assert inv.instances[InstanceRef("alpha", "web1")].status is R
    finally:
        task.cancel()
        await inv.close()


async def test_a_slow_first_listing_does_not_hold_the_backend_and_is_shown_late(
        setup, monkeypatch):
    from tui.services import listings

    monkeypatch.setattr(listings, "FIRST_WAIT", 0.05)
    cfg, env = setup
    config = load_config(cfg)
    start = startup.resolve(config, env)
    slow: Future = Future()
    start.first_listings = {"alpha": slow}
    gate = asyncio.Event()
    made = []
    app = CorralApp(config, env=env, start=start,
                    factory=make_factory([("web1", CT, R)], gate=gate, made=made))
    async with app.run_test(size=(140, 40)) as pilot:
        await wait(pilot, lambda: made, "the backend, made while the listing is slow")
        slow.set_result(listed(start, [("web1", S)]).result())  # before the backend lists
        await wait(pilot, lambda: "web1" in rows(app), "the late first listing")
        assert rows(app)["web1"][3] == "stopped"
        gate.set()
        await wait(pilot, lambda: rows(app)["web1"][3] == "running", "the backend's listing")
