"""Warm start: the last run's rows are painted at once, marked stale, until each remote
answers (Pilot with fake backends; tests/tui/test_real_app.py-style proof on the lab below)."""

from __future__ import annotations

import asyncio


from backends.errors import NotResponding
from backends.fake import FakeBackend
from backends.models import ConnectionState, InstanceStatus, InstanceType, Remote
from tui.app import make_app
from tui.widgets.details import DetailsPane
from tui.widgets.instance_table import InstanceTable
from tui.widgets.remote_list import RemoteList

R, S = InstanceStatus.RUNNING, InstanceStatus.STOPPED
CT = InstanceType.CONTAINER


class GatedBackend(FakeBackend):
    """A fake remote that answers only once ``gate`` is set (or fails with ``fail``)."""

    gate: asyncio.Event | None = None
    fail = False

    async def connect(self):
        if self.fail:
            raise NotResponding(f"'{self.remote.name}' is not responding.")
        if self.gate is not None:
            await self.gate.wait()
        return await super().connect()


def make_factory(specs, gate=None, fail=False, made=None):
    def factory(remote: Remote, timeout: float):
        backend = GatedBackend(remote, instances=specs)
        backend.gate, backend.fail = gate, fail
        if made is not None:
            made.append(backend)
        return backend
    return factory


def rows(app):
    table = app.main_screen.query_one(InstanceTable)
    return {ref.name: [str(c) for c in table.get_row(key)] for key, ref in table.refs.items()}


async def first_run(cfg, env, specs):
    app = make_app(cfg, env=env, factory=make_factory(specs))
    async with app.run_test(size=(140, 40)) as pilot:
        for _ in range(10):
            await pilot.pause(0.02)
        assert set(rows(app)) == {name for name, _, _ in specs}
    return app


async def test_last_rows_painted_stale_then_replaced_when_the_remote_answers(setup):
    cfg, env = setup
    await first_run(cfg, env, [("web1", CT, R), ("web2", CT, S)])

    gate = asyncio.Event()
    made: list[GatedBackend] = []
    app = make_app(cfg, env=env, factory=make_factory(
        [("web1", CT, S), ("web3", CT, R)], gate=gate, made=made))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        shown = rows(app)
        assert set(shown) == {"web1", "web2"}  # the last run's, before any answer
        assert shown["web1"][3] == "running?" and shown["web2"][3] == "stopped?"
        remotes = app.main_screen.query_one(RemoteList)
        assert str(remotes.get_row("alpha")[2]) == "refreshing"
        assert str(remotes.get_row("alpha")[3]).strip() == "1/2"
        # a stale row offers no verbs: the instance may not even exist any more
        await pilot.press("s")
        await pilot.pause()
        assert not [c for b in made for c in b.calls]
        await pilot.press("enter")
        await pilot.pause()
        overview = str(app.main_screen.query_one("#details-overview").render())
        assert "last run" in overview

        gate.set()
        for _ in range(10):
            await pilot.pause(0.02)
        shown = rows(app)
        assert set(shown) == {"web1", "web3"}
        assert shown["web1"][3] == "stopped" and shown["web3"][3] == "running"
        assert str(remotes.get_row("alpha")[2]) == "connected"
        assert "last run" not in str(app.main_screen.query_one("#details-overview").render())


async def test_a_remote_that_fails_keeps_its_stale_rows_with_the_reason(setup):
    cfg, env = setup
    await first_run(cfg, env, [("web1", CT, R)])
    app = make_app(cfg, env=env, factory=make_factory([], fail=True))
    async with app.run_test(size=(140, 40)) as pilot:
        for _ in range(10):
            await pilot.pause(0.02)
        assert app.inventory.statuses["alpha"].state is ConnectionState.NOT_RESPONDING
        assert rows(app)["web1"][3] == "running?"
        await pilot.press("enter")
        await pilot.pause()
        details = app.main_screen.query_one(DetailsPane)
        text = str(details.query_one("#details-overview").render())
        assert "last run" in text and "not responding" in text


async def test_warm_start_can_be_turned_off(setup):
    cfg, env = setup
    await first_run(cfg, env, [("web1", CT, R)])
    cfg.write_text(cfg.read_text().replace("[ui]\n", "[ui]\nwarm_start = false\n"))
    app = make_app(cfg, env=env, factory=make_factory([], gate=asyncio.Event()))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        assert rows(app) == {}


