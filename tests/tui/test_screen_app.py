"""A VM's graphical screen inside corral, driven by keys and the mouse against real QEMU
(TCG): the UEFI framebuffer guest (``display_guest()`` of ``tests/qemu_guest.py``), drawn as
half-blocks in a console tab. What corral draws is compared with QEMU's own screendump
scaled to the same size; typing in the pane reaches the guest (its serial console says
so); a click lands at the guest pixel under the cell; P saves a PNG equal to the
screendump."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

from tui.app import make_app
from tui.widgets.console_dock import ConsoleDock
from tui.widgets.graphic_console import GraphicView

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_real_app import rows, select, wait_for, write_config


def dock(app) -> ConsoleDock:
    return app.main_screen.query_one(ConsoleDock)


def cell_colours(view: GraphicView, y: int) -> list[tuple]:
    """(upper, lower) colours of every cell of row ``y`` as drawn."""
    out = []
    for seg in view.render_line(y):
        style = seg.style
        if seg.text.strip("▀"):
            out += [None] * len(seg.text)
            continue
        top = style.color.triplet if style and style.color else None
        bottom = style.bgcolor.triplet if style and style.bgcolor else None
        out += [(tuple(top), tuple(bottom))] * len(seg.text)
    return out


def expected_colours(dump: Image.Image, view: GraphicView, y: int) -> list[tuple]:
    """The same row computed from QEMU's screendump with Pillow alone."""
    fit = view.fit
    w, h = fit.size
    scaled = dump.resize((w, h), Image.Resampling.BOX)
    ox, oy = fit.offset
    line = y - oy
    out = [None] * ox
    for x in range(w):
        top = scaled.getpixel((x, 2 * line))
        bottom = scaled.getpixel((x, 2 * line + 1)) if 2 * line + 1 < h else (0, 0, 0)
        out.append((top, bottom))
    return out + [None] * (fit.columns - ox - w)


