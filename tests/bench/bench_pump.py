#!/usr/bin/env python3
"""Benchmark: the console output queue under a flood (a script that prints figures, not a
test).

    .venv/bin/python tests/bench/bench_pump.py [-n 3]

The two cases of ``tests/terminal/test_output_pump.py`` timed: 64 MiB arriving in 320 KiB
bursts without yielding (queueing must stay linear: target < 2 s), and 200,000 small
pieces queued and drained through the emulator (target < 20 s). Each is also run at a
quarter of its size: a linear queue takes about a quarter of the time, a quadratic one a
sixteenth. The tests check what the queue keeps and shows; the speed is measured here,
where a busy machine makes a figure late instead of a test red.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tui.terminal.emulator import TerminalEmulator  # noqa: E402
from tui.widgets.terminal_io import OutputPump  # noqa: E402


async def flood(bursts: int) -> float:
    pump = OutputPump(TerminalEmulator(columns=100, lines=10, scrollback=40_000), lambda: None)
    line = b"y" * 79 + b"\r\n"
    started = time.perf_counter()
    for _ in range(bursts):
        pump.put(line * 4096)
    return time.perf_counter() - started


async def pieces(count: int) -> float:
    pump = OutputPump(TerminalEmulator(columns=80, lines=24), lambda: None)
    started = time.perf_counter()
    for i in range(count):
        pump.put(b"%d\r\n" % (i % 10))
    while len(pump):
        await asyncio.sleep(0)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=3, help="runs per figure (median)")
    runs = parser.parse_args().n
    rows = [
        ("64 MiB flood queued", 2.0,
         statistics.median(asyncio.run(flood(200)) for _ in range(runs)),
         statistics.median(asyncio.run(flood(50)) for _ in range(runs))),
        ("200,000 pieces queued and drawn", 20.0,
         statistics.median(asyncio.run(pieces(200_000)) for _ in range(runs)),
         statistics.median(asyncio.run(pieces(50_000)) for _ in range(runs))),
    ]
    print(f"{'case':34} {'seconds':>8} {'target':>7} {'quarter size':>13} {'ratio':>6}")
    for name, target, full, quarter in rows:
        mark = "ok" if full < target else "OVER"
        print(f"{name:34} {full:8.2f} {target:6.0f}s {quarter:12.2f}s {full / quarter:6.1f}"
              f"  {mark} (linear ~4, quadratic ~16)")


if __name__ == "__main__":
    main()
