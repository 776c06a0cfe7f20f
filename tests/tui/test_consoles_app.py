"""Consoles inside corral, driven by keys against the real daemons and tools: an LXD
exec shell and console (over LXD's websockets), Incus the same, a QEMU VM's serial port
and VGA text screen, an LXC console and attach shell (through corral's console server)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tui.app import make_app
from tui.widgets.console_dock import ConsoleDock
from tui.widgets.instance_table import InstanceTable
from tui.widgets.terminal import TerminalView

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_checks import busybox_container, lxc
from test_real_app import rows, select, wait_for, write_config


def dock(app) -> ConsoleDock:
    return app.main_screen.query_one(ConsoleDock)


def active_view(app) -> TerminalView | None:
    tab = dock(app).active
    return tab.view if tab else None


def screen_has(app, text: str) -> bool:
    view = active_view(app)
    return view is not None and any(text in line for line in view.emulator.screen_text())


async def open_tab(pilot, app, ref: str, key: str) -> TerminalView:
    """Press ``key`` (c, e, v) on ``ref`` and wait for its tab to be the focused one:
    keys typed before that would go to the table."""
    kind = {"c": "console", "e": "shell", "v": "vga"}[key]
    select(app, ref)
    await pilot.press(key)
    await wait_for(pilot, lambda: dock(app).active is not None
                   and str(dock(app).active.ref) == ref and dock(app).active.kind == kind
                   and app.focused is dock(app).active.view, what=f"the {kind} of {ref}")
    return dock(app).active.view


async def type_line(pilot, text: str) -> None:
    await pilot.press(*text, "enter")


async def wait_screen(pilot, app, text, timeout=20.0):
    try:
        await wait_for(pilot, lambda: screen_has(app, text), timeout=timeout,
                       what=f"{text!r} on the console")
    except AssertionError:
        view = active_view(app)
        shown = "\n".join(view.emulator.screen_text()) if view else "(no console)"
        notes = [n.message for n in app._notifications]
        raise AssertionError(f"{text!r} not on the console:\n{shown}\n{notes}") from None


async def test_lxd_and_incus_shell_and_console_in_tabs(lab, lab_env, unique, tmp_path):
    a, b = unique("a"), unique("b")
    lab.lxd1.cli("launch", "busybox", a)
    lab.incus1.cli("launch", "busybox", b)
    app = make_app(write_config(tmp_path), env=lab_env)
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: {f"local:{a}", f"inc1:{b}"} <= set(rows(app)),
                           what="both containers")
            await open_tab(pilot, app, f"local:{a}", "e")
            await wait_screen(pilot, app, " #")
            assert isinstance(app.focused, TerminalView)
            await type_line(pilot, "echo $((6*7))")
            await wait_screen(pilot, app, "42")
            # the pane's size reached the shell (exec: a real pty)
            view = active_view(app)
            await type_line(pilot, "stty size")
            await wait_screen(pilot, app, f"{view.emulator.lines} {view.emulator.columns}")
            # resizing the terminal resizes the pane and the remote pty
            await pilot.resize_terminal(150, 40)
            await pilot.pause(0.6)
            await wait_for(pilot, lambda: view.emulator.columns != 0, what="resized")
            await type_line(pilot, "clear; stty size")
            await wait_screen(pilot, app, f"{view.emulator.lines} {view.emulator.columns}")

            await pilot.press("ctrl+right_square_bracket")  # detach: back to the table
            await wait_for(pilot, lambda: isinstance(app.focused, InstanceTable),
                           what="focus back on the table")
            assert not view.is_closed and len(dock(app).tabs) == 1

            # the container's /dev/console in a second tab
            await open_tab(pilot, app, f"local:{a}", "c")
            assert len(dock(app).tabs) == 2
            await pilot.press("enter")
            await wait_screen(pilot, app, " #")
            await type_line(pilot, "echo console-$((40+2))")
            await wait_screen(pilot, app, "console-42")
            await pilot.press("ctrl+right_square_bracket")
            await wait_for(pilot, lambda: isinstance(app.focused, InstanceTable),
                           what="detached from the console")
            await pilot.press("x")  # close the console tab
            await wait_for(pilot, lambda: len(dock(app).tabs) == 1, what="tab closed")
            await pilot.press("t")  # back into the shell, still alive
            await wait_for(pilot, lambda: app.focused is view, what="shell focused")
            await type_line(pilot, "exit 0")
            await wait_for(pilot, lambda: view.is_closed, what="shell ended")
            await wait_screen(pilot, app, "exited (0)")
            await pilot.press("r")  # reconnect: a new shell in the same tab
            await wait_for(pilot, lambda: not view.is_closed, what="reconnected")
            await type_line(pilot, "echo again-$((2+3))")
            await wait_screen(pilot, app, "again-5")

            await pilot.press("ctrl+right_square_bracket")
            await open_tab(pilot, app, f"inc1:{b}", "e")  # Incus over HTTPS: the same keys
            await wait_screen(pilot, app, " #")
            await type_line(pilot, "echo incus-$((3*3))")
            await wait_screen(pilot, app, "incus-9")
            await pilot.press("ctrl+right_square_bracket")
            await pilot.press("z")  # consoles full screen, then back
            assert app.main_screen.has_class("-console-zoom")
            await pilot.press("ctrl+right_square_bracket")  # out of the console, zoomed
            await pilot.pause(0.1)
            assert app.main_screen.has_class("-console-zoom")
            await pilot.press("z")
            await pilot.pause(0.1)
            assert not app.main_screen.has_class("-console-zoom")
    finally:
        lab.lxd1.cli("delete", "--force", a)
        lab.incus1.cli("delete", "--force", b)


@pytest.mark.qemu  # starts it itself (tests/tiers.py)
@pytest.mark.lxc  # starts it itself (tests/tiers.py)
async def test_qemu_serial_and_vga_and_lxc_consoles(tmp_path, monkeypatch):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import qemu_guest

    from backends.qemu import QEMUBackend, qemu_remote

    run = f"/tmp/cq-con-{os.getpid()}"
    monkeypatch.setenv("XDG_RUNTIME_DIR", run)
    kernel, initrd = qemu_guest.guest()
    vms = QEMUBackend(qemu_remote(str(tmp_path / "vms")))
    await vms.connect()
    await vms.create("serial1", kernel=str(kernel), initrd=str(initrd), memory_mib=256,
                     cmdline="console=ttyS0", accel="tcg")
    await vms.create("bios1", memory_mib=64, disk_gib=1, accel="tcg")
    await vms.close()
    casts = tmp_path / "casts"
    cfg = write_config(tmp_path, extra=f'[console]\nrecord_dir = "{casts}"\n')
    lxcpath = tmp_path / "lxcpath"
    busybox_container(lxcpath, "box1")
    lxc(lxcpath, "lxc-start", "-n", "box1")
    app = make_app(cfg, env={"HOME": str(tmp_path), "PATH": os.environ["PATH"],
                             "XDG_RUNTIME_DIR": run})
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: {"qemu:serial1", "qemu:bios1", "lxc:box1"}
                           <= set(rows(app)), what="the VMs and the container")
            for name in ("serial1", "bios1"):
                select(app, f"qemu:{name}")
                await pilot.press("S")
            await wait_for(pilot, lambda: rows(app)["qemu:serial1"][3] == "running"
                           and rows(app)["qemu:bios1"][3] == "running", timeout=30,
                           what="both VMs running")
            await open_tab(pilot, app, "qemu:bios1", "v")  # VGA text: SeaBIOS draws it (then iPXE scrolls it up)
            await wait_for(pilot, lambda: active_view(app) is not None and any(
                "SeaBIOS" in line for line in active_view(app).emulator.history_text()
                + active_view(app).emulator.screen_text()), timeout=30,
                what="the SeaBIOS banner on the VGA console (screen or scrollback)")
            await wait_screen(pilot, app, "Booting from", timeout=30)
            await pilot.press("ctrl+right_square_bracket")

            await open_tab(pilot, app, "qemu:serial1", "c")
            await wait_screen(pilot, app, "corral-guest ready", timeout=60)  # from history
            await type_line(pilot, "echo serial-$((6*7))")
            await wait_screen(pilot, app, "serial-42")
            await pilot.press("ctrl+right_square_bracket")

            # every console was recorded as asciicast v2
            import json

            await pilot.pause(1.2)  # the recorder writes through at least once a second
            await pilot.press("x")  # closing the tab ends the recording
            cast = next(casts.glob("qemu-serial1-console-*.cast"))
            lines = cast.read_text().splitlines()
            assert json.loads(lines[0])["version"] == 2
            assert "serial-42" in "".join(json.loads(line)[2] for line in lines[1:]
                                          if json.loads(line)[1] == "o")
            await open_tab(pilot, app, "lxc:box1", "e")
            await wait_screen(pilot, app, " #")
            await type_line(pilot, "echo attach-$((7*7))")
            await wait_screen(pilot, app, "attach-49")
            await pilot.press("ctrl+right_square_bracket")
            await open_tab(pilot, app, "lxc:box1", "c")
            assert len(dock(app).tabs) == 3
            await pilot.press("enter")
            await type_line(pilot, "echo lxc-console-$((8*8))")
            await wait_screen(pilot, app, "lxc-console-64")
        # corral is gone; the VM and its console server are not: a new corral re-attaches
        app2 = make_app(cfg, env={"HOME": str(tmp_path), "PATH": os.environ["PATH"],
                                  "XDG_RUNTIME_DIR": run})
        async with app2.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: "qemu:serial1" in rows(app2)
                           and rows(app2)["qemu:serial1"][3] == "running",
                           what="the VM still running")
            await open_tab(pilot, app2, "qemu:serial1", "c")
            await wait_screen(pilot, app2, "serial-42")  # what was shown before
    finally:
        subprocess.run(["lxc-stop", "-P", str(lxcpath), "-n", "box1", "-k"],
                       capture_output=True)
        for name in ("serial1", "bios1"):
            pid_file = Path(run) / "corral" / "qemu" / name / "qemu.pid"
            try:
                os.kill(int(pid_file.read_text().strip()), 9)
            except (OSError, ValueError):
                pass
        await asyncio.sleep(0.5)
        subprocess.run(["rm", "-rf", run])
