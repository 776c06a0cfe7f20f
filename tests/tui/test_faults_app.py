"""What the real world does to a running corral, done for real (Pilot against the lab's
daemons): a daemon stopped with SIGSTOP, a daemon killed and started again, names and
messages full of markup and control characters. corral keeps working and loses nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest
from backends.models import ConnectionState
from tui.app import make_app
from tui.widgets.remote_list import RemoteList

from .test_real_app import remote_state, rows, select, status, wait_for, write_config


async def responsive(pilot, app) -> float:
    """Seconds a key press takes to be handled."""
    started = time.monotonic()
    await pilot.press("down")
    await pilot.pause()
    return time.monotonic() - started


WAITING_IN = ("socket.py", "/http/client.py", "/requests/",
              "/urllib3/", "/pylxd/", "/websockets/sync/", "subprocess.py", "threading.py")
"""Where a loop blocked by a call that waits (on a daemon, a process, a lock) would be."""


class LoopLag:
    """The longest the event loop was blocked (a 50 ms sleep overshooting), measured
    while the app runs: what a user feels as a frozen UI. A watcher thread looks at what
    the loop's thread is doing whenever it has not come back for ``LOOK_AFTER`` seconds:
    :attr:`waits` lists those seen waiting (``WAITING_IN``: a call to a daemon made on
    the loop), which is a bug on any machine; a loop that is merely slow because the
    machine is busy runs Python code there instead."""

    LOOK_AFTER = 0.3

    def __init__(self) -> None:
        import threading

        self.worst = 0.0
        self.waits: list[str] = []
        self._tick = time.monotonic()
        self._loop_thread = threading.get_ident()
        self._done = threading.Event()
        self._task = asyncio.ensure_future(self._run())
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()

    async def _run(self) -> None:
        while True:
            t = time.monotonic()
            await asyncio.sleep(0.05)
            self._tick = time.monotonic()
            self.worst = max(self.worst, self._tick - t - 0.05)

    def _watch(self) -> None:
        import sys
        import traceback

        while not self._done.wait(0.05):
            if time.monotonic() - self._tick < self.LOOK_AFTER:
                continue
            frame = sys._current_frames().get(self._loop_thread)
            if frame is None:
                continue
            stack = traceback.extract_stack(frame)
            top = stack[-1] if stack else None
            if top is not None and any(w in top.filename for w in WAITING_IN) or any(
                    w in f.filename for f in stack for w in WAITING_IN[1:6]):
                self.waits.append(f"{top.filename}:{top.lineno} {top.name} <- " + " <- ".join(
                    f"{f.name}" for f in reversed(stack[-8:-1])))

    def stop(self) -> float:
        self._task.cancel()
        self._done.set()
        return self.worst


async def test_sigstopped_daemon_shows_no_answer_and_comes_back(lab, lab_env, unique,
                                                                 tmp_path):
    name = unique()
    lab.lxd2.cli("launch", "busybox", name)
    app = make_app(write_config(tmp_path), env=lab_env)
    stopped = False
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: status(app, f"lab2:{name}") == "running",
                           what="the lab2 instance")
            os.kill(lab.lxd2.pid, signal.SIGSTOP)
            stopped, started = True, time.monotonic()
            lag = LoopLag()
            worst = 0.0
            seen = []
            while remote_state(app, "lab2") is not ConnectionState.NOT_RESPONDING:
                st = app.inventory.statuses["lab2"]
                if not seen or seen[-1][1:] != (st.state.value, st.message):
                    seen.append((round(time.monotonic() - started, 1), st.state.value,
                                 st.message))
                assert time.monotonic() - started < 40, f"lab2 after SIGSTOP: {seen}"
                took = await responsive(pilot, app)
                if took > 0.3:
                    seen.append((round(time.monotonic() - started, 1), "slow key", took))
                worst = max(worst, took)
                await pilot.pause(0.2)
            detect = time.monotonic() - started
            remotes = app.screen.query_one(RemoteList)
            await wait_for(pilot, lambda: "no answer" in str(remotes.get_row("lab2")[2]),
                           what="'no answer' in the remotes pane")
            assert remote_state(app, "local") is ConnectionState.CONNECTED  # others go on
            blocked = lag.stop()
            # never blocked waiting on the stopped daemon (on a busy machine the loop may
            # be late, running its own code: that is not what this looks for)
            assert lag.waits == [], f"the event loop waited {blocked:.2f} s: {lag.waits}"
            assert blocked < 5.0, f"the event loop was blocked {blocked:.2f} s: {seen}"
            os.kill(lab.lxd2.pid, signal.SIGCONT)
            stopped, resumed = False, time.monotonic()
            await wait_for(pilot, lambda: remote_state(app, "lab2") is ConnectionState.CONNECTED
                           and status(app, f"lab2:{name}") == "running", timeout=40,
                           what="lab2 back after SIGCONT")
            back = time.monotonic() - resumed
            print(f"SIGSTOP: 'no answer' after {detect:.1f} s (event loop blocked at most "
                  f"{blocked * 1000:.0f} ms, slowest key {worst * 1000:.0f} ms); "
                  f"SIGCONT: connected again after {back:.1f} s")
    finally:
        if stopped:
            os.kill(lab.lxd2.pid, signal.SIGCONT)
        lab.lxd2.cli("delete", "--force", name, check=False)


async def test_killed_and_restarted_daemon_reconnects_with_correct_rows(lab, lab_env, unique,
                                                                         tmp_path):
    up, down = unique("up"), unique("down")
    lab.lxd2.cli("launch", "busybox", up)
    lab.lxd2.cli("init", "busybox", down)
    app = make_app(write_config(tmp_path), env=lab_env)
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: status(app, f"lab2:{up}") == "running"
                           and status(app, f"lab2:{down}") == "stopped", what="rows")
            killed = time.monotonic()
            await asyncio.to_thread(lab.lxd2.kill)
            await wait_for(pilot, lambda: remote_state(app, "lab2") is not
                           ConnectionState.CONNECTED, timeout=20, what="lab2 gone")
            detect = time.monotonic() - killed
            await asyncio.to_thread(lab.lxd2.start)
            # while corral was away, the world changed
            await asyncio.to_thread(lab.lxd2.cli, "start", down)
            started = time.monotonic()
            await wait_for(pilot, lambda: remote_state(app, "lab2") is ConnectionState.CONNECTED
                           and status(app, f"lab2:{down}") == "running", timeout=60,
                           what="lab2 reconnected with fresh rows")
            back = time.monotonic() - started
            # and events flow again
            await asyncio.to_thread(lab.lxd2.cli, "stop", "--force", up)
            await wait_for(pilot, lambda: status(app, f"lab2:{up}") == "stopped",
                           what="an event after the reconnect")
            print(f"SIGKILL: lost after {detect:.1f} s; rows right {back:.1f} s after restart")
    finally:
        if not lab.lxd2.alive():
            lab.lxd2.start()
        lab.lxd2.cli("delete", "--force", up, check=False)
        lab.lxd2.cli("delete", "--force", down, check=False)


async def test_markup_and_control_characters_in_daemon_text(lab, lab_env, unique, tmp_path):
    name = unique()
    hostile = "[/] [@click=app.quit]x[/] [bold red]\x1b[2J\x07\x1b]0;owned\x07 \u202e tail"
    lab.lxd1.cli("init", "busybox", name)
    lab.lxd1.cli("config", "set", name, "user.note", hostile)
    lab.lxd1.cli("config", "set", name, "image.description", hostile)
    app = make_app(write_config(tmp_path), env=lab_env)
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: f"local:{name}" in rows(app), what="instance")
            select(app, f"local:{name}")
            await pilot.pause(0.5)  # the details pane renders the description and config
            row = " ".join(rows(app)[f"local:{name}"])
            assert "\x1b" not in row and "\x07" not in row
            assert app.is_running  # no MarkupError, no quit by a click link
            await pilot.press("down", "up")
            assert app.is_running
    finally:
        lab.lxd1.cli("delete", "--force", name, check=False)


FLOOD_SECONDS = 12
"""How long the guest floods the console (the RSS peaks within seconds: what is kept is
bounded by the scrollback and the skip of unseen output, not by time)."""


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def test_console_flood_keeps_memory_bounded_and_the_ui_responsive(
        lab, lab_env, unique, tmp_path):
    from .test_consoles_app import open_tab, type_line, wait_screen

    name = unique()
    lab.lxd1.cli("launch", "busybox", name)
    app = make_app(write_config(tmp_path), env=lab_env)
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: f"local:{name}" in rows(app), what="instance")
            view = await open_tab(pilot, app, f"local:{name}", "e")
            await wait_screen(pilot, app, " #")
            before = rss_mib()
            lag = LoopLag()
            await type_line(pilot, f"timeout {FLOOD_SECONDS} yes corral-flood-of-text-to-the-console; "
                                   "echo flood-$((40+2))-over")
            started, peak, flowing = time.monotonic(), before, 0
            while time.monotonic() - started < FLOOD_SECONDS + 1:
                await pilot.pause(0.5)
                peak = max(peak, rss_mib())
                flowing += any("corral-flood-of-text" in line
                               for line in view.emulator.screen_text())
            assert flowing > FLOOD_SECONDS, "the flood was not on the screen"
            await wait_screen(pilot, app, "flood-42-over", timeout=60)
            blocked = lag.stop()
            worst_key = await responsive(pilot, app)
            print(f"{FLOOD_SECONDS} s console flood: RSS {before:.0f} -> peak {peak:.0f} MiB, "
                  f"{view._output.skipped / 2**20:.1f} MiB skipped, event loop blocked at most "
                  f"{blocked * 1000:.0f} ms, a key after it {worst_key * 1000:.0f} ms")
            assert peak - before < 150, f"RSS grew {peak - before:.0f} MiB"
            assert blocked < 1.0
    finally:
        lab.lxd1.cli("delete", "--force", name, check=False)


@pytest.mark.qemu  # starts it itself (tests/tiers.py)
async def test_qemu_killed_under_an_open_console_pane(tmp_path, monkeypatch):
    """kill -9 of a VM's QEMU while its serial console is open in a pane: the pane says
    the console closed, the row turns stopped with the reason, corral goes on."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import qemu_guest

    from backends.qemu import QEMUBackend, qemu_remote

    from .test_consoles_app import open_tab, wait_screen

    kernel, initrd = qemu_guest.guest()
    run = f"/tmp/cq-kill-{os.getpid()}"
    monkeypatch.setenv("XDG_RUNTIME_DIR", run)
    qemu = QEMUBackend(qemu_remote(str(tmp_path / "vms")))
    await qemu.connect()
    await qemu.create("victim", kernel=str(kernel), initrd=str(initrd), memory_mib=128,
                      cmdline="console=ttyS0", accel="tcg")
    await qemu.start(qemu.vms.ref("victim"))
    pid = qemu.vms.pid("victim")
    await qemu.close()
    app = make_app(write_config(tmp_path), env={"HOME": str(tmp_path), "PATH": os.environ["PATH"],
                                                "XDG_RUNTIME_DIR": run})
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: status(app, "qemu:victim") == "running",
                           what="the running VM")
            await open_tab(pilot, app, "qemu:victim", "c")
            await wait_screen(pilot, app, "corral-guest ready", timeout=60)
            killed = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            # "stopped !": the mark of an instance stopped outside corral (reason on hover)
            await wait_for(pilot, lambda: status(app, "qemu:victim") == "stopped !",
                           what="the row stopped")
            detect = time.monotonic() - killed
            await wait_screen(pilot, app, "console closed")
            inst = app.inventory.instances[next(r for r in app.inventory.instances
                                                if str(r) == "qemu:victim")]
            assert "killed outside corral" in inst.extra["reason"]
            assert app.is_running
            print(f"kill -9 of QEMU under an open pane: row stopped after {detect:.2f} s")
    finally:
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, signal.SIGKILL)
        import shutil

        shutil.rmtree(run, ignore_errors=True)