@pytest.mark.qemu  # starts it itself (tests/tiers.py)
async def test_graphical_screen_in_a_tab(tmp_path, monkeypatch):
    import qemu_guest
    from qemu_guest import wait_serial

    from backends.models import InstanceRef
    from backends.qemu import QEMUBackend, qemu_remote

    run = f"/tmp/cq-gfx-{os.getpid()}"
    monkeypatch.setenv("XDG_RUNTIME_DIR", run)
    kernel, initrd = qemu_guest.display_guest()
    vms = QEMUBackend(qemu_remote(str(tmp_path / "vms")))
    await vms.connect()
    await vms.create("gfx", kernel=str(kernel), initrd=str(initrd), memory_mib=256,
                     cmdline=qemu_guest.DISPLAY_CMDLINE, accel="tcg", firmware="uefi")
    shots = tmp_path / "shots"
    cfg = write_config(tmp_path, extra=f'[console]\ngraphics = "halfblock"\n'
                                       f'screenshot_dir = "{shots}"\nscreen_fps = 10\n')
    app = make_app(cfg, env={"HOME": str(tmp_path), "PATH": os.environ["PATH"],
                             "XDG_RUNTIME_DIR": run})
    ref = InstanceRef("qemu", "gfx")
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: "qemu:gfx" in rows(app), what="the VM")
            select(app, "qemu:gfx")
            await pilot.press("S")
            await wait_serial(vms, "gfx", "corral-guest ready", timeout=120)
            await wait_for(pilot, lambda: rows(app)["qemu:gfx"][3] == "running",
                           what="the VM running")
            await pilot.press("v")  # a UEFI VM has no VGA text: v shows its screen too
            await wait_for(pilot, lambda: dock(app).active is not None
                           and isinstance(dock(app).active.view, GraphicView)
                           and app.focused is dock(app).active.view,
                           what=lambda: f"the screen tab ({[n.message for n in app._notifications]})")
            view: GraphicView = dock(app).active.view
            await wait_for(pilot, lambda: view.paints > 0 and view.fit is not None,
                           what="the first picture")
            await pilot.press("ctrl+right_square_bracket")
            select(app, "qemu:gfx")
            await pilot.press("V")  # the screen's own key: back to the same tab
            await wait_for(pilot, lambda: app.focused is view, what="the screen tab again")
            assert len(dock(app).tabs) == 1
            await pilot.press("ctrl+right_square_bracket", "z")  # consoles full screen
            await wait_for(pilot, lambda: view.size.width > 150, what="the zoomed tab")
            await wait_for(pilot, lambda: view.fit is not None and view.fit.columns > 150,
                           what="the picture scaled to the zoomed tab")
            assert app.focused is view  # z focuses the console again

            qmp = app.inventory.backends["qemu"].monitor  # the app holds the VM's monitor
            serial = await vms.open_console(ref)

            class Quiet:
                def feed(self, data): pass
                def closed(self, reason): pass
            await serial.start(Quiet())
            await serial.send_bytes(b"cat /red.raw > /dev/fb0\r")
            red_row = view.fit.offset[1] + 2
            await wait_for(pilot, lambda: (cell_colours(view, red_row) or [None])[
                view.size.width // 2] == ((255, 0, 0), (255, 0, 0)), timeout=20,
                what="the red band drawn")
            await pilot.pause(0.5)  # no more changes in flight
            dump_path = tmp_path / "dump.png"
            await qmp.execute(ref, "screendump", filename=str(dump_path), format="png")
            dump = Image.open(dump_path).convert("RGB")
            oy = view.fit.offset[1]
            for y in range(oy, oy + view.fit.cells[1]):
                assert cell_colours(view, y) == expected_colours(dump, view, y), f"row {y}"

            # typing in the pane: lines typed on tty1 come back on the serial console
            await pilot.press(*"echo Hi", "enter")
            await wait_serial(vms, "gfx", "tty1: echo Hi", timeout=30)

            # a click lands at the guest pixel under the cell (QEMU's input layer)
            log = tmp_path / "trace.log"
            await qmp.execute(ref, "human-monitor-command",
                                  **{"command-line": f"logfile {log}"})
            await qmp.execute(ref, "human-monitor-command",
                                  **{"command-line": "log trace:input_event_abs"})
            mice = await qmp.execute(ref, "query-mice")
            tablet = next(m for m in mice if m["absolute"])  # no USB in the test kernel:
            await qmp.execute(ref, "human-monitor-command",  # make the tablet current
                                  **{"command-line": f"mouse_set {tablet['index']}"})
            cell = (40, 20)
            gx, gy = view.fit.to_guest(*cell)
            await pilot.click(GraphicView, offset=(cell[0] + 1, cell[1] + 1))  # + border
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and "input_event_abs" not in (
                    log.read_text() if log.exists() else ""):
                await asyncio.sleep(0.1)
            axes = dict(re.findall(r"axis (\w+), value (0x[0-9a-f]+|\d+)", log.read_text()))
            assert int(axes["x"], 0) == gx * 0x7FFF // 1280
            assert int(axes["y"], 0) == gy * 0x7FFF // 800

            # the special-keys menu (K, outside the screen): Ctrl+Alt+F2 shows tty2, blank
            from tui.screens.dialogs import SpecialKeysMenu

            await pilot.press("ctrl+right_square_bracket", "K")
            await wait_for(pilot, lambda: isinstance(app.screen, SpecialKeysMenu),
                           what="the special-keys menu")
            assert view.session.special_keys[3] == "ctrl+alt+f2"
            from textual.widgets import OptionList

            app.screen.query_one(OptionList).highlighted = 3
            await pilot.press("enter")
            await wait_for(pilot, lambda: view.session.image.getpixel((640, 100))
                           == (0, 0, 0), timeout=20, what="tty2 shown (the red band gone)")
            assert app.focused is view

            # y (outside the screen: detach first) saves the screen as PNG
            await pilot.press("ctrl+right_square_bracket")
            await pilot.press("y")
            await wait_for(pilot, lambda: list(shots.glob("qemu-gfx-*.png")), what="a PNG")
            await qmp.execute(ref, "screendump", filename=str(dump_path), format="png")
            shot = Image.open(next(shots.glob("qemu-gfx-*.png"))).convert("RGB")
            assert shot.tobytes() == Image.open(dump_path).convert("RGB").tobytes()
            await serial.close()

            # a still screen costs the view no work: once it settled (a second without a
            # repaint; the deadline only stops a guest that never settles), not one repaint.
            # What it costs in CPU is a speed target: tests/bench/bench_screen.py, "Idle CPU".
            seen, since = view.paints, time.monotonic()

            def settled() -> bool:
                nonlocal seen, since
                if view.paints != seen:
                    seen, since = view.paints, time.monotonic()
                return time.monotonic() - since >= 1.0

            await wait_for(pilot, settled, timeout=60, what="the screen to settle")
            await pilot.pause(3)  # a busy machine can only delay repaints, never make them
            assert view.paints == seen, "a still screen was repainted"
    finally:
        pid = vms.vms.pid("gfx")
        if pid:
            os.kill(pid, 9)
        await vms.close()


@pytest.mark.qemu  # starts it itself (tests/tiers.py)
async def test_vga_text_tab_switches_to_the_screen_when_the_guest_leaves_text_mode(
        tmp_path, monkeypatch):
    """A BIOS VM's VGA text tab (v): when the BIOS data area says a graphics mode (the
    guest writes mode 0x12 there with devmem), corral opens the graphical screen by
    itself; the VGA tab stays and says why."""
    import qemu_guest
    from qemu_guest import wait_serial

    from backends.models import InstanceRef
    from backends.qemu import QEMUBackend, qemu_remote

    run = f"/tmp/cq-vgx-{os.getpid()}"
    monkeypatch.setenv("XDG_RUNTIME_DIR", run)
    kernel, initrd = qemu_guest.guest()
    vms = QEMUBackend(qemu_remote(str(tmp_path / "vms")))
    await vms.connect()
    await vms.create("txt", kernel=str(kernel), initrd=str(initrd), memory_mib=256,
                     cmdline="console=ttyS0", accel="tcg")
    cfg = write_config(tmp_path, extra='[console]\ngraphics = "halfblock"\n')
    app = make_app(cfg, env={"HOME": str(tmp_path), "PATH": os.environ["PATH"],
                             "XDG_RUNTIME_DIR": run})
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: "qemu:txt" in rows(app), what="the VM")
            select(app, "qemu:txt")
            await pilot.press("S")
            await wait_serial(vms, "txt", "corral-guest ready", timeout=120)
            await wait_for(pilot, lambda: rows(app)["qemu:txt"][3] == "running",
                           what="the VM running")
            await pilot.press("v")
            await wait_for(pilot, lambda: dock(app).active is not None
                           and dock(app).active.kind == "vga", what="the VGA tab")
            serial = await vms.open_console(InstanceRef("qemu", "txt"))

            class Quiet:
                def feed(self, data): pass
                def closed(self, reason): pass
            await serial.start(Quiet())
            await serial.send_bytes(b"mknod /dev/mem c 1 1; devmem 0x449 8 0x12\r")
            await wait_for(pilot, lambda: dock(app).active.kind == "screen", timeout=20,
                           what="the switch to the graphical screen")
            assert {t.kind for t in dock(app).tabs.values()} == {"vga", "screen"}
            view = dock(app).active.view
            await wait_for(pilot, lambda: view.paints > 0, what="the screen drawn")
            await serial.close()
    finally:
        pid = vms.vms.pid("txt")
        if pid:
            os.kill(pid, 9)
        await vms.close()
