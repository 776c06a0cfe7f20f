#!/usr/bin/env python3
"""Benchmark: switching the main table between views (a script that prints figures, not a
timed test).

    .venv/bin/python tests/bench/bench_views.py [-n 300] [--objects 50] [--root DIR]

Fills lxd1 ('local', unix socket) with N containers, and M profiles and M custom volumes,
then, in corral (Pilot, 160x45), switches instances -> profiles -> volumes -> storage ->
instances over and over and prints, per view, the time from the switch to the moment the
view's table has painted its lines with its rows (its ``render_lines`` returned while
shown), and the CPU time the UI thread spent until then (a figure a loaded machine does
not distort):

* cold: the first switch to a view (its rows read ahead in the background when the remote
  connected, or else from the daemon);
* warm: later switches (the rows shown at once from the last read, then read again).

Target: <= 100 ms to paint. With --root, uses a lab started with
`python tests/lab.py up --root DIR` (and leaves it); otherwise starts and stops its own.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchlib import add_root_option, lab_up  # noqa: E402


def populate(lab, n: int, objects: int) -> None:
    daemon = lab.lxd1
    have = set(daemon.cli("list", "--format", "csv", "-c", "n").stdout.split())
    t0 = time.monotonic()
    for i in range(n):
        if f"bview-{i:04d}" not in have:
            daemon.cli("init", "busybox", f"bview-{i:04d}")
    profiles = set(daemon.cli("profile", "list", "--format", "csv").stdout.split())
    volumes = daemon.cli("storage", "volume", "list", "default", "--format", "csv").stdout
    for i in range(objects):
        if not any(p.startswith(f"bprof-{i:03d},") for p in profiles):
            daemon.cli("profile", "create", f"bprof-{i:03d}")
        if f"bvol-{i:03d}" not in volumes:
            daemon.cli("storage", "volume", "create", "default", f"bvol-{i:03d}")
    print(f"populated {n} containers, {objects} profiles and {objects} volumes in "
          f"{time.monotonic() - t0:.1f} s")


async def measure(env: dict[str, str], n: int, objects: int, rounds: int):
    from tui.app import make_app
    from tui.views.pane import ResourcePane
    from tui.widgets.instance_table import InstanceTable

    cfg = Path(tempfile.mkdtemp()) / "config.toml"
    cfg.write_text('[ui]\nmetrics_interval = 60\n[remotes]\n'
                   'hide = ["lab2", "inc1", "incus-local"]\n[lxc]\nenabled = false\n'
                   '[qemu]\nenabled = false\n')
    app = make_app(cfg, env=env)
    times: dict[str, list[float]] = {}
    cold: dict[str, float] = {}
    cpu: dict[str, list[float]] = {}
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.main_screen
        table = screen.query_one(InstanceTable)
        while table.row_count < n:
            await asyncio.sleep(0.01)
        await pilot.pause(0.5)
        pane = screen.query_one(ResourcePane)
        wants = {"profiles": objects + 1, "volumes": objects, "storage": 1, "instances": n}
        painted_at: dict[int, float] = {}

        def watch(widget, want: int) -> None:
            """Note when ``widget`` paints its lines while shown with its rows."""
            if getattr(widget, "_bench_watched", False):
                return
            original = widget.render_lines

            def render_lines(crop):
                lines = original(crop)
                if widget.display and widget.row_count >= want:
                    painted_at[id(widget)] = time.perf_counter()
                return lines

            widget.render_lines = render_lines
            widget._bench_watched = True

        for _ in range(rounds):
            for view in ("profiles", "volumes", "storage", "instances"):
                t0, c0 = time.perf_counter(), time.thread_time()
                screen.views.show(view)
                widget = table if view == "instances" else pane.table
                watch(widget, wants[view])
                while painted_at.get(id(widget), 0) < t0:
                    await asyncio.sleep(0.001)
                elapsed = painted_at[id(widget)] - t0
                cpu.setdefault(view, []).append(time.thread_time() - c0)
                if view not in cold:
                    cold[view] = elapsed
                else:
                    times.setdefault(view, []).append(elapsed)
                await pilot.pause(0.3)  # the refresh read in the background settles
    return cold, times, cpu


def main() -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=300, help="containers (default 300)")
    parser.add_argument("--objects", type=int, default=50,
                        help="profiles and volumes each (default 50)")
    parser.add_argument("--rounds", type=int, default=10)
    add_root_option(parser)
    args = parser.parse_args()
    with lab_up(args.root) as lab:
        populate(lab, args.n, args.objects)
        cold, warm, cpu = asyncio.run(measure(lab.env(), args.n, args.objects, args.rounds))
        print(f"\n{args.n} instances, {args.objects} profiles, {args.objects} volumes on "
              f"one LXD remote (unix socket); switch -> rows painted:")
        for view in ("profiles", "volumes", "storage", "instances"):
            w = warm.get(view, [])
            print(f"  {view:<10} cold {cold[view] * 1000:6.1f} ms   warm median "
                  f"{statistics.median(w) * 1000:6.1f} ms, max {max(w) * 1000:6.1f} ms "
                  f"over {len(w)}" if w else f"  {view:<10} cold {cold[view] * 1000:6.1f} ms")
        print("CPU of the UI thread per switch (what the switch costs, whatever the load of "
              "the machine):")
        for view, values in cpu.items():
            print(f"  {view:<10} median {statistics.median(values) * 1000:6.1f} ms, "
                  f"max {max(values) * 1000:6.1f} ms")
        print(f"load average now: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        worst = max([*cold.values(), *(x for v in warm.values() for x in v)])
        print(f"worst switch: {worst * 1000:.1f} ms (target <= 100 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
