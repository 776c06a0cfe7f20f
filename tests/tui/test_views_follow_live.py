"""The operations and remotes views follow the daemons from the moment they are open, in
a fresh corral, on LXD (lab2, over HTTPS) and Incus (inc1): an exec made as the remote
connects appears in :operations and then ends; :remotes shows the remotes connect, and a
daemon go away and come back.

Each daemon is reached through a relay the test turns on and off (tests/lab_relay.py): the
view is open before the remote can connect, and a daemon "goes away" without stopping the
lab's daemons, which the other tests share."""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid

import pytest
from lab_relay import Relay, through  # tests/ (tests/conftest.py puts it on the path)

from tui.app import make_app

from .test_real_app import wait_for, write_config
from .test_views_app import pane
from .test_views_follow import REMOTES, WAIT, daemon, open_at_start, ops


@pytest.fixture(scope="module")
def running(lab):
    """A running busybox container on each of the remotes, for their operations."""
    names = {remote: f"fo{uuid.uuid4().hex[:6]}" for remote in REMOTES}
    try:
        for remote, name in names.items():
            daemon(lab, remote).cli("launch", "busybox", name)
        yield names
    finally:
        for remote, name in names.items():
            daemon(lab, remote).cli("delete", "--force", name, check=False)


def running_op(app, remote, inst):
    return any(r.remote == remote and inst in r.cell("instances")
               and r.cell("status").lower() == "running"
               for r in pane(app).table.items.values())


@pytest.mark.parametrize("remote", REMOTES)
async def test_operations_view_opened_at_start_shows_an_exec_come_and_go(remote, lab, lab_env,
                                                                        tmp_path, running):
    """:operations open before the remote can connect; the relay goes up and an exec starts
    at once, lasting until the test closes its input (no time involved): the view shows it
    running, and then no longer running."""
    d, inst = daemon(lab, remote), running[remote]
    proc = None
    with Relay(d) as relay:
        app = make_app(write_config(tmp_path), env=through(lab, lab_env, tmp_path, remote,
                                                           d, relay))
        try:
            async with app.run_test(size=(160, 45)) as pilot:
                was = await open_at_start(pilot, app, "ops", remote)
                await asyncio.to_thread(relay.up)
                started = time.monotonic()
                proc = subprocess.Popen(  # the lab's CLI, on the daemon's unix socket
                    [d.client, "exec", inst, "--", "sh", "-c", "cat > /dev/null"],
                    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE, env=d._env())
                await wait_for(pilot, lambda: running_op(app, remote, inst), timeout=WAIT,
                               what=lambda: f"the exec of {remote}:{inst} running: {ops(app)}")
                seen = time.monotonic() - started
                proc.stdin.close()  # the exec's input ends: cat, and the operation, end
                code = await asyncio.to_thread(proc.wait, 60)
                assert code == 0, proc.stderr.read().decode(errors="replace")
                ended = time.monotonic()
                await wait_for(pilot, lambda: not running_op(app, remote, inst),
                               timeout=WAIT, what=lambda: f"the exec of {remote}:{inst} "
                               f"done: {ops(app)}")
                print(f"{remote} {was} as :operations opened: the exec shown running "
                      f"{seen:.2f}s after it began, done {time.monotonic() - ended:.2f}s "
                      "after it ended")
        finally:
            if proc is not None:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                proc.stdin.close()
                proc.stderr.close()


def state(app, name):
    """What the :remotes view says of remote ``name`` (its state column)."""
    for r in pane(app).table.items.values():
        if r.name == name:
            return r.cell("state")
    return None


@pytest.mark.parametrize("remote", REMOTES)
async def test_remotes_view_opened_at_start_follows_a_daemon_going_away_and_back(
        remote, lab, lab_env, tmp_path):
    """:remotes opened right after start shows the remotes connect; ``away`` (the daemon of
    ``remote`` behind the relay) offline while nothing listens there, connected once the
    relay is up, offline when it goes down, and connected again when it comes back."""
    d = daemon(lab, remote)
    log = []
    with Relay(d) as relay:
        app = make_app(write_config(tmp_path), env=through(lab, lab_env, tmp_path, remote,
                                                           d, relay, "away"))
        async with app.run_test(size=(160, 45)) as pilot:
            was = await open_at_start(pilot, app, "remotes", "away")

            async def shows(name, word, timeout=WAIT):
                t0 = time.monotonic()
                await wait_for(pilot, lambda: state(app, name) == word, timeout=timeout,
                               what=lambda: f"{name} {word} in :remotes, not {state(app, name)}")
                log.append(f"{name} {word} {time.monotonic() - t0:.2f}s")

            await shows(remote, "connected")
            await shows("local", "connected")
            await shows("away", "offline")  # nothing listens on its port yet
            await asyncio.to_thread(relay.up)
            await shows("away", "connected", 40)  # the next attempt (backoff: 15 s at most)
            await asyncio.to_thread(relay.down)
            await shows("away", "offline")
            assert state(app, remote) == "connected"  # the same daemon, reached directly
            await asyncio.to_thread(relay.up)
            await shows("away", "connected", 40)
            print(f"away {was} as :remotes opened; " + ", ".join(log))
