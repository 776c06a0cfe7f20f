#!/usr/bin/env python3
"""Benchmark: the graphical console (a script that prints figures, not a test).

    .venv/bin/python tests/bench/bench_screen.py [-n 40] [--fps 10]

1. **Full-screen change as half-blocks**: a 1024x768 screen whose every pixel changed,
   drawn in a 160x45 pane — the UI thread's work per frame (scale with Pillow, build every
   cell row as Rich segments, as ``GraphicView.paint`` + ``render_line`` do), for noise
   (worst case: no two neighbouring cells alike) and a desktop-like picture. Target
   <= 30 ms.
2. **Guest change -> repaint latency** at ``--fps`` (10): a real QEMU guest (TCG, the UEFI
   framebuffer guest, ``display_guest()`` of ``tests/qemu_guest.py``), shown by a
   ``GraphicView`` in a headless Textual app through corral's console server. A key is typed on the guest's
   tty1; fbcon draws the character; the time until the view has repainted it is measured,
   and — as the baseline of what the guest and QEMU take themselves — the time until a
   bare RFB client on QEMU's VNC socket sees the same change. Target <= 100 ms.
3. **Idle CPU** of a still graphical console over 10 s: the console server process and
   the UI process (this one). Target < 1 % of a core each.
4. **A screen that never stops changing**: repaints a second (rate-limited to ``--fps``)
   and the CPU that costs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(ROOT))

from benchlib import cpu_seconds  # noqa: E402
from PIL import Image, ImageDraw  # noqa: E402
from rich.style import Style  # noqa: E402
from textual.strip import Strip  # noqa: E402

from tui.graphics import Fit, HalfBlocks, key_events  # noqa: E402


def figures(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(len(values) * 0.95))]
    return (f"median {statistics.median(values):6.1f} ms  p95 {p95:6.1f} ms  "
            f"max {values[-1]:6.1f} ms  (n={len(values)})")


def full_frame(n: int) -> None:
    print("1. full-screen change, 1024x768 as half-blocks in a 160x45 pane (UI time)")
    rng = random.Random(1)
    noise = [Image.frombytes("RGB", (1024, 768), rng.randbytes(1024 * 768 * 3))
             for _ in range(n)]  # every frame new colours: no cached cell styles help
    desk = []
    for i in range(4):
        im = Image.new("RGB", (1024, 768), (30 + i * 20, 60, 110))
        d = ImageDraw.Draw(im)
        for _ in range(40):
            x, y = rng.randrange(900), rng.randrange(700)
            d.rectangle((x, y, x + rng.randrange(40, 300), y + rng.randrange(20, 200)),
                        fill=(rng.randrange(256), rng.randrange(256), rng.randrange(256)))
        d.text((20, 20), "corral " * 20, fill=(255, 255, 255))
        desk.append(im)
    fit = Fit(1024, 768, 160, 45)
    blank = Style()
    for label, images in (("noise", noise), ("desktop", desk)):
        times, cpu_times = [], []
        blocks = HalfBlocks()
        for i in range(n):
            image = images[i % len(images)]
            t0, c0 = time.perf_counter(), time.process_time()
            blocks.scale(image, fit)
            for y in range(45):
                Strip(blocks.row(y, blank)).adjust_cell_length(160, blank)
            times.append((time.perf_counter() - t0) * 1000)
            cpu_times.append((time.process_time() - c0) * 1000)
        print(f"   {label:8} wall {figures(times)}")
        print(f"   {'':8} CPU  {figures(cpu_times)}  (without waiting for a busy CPU)")


async def latency_and_idle(n: int, fps: float) -> None:
    import qemu_guest
    from qemu_guest import wait_serial
    from textual.app import App

    from backends.console.client import server_pid
    from backends.models import InstanceRef
    from backends.qemu import QEMUBackend, qemu_remote
    from backends.vnc import RFBClient
    from tui.widgets.graphic_console import GraphicView

    tmp = Path(tempfile.mkdtemp(prefix="bench-screen-"))
    run = Path(f"/tmp/cq-bench-{os.getpid()}")
    os.environ["XDG_RUNTIME_DIR"] = str(run)
    kernel, initrd = qemu_guest.display_guest()
    vms = QEMUBackend(qemu_remote(str(tmp / "vms")))
    await vms.connect()
    ref = InstanceRef("qemu", "bench")
    await vms.create("bench", kernel=str(kernel), initrd=str(initrd), memory_mib=256,
                     cmdline=qemu_guest.DISPLAY_CMDLINE, accel="tcg", firmware="uefi")
    try:
        await vms.start(ref)
        await wait_serial(vms, "bench", "corral-guest ready", timeout=180)
        session = await vms.open_display(ref, fps=fps)
        bare = RFBClient()
        await bare.connect(str(vms.vms.run_dir("bench") / "vnc.sock"))
        await bare.request(incremental=False)
        await bare.read_update()

        class Bench(App):
            def compose(self):
                yield GraphicView(session, "bench", mode="halfblock", fps=fps)

        app = Bench()
        async with app.run_test(size=(162, 47)) as pilot:
            view = app.query_one(GraphicView)
            while view.paints == 0:
                await pilot.pause(0.05)
            await pilot.pause(2)
            print(f"2. guest change -> repaint at {fps:g} fps (a key typed on tty1, "
                  f"drawn by fbcon; {view.size.width}x{view.size.height} pane)")
            ours, base = [], []
            for i in range(n):
                ch = "abcdefghij"[i % 10]
                paints = view.paints
                t0 = time.perf_counter()
                await bare.request(incremental=True)
                await session.keys(key_events(ch, ch))
                raw = asyncio.ensure_future(bare.read_update())
                seen_raw = None
                while view.paints == paints:
                    if seen_raw is None and raw.done():
                        seen_raw = time.perf_counter()
                    await asyncio.sleep(0.001)
                for y in range(view.size.height):  # what the compositor asks next
                    view.render_line(y)
                t1 = time.perf_counter()
                await raw
                seen_raw = seen_raw or time.perf_counter()
                ours.append((t1 - t0) * 1000)
                base.append((seen_raw - t0) * 1000)
                await pilot.pause(0.3)
            print(f"   corral (key -> view repainted)     {figures(ours)}")
            print(f"   bare RFB client (key -> VNC update) {figures(base)}")
            print(f"   added by corral (medians)            "
                  f"{statistics.median(ours) - statistics.median(base):6.1f} ms")
            after_idle = []
            for _ in range(3):
                await pilot.pause(8)  # QEMU slows its own screen checks on a still screen
                paints, t0 = view.paints, time.perf_counter()
                await session.keys(key_events("x", "x"))
                while view.paints == paints:
                    await asyncio.sleep(0.001)
                after_idle.append((time.perf_counter() - t0) * 1000)
            print("   after 8 s of a still screen: "
                  + ", ".join(f"{t:.0f} ms" for t in after_idle))

            pid = server_pid(str(vms.vms.run_dir("bench") / "display.ws"))
            cpu = cpu_seconds

            await bare.close()
            await pilot.pause(3)
            before = (cpu(pid), cpu("self"), time.monotonic())
            await pilot.pause(10)
            spent = time.monotonic() - before[2]
            print("3. idle CPU of a still screen over 10 s")
            print(f"   console server {(cpu(pid) - before[0]) / spent:6.2%} of a core")
            print(f"   UI process     {(cpu('self') - before[1]) / spent:6.2%} of a core")

            serial = await vms.open_console(ref)

            class Quiet:
                def feed(self, data): pass
                def closed(self, reason): pass
            await serial.start(Quiet())
            await serial.send_bytes(b"while :; do cat /red.raw > /dev/fb0; dd if=/dev/zero "
                                    b"of=/dev/fb0 bs=5120 count=200 2>/dev/null; done &\r")
            await pilot.pause(3)
            paints = view.paints
            before = (cpu(pid), cpu("self"), time.monotonic())
            await pilot.pause(10)
            spent = time.monotonic() - before[2]
            print(f"4. a screen changing without pause (a 1280x200 band), {fps:g} fps, 10 s")
            print(f"   repaints {(view.paints - paints) / spent:5.1f}/s; console server "
                  f"{(cpu(pid) - before[0]) / spent:6.2%}, UI process "
                  f"{(cpu('self') - before[1]) / spent:6.2%} of a core")
            await serial.close()
        await session.close()
    finally:
        pid = vms.vms.pid("bench")
        if pid:
            os.kill(pid, 9)
        await vms.close()
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(run, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("-n", type=int, default=40)
    p.add_argument("--fps", type=float, default=10.0)
    args = p.parse_args()
    full_frame(args.n)
    asyncio.run(latency_and_idle(args.n, args.fps))


if __name__ == "__main__":
    main()
