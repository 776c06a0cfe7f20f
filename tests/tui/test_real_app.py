"""Pilot tests of the app against the real lab daemons (LXD over unix, LXD over HTTPS,
Incus over HTTPS), built through the same factory the ``corral`` command uses."""

from __future__ import annotations

import asyncio
import socket
import time

from backends.models import ConnectionState, InstanceRef
from tui.app import make_app
from tui.widgets.instance_table import InstanceTable
from tui.widgets.remote_list import RemoteList


async def wait_for(pilot, predicate, timeout=20.0, what="condition"):
    """Until ``predicate()``: an AssertionError naming ``what`` (text, or a function
    giving it) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what() if callable(what) else what}")


def rows(app):
    table = app.main_screen.query_one(InstanceTable)
    return {str(ref): [str(c) for c in table.get_row(key)] for key, ref in table.refs.items()}


def status(app, name):
    return rows(app).get(name, [None] * 4)[3]


def remote_state(app, name):
    return app.inventory.statuses[name].state


def select(app, ref_text):
    table = app.main_screen.query_one(InstanceTable)
    for key, ref in table.refs.items():
        if str(ref) == ref_text:
            table.move_cursor(row=table.get_row_index(key))
            table.focus()
            return
    raise AssertionError(f"{ref_text} not in table")


def write_config(tmp_path, extra="", stop_timeout=20):
    cfg = tmp_path / "config.toml"
    lxc = tmp_path / "lxcpath"
    lxc.mkdir(exist_ok=True)
    cfg.write_text("[ui]\nmetrics_interval = 60\nnetwork_timeout = 2\n"
                   f"stop_timeout = {stop_timeout}\n"
                   f'[lxc]\npaths = ["{lxc}"]\n[qemu]\npath = "{tmp_path / "vms"}"\n'
                   'accel = "tcg"\n' + extra)
    return cfg


async def test_table_shows_all_three_remotes_and_s_really_stops(lab, lab_env, unique, tmp_path):
    a, b, c = unique("a"), unique("b"), unique("c")
    lab.lxd1.cli("launch", "busybox", a)
    lab.lxd2.cli("launch", "busybox", b)
    lab.incus1.cli("launch", "busybox", c)
    app = make_app(write_config(tmp_path), env=lab_env)
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            want = {f"local:{a}", f"lab2:{b}", f"inc1:{c}"}
            await wait_for(pilot, lambda: want <= set(rows(app)), what="all three instances")
            assert all(status(app, r) == "running" for r in want)
            remotes = app.screen.query_one(RemoteList)
            await wait_for(pilot, lambda: str(remotes.get_row("lab2")[2]).strip()
                           == "connected", what="lab2 connected in the remotes pane")
            assert str(remotes.get_row("inc1")[1]).strip() == "incus"
            # the Incus CLI's built-in local remote has no daemon here: shown, in words
            await wait_for(pilot, lambda: remote_state(app, "incus-local")
                           is ConnectionState.DISCONNECTED, what="incus-local unreachable")
            assert "No Incus socket" in app.screen.inventory.statuses["incus-local"].message

            select(app, f"lab2:{b}")
            await pilot.press("s")
            await wait_for(pilot, lambda: status(app, f"lab2:{b}") == "stopped",
                           timeout=30, what="lab2 instance stopped")
            out = lab.lxd2.cli("list", b, "--format", "csv", "-c", "s").stdout.strip()
            assert out == "STOPPED"
    finally:
        lab.lxd1.cli("delete", "--force", a)
        lab.lxd2.cli("delete", "--force", b)
        lab.incus1.cli("delete", "--force", c)


async def test_instance_launched_outside_appears_without_a_keypress(lab, lab_env, unique,
                                                                     tmp_path):
    app = make_app(write_config(tmp_path), env=lab_env)
    name = unique()
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: all(
                remote_state(app, n) is ConnectionState.CONNECTED
                for n in ("local", "lab2", "inc1")) and app.screen.inventory.statuses[
                    "inc1"].listed, what="remotes connected")
            await asyncio.to_thread(lab.incus1.cli, "launch", "busybox", name)
            await wait_for(pilot, lambda: status(app, f"inc1:{name}") == "running",
                           what="externally launched instance")
            await asyncio.to_thread(lab.incus1.cli, "stop", "--force", name)
            await wait_for(pilot, lambda: status(app, f"inc1:{name}") == "stopped",
                           what="externally stopped instance")
            await asyncio.to_thread(lab.incus1.cli, "delete", name)
            await wait_for(pilot, lambda: f"inc1:{name}" not in rows(app),
                           what="externally deleted instance")
    finally:
        lab.incus1.cli("delete", "--force", name, check=False)


async def test_delete_from_keyboard_removes_it_on_the_daemon(lab, lab_env, unique, tmp_path):
    name = unique()
    lab.lxd1.cli("init", "busybox", name)
    app = make_app(write_config(tmp_path), env=lab_env)
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: f"local:{name}" in rows(app), what="instance")
            select(app, f"local:{name}")
            await pilot.press("d")
            await wait_for(pilot, lambda: hasattr(app.screen, "title_text")
                           and app.screen.query("#confirm"), what="dialog")
            assert name in app.screen.title_text
            await pilot.pause(0.3)
            await pilot.click("#confirm")
            await wait_for(pilot, lambda: f"local:{name}" not in rows(app), what="row gone")
            out = lab.lxd1.cli("list", "--format", "csv", "-c", "n").stdout.split()
            assert name not in out
    finally:
        lab.lxd1.cli("delete", "--force", name, check=False)


async def test_malformed_cli_config_is_named_and_other_remotes_load(lab, lab_env, tmp_path):
    (tmp_path / "lxc").mkdir()
    bad = tmp_path / "lxc" / "config.yml"
    bad.write_text("remotes:\n  oops: [\n")
    env = dict(lab_env, LXD_CONF=str(tmp_path / "lxc"))
    app = make_app(write_config(tmp_path), env=env)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, lambda: remote_state(app, "inc1") is ConnectionState.CONNECTED,
                       what="incus remote still connects")
        problems = str(app.screen.query_one("#problems").render())
        assert str(bad) in problems and "not valid YAML" in problems


async def test_hung_remote_shows_not_responding_while_the_rest_works(lab, lab_env, unique,
                                                                      tmp_path):
    silent = socket.create_server(("127.0.0.1", 0))
    port = silent.getsockname()[1]
    held = []

    async def accept_forever():
        loop = asyncio.get_running_loop()
        silent.setblocking(False)
        while True:
            conn, _ = await loop.sock_accept(silent)
            held.append(conn)

    cert = str(lab.lxd_conf / "client.crt")
    key = str(lab.lxd_conf / "client.key")
    cfg = write_config(tmp_path, f'[[remote]]\nname = "hung"\nkind = "lxd"\n'
                       f'address = "https://127.0.0.1:{port}"\nclient_cert = "{cert}"\n'
                       f'client_key = "{key}"\n')
    name = unique()
    lab.lxd1.cli("launch", "busybox", name)
    app = make_app(cfg, env=lab_env)
    acceptor = asyncio.ensure_future(accept_forever())
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: f"local:{name}" in rows(app), what="local listing")
            started = time.monotonic()
            await wait_for(pilot, lambda: remote_state(app, "hung")
                           is ConnectionState.NOT_RESPONDING, timeout=10, what="not responding")
            assert time.monotonic() - started < 10
            remotes = app.screen.query_one(RemoteList)
            await wait_for(pilot, lambda: str(remotes.get_row("hung")[2]).strip()
                           == "no answer", what="the remotes pane says so")
            # the rest keeps working while 'hung' hangs
            select(app, f"local:{name}")
            await pilot.press("s")
            await wait_for(pilot, lambda: status(app, f"local:{name}") == "stopped",
                           timeout=30, what="stop while another remote hangs")
    finally:
        acceptor.cancel()
        for c in held:
            c.close()
        silent.close()
        lab.lxd1.cli("delete", "--force", name)


async def test_killed_daemon_shows_disconnected_then_reconnects(lab, lab_env, unique, tmp_path):
    name = unique()
    lab.lxd2.cli("launch", "busybox", name)
    app = make_app(write_config(tmp_path), env=lab_env)
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: status(app, f"lab2:{name}") == "running",
                           what="lab2 listing")
            await asyncio.to_thread(lab.lxd2.kill)
            await wait_for(pilot, lambda: remote_state(app, "lab2")
                           is ConnectionState.DISCONNECTED, what="disconnected")
            await wait_for(pilot, lambda: status(app, f"lab2:{name}") == "running?",
                           what="last known status, marked stale")
            await asyncio.to_thread(lab.lxd2.start)
            await wait_for(pilot, lambda: remote_state(app, "lab2")
                           is ConnectionState.CONNECTED, timeout=40, what="reconnected")
            await asyncio.to_thread(lab.lxd2.cli, "stop", "--force", name)
            await wait_for(pilot, lambda: status(app, f"lab2:{name}") == "stopped",
                           what="events flow again after reconnect")
            assert app.return_code is None  # no crash, no traceback screen
    finally:
        if not lab.lxd2.alive():
            lab.lxd2.start()
        lab.lxd2.cli("delete", "--force", name, check=False)


async def test_lxc_and_qemu_beside_lxd_and_incus(lab, lab_env, unique, tmp_path, monkeypatch):
    """One table: an LXD container, a plain LXC container and a local QEMU VM; the VM is
    started from the keyboard and boots for real (TCG)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import qemu_guest
    from backend_checks import busybox_container, lxc

    from backends.qemu import QEMUBackend, qemu_remote

    monkeypatch.setenv("XDG_RUNTIME_DIR", f"/tmp/cq-ui-{os.getpid()}")
    kernel, initrd = qemu_guest.guest()
    vms = QEMUBackend(qemu_remote(str(tmp_path / "vms")))
    await vms.connect()
    await vms.create("guest1", kernel=str(kernel), initrd=str(initrd), memory_mib=256,
                     cmdline="console=ttyS0", accel="tcg")
    await vms.close()

    a = unique("a")
    lab.lxd1.cli("launch", "busybox", a)
    cfg = write_config(tmp_path, stop_timeout=3)
    lxcpath = tmp_path / "lxcpath"
    busybox_container(lxcpath, "box1")
    app = make_app(cfg, env=lab_env)
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: {f"local:{a}", "lxc:box1", "qemu:guest1"}
                           <= set(rows(app)), what="LXD, LXC and QEMU rows")
            assert rows(app)["qemu:guest1"][2] == "VM"
            select(app, "qemu:guest1")
            await pilot.press("S")
            await wait_for(pilot, lambda: status(app, "qemu:guest1") == "running",
                           timeout=30, what="VM started from the keyboard")
            log = Path(f"/tmp/cq-ui-{os.getpid()}/corral/qemu/guest1/serial.log")
            await wait_for(pilot, lambda: log.exists()
                           and "corral-guest ready" in log.read_text(errors="replace"),
                           timeout=60, what="the VM booted")
            await pilot.press("p")
            await wait_for(pilot, lambda: status(app, "qemu:guest1") == "frozen",
                           what="VM paused")
            await pilot.press("p")
            await wait_for(pilot, lambda: status(app, "qemu:guest1") == "running",
                           what="VM resumed")
            # `s`: the busybox guest ignores the ACPI power button, so after stop_timeout
            # corral offers a forced stop
            await pilot.press("s")
            await wait_for(pilot, lambda: hasattr(app.screen, "title_text")
                           and "Force stop" in app.screen.title_text
                           and app.screen.query("#confirm"), timeout=20,
                           what="the force-stop offer")
            await pilot.pause(0.3)  # let the dialog lay out before clicking its button
            await pilot.click("#confirm")
            try:
                await wait_for(pilot, lambda: status(app, "qemu:guest1") == "stopped",
                               timeout=20, what="VM stopped")
            except AssertionError:
                raise AssertionError(f"status {status(app, 'qemu:guest1')!r}, "
                                     f"{[n.message for n in app._notifications]}") from None
            assert status(app, "lxc:box1") == "stopped"
            assert str(app.screen.query_one(RemoteList).get_row("lxc")[1]).strip() == "lxc"
            await asyncio.to_thread(lxc, lxcpath, "lxc-start", "-n", "box1")
            await wait_for(pilot, lambda: status(app, "lxc:box1") == "running",
                           what="external lxc-start shown")
            select(app, "lxc:box1")
            await pilot.press("s")
            await wait_for(pilot, lambda: status(app, "lxc:box1") == "stopped", timeout=30,
                           what="stopped from the keyboard")
    finally:
        lab.lxd1.cli("delete", "--force", a)
        subprocess.run(["lxc-stop", "-P", str(lxcpath), "-n", "box1", "-k"],
                       capture_output=True)
        subprocess.run(["lxc-destroy", "-P", str(lxcpath), "-n", "box1"], capture_output=True)
        cleanup = QEMUBackend(qemu_remote(str(tmp_path / "vms")))
        await cleanup.connect()
        if cleanup.vms.pid("guest1"):
            await cleanup.stop(InstanceRef("qemu", "guest1"), force=True)
        await cleanup.close()
