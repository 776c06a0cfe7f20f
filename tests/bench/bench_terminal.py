#!/usr/bin/env python3
"""Benchmark: console output throughput and UI latency (a script that prints figures, not a
timed test).

    .venv/bin/python tests/bench/bench_terminal.py [--mb 20] [--corpus ls_color.bin]

Prints:

1. bytes/s ingested by TerminalEmulator at 120x40 for the coloured-ls corpus repeated to
   ~20 MB, fed in 64 KiB chunks (the widget feeds slices of up to 256 KiB), and in 4 KiB chunks;
2. the same for naive pyte (``pyte.Screen`` + ``ByteStream``) on a 2 MB prefix;
3. the longest UI frame while a TerminalView in a headless app (``run_test``, 122x42 so the
   pane is 120x40) receives the flood in chunks of 4-64 KiB: the longest gap between ticks of
   a 5 ms event-loop heartbeat, and the longest paint (``render_line`` calls per frame); once
   with the default GC and once after ``gc.freeze()`` (full collections of Textual's heap
   are what is left of the longest stalls).

Targets (the issue): >= 8 MB/s, no frame over 50 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

import pyte  # noqa: E402

from tui.terminal.emulator import TerminalEmulator  # noqa: E402

CORPUS = ROOT / "tests" / "terminal" / "corpus"


def ingest(data: bytes, chunk: int, **kw) -> float:
    emulator = TerminalEmulator(120, 40, **kw)
    t0 = time.perf_counter()
    for i in range(0, len(data), chunk):
        emulator.feed(data[i:i + chunk])
    return len(data) / (time.perf_counter() - t0)


def naive(data: bytes, chunk: int = 65536) -> float:
    screen = pyte.Screen(120, 40)
    stream = pyte.ByteStream(screen)
    t0 = time.perf_counter()
    for i in range(0, len(data), chunk):
        stream.feed(data[i:i + chunk])
    return len(data) / (time.perf_counter() - t0)


async def ui_flood(data: bytes, freeze: bool = False) -> dict[str, float]:
    from textual.app import App, ComposeResult

    from tests.terminal.fakes import EchoSession
    from tui.widgets.terminal import TerminalView

    class Bench(App):
        def compose(self) -> ComposeResult:
            yield TerminalView(EchoSession(echo=False), "bench · console")

    app = Bench()
    async with app.run_test(size=(122, 42)) as pilot:
        view = app.query_one(TerminalView)
        view.focus()
        await pilot.pause(0.3)
        assert (view.emulator.columns, view.emulator.lines) == (120, 40)
        if freeze:
            # What an app can do after start-up: move its ~40k long-lived objects out of the
            # cyclic GC, whose full collections otherwise take ~20 ms each.
            gc.collect()
            gc.freeze()

        # Paint timing: wrap render_line and group calls into frames.
        paints: list[float] = []
        original = view.render_line
        frame = {"start": None, "spent": 0.0, "last": 0.0}

        def timed(y: int):
            t0 = time.perf_counter()
            strip = original(y)
            t1 = time.perf_counter()
            if frame["start"] is None or t0 - frame["last"] > 0.004:
                if frame["start"] is not None:
                    paints.append(frame["spent"])
                frame["start"] = t0
                frame["spent"] = 0.0
            frame["spent"] += t1 - t0
            frame["last"] = t1
            return strip

        view.render_line = timed  # type: ignore[method-assign]

        gaps: list[float] = []
        stop = asyncio.Event()

        async def heartbeat() -> None:
            last = time.perf_counter()
            while not stop.is_set():
                await asyncio.sleep(0.005)
                now = time.perf_counter()
                gaps.append(now - last - 0.005)
                last = now

        beat = asyncio.create_task(heartbeat())
        rng = random.Random(1)
        t0 = time.perf_counter()
        i = 0
        while i < len(data):
            n = rng.randint(4096, 65536)
            view.feed(data[i:i + n])
            i += n
            await asyncio.sleep(0)  # data arrives from the websocket between loop ticks
        while view.emulator.bytes_fed < len(data):
            await asyncio.sleep(0.01)
        elapsed = time.perf_counter() - t0
        await pilot.pause(0.2)
        stop.set()
        await beat
        if frame["start"] is not None:
            paints.append(frame["spent"])
        if freeze:
            gc.unfreeze()
        return {
            "elapsed": elapsed,
            "rate": len(data) / elapsed,
            "max_gap": max(gaps),
            "p99_gap": sorted(gaps)[int(len(gaps) * 0.99)],
            "max_paint": max(paints) if paints else 0.0,
            "frames": len(paints),
            "screen_ok": view.emulator.screen_text() == _reference_screen(data),
        }


def _reference_screen(data: bytes) -> list[str]:
    emulator = TerminalEmulator(120, 40)
    emulator.feed(data)
    return emulator.screen_text()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=20.0)
    parser.add_argument("--corpus", default="ls_color.bin")
    args = parser.parse_args()
    sample = (CORPUS / args.corpus).read_bytes()
    data = sample * max(1, int(args.mb * 1_000_000 / len(sample)))
    mb = len(data) / 1e6
    print(f"corpus {args.corpus}: {len(sample)} bytes, repeated to {mb:.1f} MB, 120x40")

    fast64 = ingest(data, 65536)
    print(f"TerminalEmulator, 64 KiB chunks:        {fast64 / 1e6:6.2f} MB/s")
    fast4 = ingest(data[:4_000_000], 4096)
    print(f"TerminalEmulator, 4 KiB chunks:         {fast4 / 1e6:6.2f} MB/s")
    slow = ingest(data[:2_000_000], 65536, fast_path=False)
    print(f"TerminalEmulator, fast path off:        {slow / 1e6:6.2f} MB/s")
    pyte_rate = naive(data[:2_000_000])
    print(f"naive pyte.Screen + ByteStream:         {pyte_rate / 1e6:6.2f} MB/s")
    print(f"speed-up over naive pyte:               {fast64 / pyte_rate:6.1f}x")

    for freeze in (False, True):
        ui = asyncio.run(ui_flood(data, freeze=freeze))
        label = "with gc.freeze() after start-up" if freeze else "default GC"
        print(f"TerminalView flood, {label} ({mb:.1f} MB in 4-64 KiB chunks): "
              f"{ui['elapsed']:.2f} s, {ui['rate'] / 1e6:.2f} MB/s end to end")
        print(f"  longest event-loop stall: {ui['max_gap'] * 1000:.1f} ms "
              f"(p99 {ui['p99_gap'] * 1000:.1f} ms)")
        print(f"  longest paint: {ui['max_paint'] * 1000:.1f} ms over {ui['frames']} frames")
        print(f"  final screen identical to a direct feed: {ui['screen_ok']}")


if __name__ == "__main__":
    main()
