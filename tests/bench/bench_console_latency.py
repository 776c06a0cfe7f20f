#!/usr/bin/env python3
"""Benchmark: keystroke-to-echo latency through an LXD exec websocket — corral's path
against a bare websocket client doing the same (a script that prints figures, not a test).

    .venv/bin/python tests/bench/bench_console_latency.py [-n 300] [--root DIR]

For each remote ('local' over the unix socket, 'lab2' over HTTPS) it opens two exec
sessions running `cat` on a pty in a busybox container (the tty echoes each key at once):

- bare: the `websockets` client alone — send one byte, wait for the frame that echoes it;
- corral: :class:`backends.console.WebSocketSession` feeding a sink that runs the terminal
  emulator (``TerminalEmulator.feed``) and renders the changed line to Rich segments, as
  the console pane does before Textual paints it — send one byte, wait until the echoed
  character is on the emulator's screen.

Keys alternate between the two so both see the same daemon load. Prints median, p95 and
max per path and the median added by corral. Target: <= 5 ms added.
With --root, uses a lab started with `python tests/lab.py up --root DIR`; otherwise starts
and stops a private lab.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(ROOT))

from benchlib import add_root_option, lab_up  # noqa: E402

from backends import get_backend  # noqa: E402
from backends.models import InstanceRef  # noqa: E402
from backends.remotes import discover  # noqa: E402
from tui.terminal.emulator import TerminalEmulator  # noqa: E402

KEYS = b"abcdefghijklmnopqrstuvwxyz0123456789"


class EmulatorSink:
    """What the console pane does with output, minus Textual's paint."""

    def __init__(self) -> None:
        self.emulator = TerminalEmulator(120, 40)
        self.changed = asyncio.Event()

    def feed(self, data: bytes) -> None:
        self.emulator.feed(data)
        for row in self.emulator.take_dirty():
            self.emulator.render_view_line(row)
        self.changed.set()

    def closed(self, reason: str) -> None:
        self.changed.set()

    def last_char(self) -> str:
        row, col = self.emulator.cursor[1], self.emulator.cursor[0]
        line = self.emulator.screen_text()[row] if row < self.emulator.lines else ""
        return line[col - 1:col] if col else ""


async def measure(backend, ref: InstanceRef, n: int) -> tuple[list[float], list[float]]:
    argv = ["/bin/sh", "-c", "stty -icanon; exec cat"]
    # bare: the same exec request, then only the websockets library
    op_id, fds = await backend.sockets.websocket_operation(ref, "exec", {
        "command": argv, "wait-for-websocket": True, "interactive": True,
        "environment": {"TERM": "xterm"}, "width": 120, "height": 40})
    control = await backend.sockets.operation_socket(op_id, fds["control"])()
    bare = await backend.sockets.operation_socket(op_id, fds["0"])()
    session = await backend.open_shell(ref, argv, width=120, height=40)
    sink = EmulatorSink()
    await session.start(sink)
    await asyncio.sleep(0.5)
    try:
        while True:  # drain what the shell printed first
            await asyncio.wait_for(bare.recv(), 0.2)
    except asyncio.TimeoutError:
        pass
    bare_times, corral_times = [], []
    for i in range(n):
        key = KEYS[i % len(KEYS):i % len(KEYS) + 1]
        t0 = time.perf_counter()
        await bare.send(key)
        got = b""
        while key not in got:
            frame = await asyncio.wait_for(bare.recv(), 5)
            got += frame if isinstance(frame, bytes) else b""
        bare_times.append(time.perf_counter() - t0)

        sink.changed.clear()
        t0 = time.perf_counter()
        await session.send_bytes(key)
        while sink.last_char() != key.decode():
            await asyncio.wait_for(sink.changed.wait(), 5)
            sink.changed.clear()
        corral_times.append(time.perf_counter() - t0)
        if (i + 1) % 100 == 0:  # keep the line short: a newline every 100 keys
            await session.send_bytes(b"\n")
            await bare.send(b"\n")
            await asyncio.sleep(0.05)
            try:
                while True:
                    await asyncio.wait_for(bare.recv(), 0.05)
            except asyncio.TimeoutError:
                pass
    await session.close()
    await bare.close()
    await control.close()
    return bare_times, corral_times


def show(label: str, times: list[float]) -> float:
    ms = sorted(t * 1000 for t in times)
    med = statistics.median(ms)
    p95 = ms[int(len(ms) * 0.95) - 1]
    print(f"  {label:7} median {med:6.2f} ms   p95 {p95:6.2f} ms   max {ms[-1]:6.2f} ms")
    return med


async def run(lab, n: int) -> None:
    remotes = {r.name: r for r in discover(lab.env()).remotes}
    lab.lxd1.cli("launch", "busybox", "latency-bench", check=False)
    lab.lxd2.cli("launch", "busybox", "latency-bench", check=False)
    try:
        for name in ("local", "lab2"):
            backend = get_backend(remotes[name], timeout=10)
            await backend.connect()
            try:
                bare, corral = await measure(backend, InstanceRef(name, "latency-bench"), n)
            finally:
                await backend.close()
            transport = "unix socket" if remotes[name].is_unix else "HTTPS"
            print(f"{name} ({transport}), {n} keys:")
            b = show("bare", bare)
            c = show("corral", corral)
            print(f"  added by corral (median): {c - b:+.2f} ms  (target <= 5 ms)")
    finally:
        lab.lxd1.cli("delete", "--force", "latency-bench", check=False)
        lab.lxd2.cli("delete", "--force", "latency-bench", check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=300, help="keystrokes per path and remote")
    add_root_option(parser)
    args = parser.parse_args()
    with lab_up(args.root) as lab:
        asyncio.run(run(lab, args.n))


if __name__ == "__main__":
    main()