async def test_warm_start_against_the_lab(lab, lab_env, unique, tmp_path):
    kept, gone = unique("k"), unique("g")
    lab.lxd1.cli("init", "busybox", kept)
    lab.lxd1.cli("init", "busybox", gone)
    cfg = tmp_path / "config.toml"
    cfg.write_text('[ui]\nmetrics_interval = 60\nnetwork_timeout = 5\n[lxc]\nenabled = false\n'
                   f'[qemu]\npath = "{tmp_path / "vms"}"\n')

    async def wait(pilot, predicate, what):
        for _ in range(300):
            if predicate():
                return
            await pilot.pause(0.05)
        raise AssertionError(f"timed out waiting for {what}")

    app = make_app(cfg, env=lab_env)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait(pilot, lambda: {kept, gone} <= set(rows(app)), "the first listing")
    lab.lxd1.cli("delete", gone)
    lab.lxd1.cli("start", kept)
    try:
        app = make_app(cfg, env=lab_env)
        # the last run's rows are there before anything was asked of the daemon
        seeded = {ref.name: i.status for ref, i in app.inventory.instances.items()
                  if ref.remote == "local"}
        assert seeded[gone] is S and seeded[kept] is S
        assert not app.inventory.statuses["local"].listed
        async with app.run_test(size=(160, 45)) as pilot:
            if not app.inventory.statuses["local"].listed:
                assert rows(app)[gone][3] == "stopped?"
            await wait(pilot, lambda: gone not in rows(app)
                       and rows(app).get(kept, [""] * 4)[3] == "running", "fresh rows")
            assert app.inventory.statuses["local"].listed
    finally:
        lab.lxd1.cli("delete", "--force", kept, check=False)


async def until_frozen(pilot, calls: list[str]) -> None:
    for _ in range(50):
        await pilot.pause(0.02)
        if calls:
            return


async def test_start_up_objects_are_frozen_once_every_remote_has_listed(setup, gc_calls):
    """The full collection before the freeze (hundreds of ms on a slow machine) waits
    for the first listings, however long they take, then runs once."""
    cfg, env = setup
    gate = asyncio.Event()
    app = make_app(cfg, env=env, factory=make_factory([("web1", CT, R)], gate=gate))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause(0.3)
        assert gc_calls == []  # still connecting: the listing must not wait for it
        gate.set()
        await until_frozen(pilot, gc_calls)
        assert app.inventory.statuses["alpha"].listed
        await pilot.pause(0.2)
        assert gc_calls == ["collect", "freeze", "enable"]


async def test_start_up_objects_are_frozen_when_a_remote_fails(setup, gc_calls):
    cfg, env = setup
    app = make_app(cfg, env=env, factory=make_factory([("web1", CT, R)], fail=True))
    async with app.run_test(size=(140, 40)) as pilot:
        await until_frozen(pilot, gc_calls)
        assert app.inventory.statuses["alpha"].state is ConnectionState.NOT_RESPONDING
        assert gc_calls == ["collect", "freeze", "enable"]


async def test_start_up_objects_are_frozen_at_the_latest_while_a_remote_hangs(
        setup, gc_calls, monkeypatch):
    import tui.app as app_module

    monkeypatch.setattr(app_module, "FREEZE_LATEST", 0.3)
    cfg, env = setup
    app = make_app(cfg, env=env, factory=make_factory([("web1", CT, R)],
                                                      gate=asyncio.Event()))
    async with app.run_test(size=(140, 40)) as pilot:
        await until_frozen(pilot, gc_calls)
        assert app.inventory.statuses["alpha"].state is ConnectionState.CONNECTING
        assert gc_calls == ["collect", "freeze", "enable"]


async def test_the_cache_file_is_written_when_rows_change_not_for_usage_samples(
        setup, monkeypatch):
    """Every usage sample (each 10 s) says rows changed; the file keeps no usage figures,
    so it is written again only when a kept field changes (and once more on the way out,
    for the listings' times)."""
    from dataclasses import replace

    import tui.app as app_module
    from tui.services.cache import cache_path

    monkeypatch.setattr(app_module, "CACHE_DELAY", 0.05)
    cfg, env = setup
    app = make_app(cfg, env=env, factory=make_factory([("web1", CT, R), ("web2", CT, S)]))
    path = cache_path(env, cfg)

    def written():
        st = path.stat()
        return st.st_ino, st.st_mtime_ns

    async def settle(pilot):
        for _ in range(10):
            await pilot.pause(0.02)

    async with app.run_test(size=(140, 40)) as pilot:
        for _ in range(100):
            if path.exists():
                break
            await pilot.pause(0.02)
        first = written()
        state = app.inventory.state
        refs = {i.ref for i in app.inventory.instances_of("alpha")}
        state.rows_changed("alpha", refs)  # what a usage sample says
        await settle(pilot)
        assert written() == first
        web1 = next(i for i in app.inventory.instances_of("alpha") if i.name == "web1")
        state.instances[web1.ref] = replace(web1, status=S)
        state.rows_changed("alpha", {web1.ref})
        await settle(pilot)
        second = written()
        assert second != first
        assert '"web1","type":"container","status":"stopped"' in path.read_text()
        state.rows_changed("alpha", refs)
        await settle(pilot)
        assert written() == second
    assert written() != second  # the way out writes the listings' times
