#!/usr/bin/env python3
"""Benchmark: a console flood end to end — websocket -> emulator -> pane — beside tmux on the
same bytes, in one run (prints figures; not a test).

    .venv/bin/python tests/bench/bench_console_e2e.py [--mb 20] [--frame 4096] [--rounds 3]

corral: a websocket server in another process (as LXD or corral's console server is) sends
the coloured-ls corpus, repeated to MB megabytes, in binary frames of FRAME bytes on a unix
socket; corral's own :class:`~backends.console.client.WebSocketSession` reads them into a
TerminalView of 120x40 in a headless app. Timed from the connection to the last byte in the
emulator and its frame painted; meanwhile a 5 ms heartbeat on the event loop records the
longest stall (what a key press would wait).

tmux: ``cat`` of the same file in a new window of a detached 120x40 tmux session (a private
server started beforehand, as corral's app is), timed from the start until ``cat`` ends
(the pty holds a few KiB at most, so tmux has parsed nearly all of it by then).

Targets: corral >= 0.7 x tmux at 4 KiB frames; no stall over 50 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

CORPUS = ROOT / "tests" / "terminal" / "corpus"

SERVER = r"""
import asyncio, sys
from websockets.asyncio.server import unix_serve

path, data_file, frame = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = open(data_file, "rb").read()

async def handler(ws):
    for i in range(0, len(data), frame):
        await ws.send(data[i:i + frame])
    await ws.close()

async def main():
    async with unix_serve(handler, path, max_size=None, compression=None):
        print("ready", flush=True)
        await asyncio.Future()

asyncio.run(main())
"""


async def corral_round(sock: str, total: int) -> dict[str, float]:
    from textual.app import App, ComposeResult
    from websockets.asyncio.client import unix_connect

    from backends.console.client import WebSocketSession
    from tui.widgets.terminal import TerminalView

    session = WebSocketSession(
        "bench", lambda: unix_connect(sock, "ws://localhost/", max_size=None,
                                      compression=None))

    class Bench(App):
        def compose(self) -> ComposeResult:
            yield TerminalView(session, "bench · console")

    app = Bench()
    async with app.run_test(size=(122, 42)) as pilot:
        view = app.query_one(TerminalView)
        gaps: list[float] = []
        done = asyncio.Event()

        async def heartbeat() -> None:
            last = time.perf_counter()
            while not done.is_set():
                await asyncio.sleep(0.005)
                now = time.perf_counter()
                gaps.append(now - last - 0.005)
                last = now

        t0 = time.perf_counter()
        beat = asyncio.create_task(heartbeat())
        while view.emulator.bytes_fed < total:
            await asyncio.sleep(0.002)
        await pilot.pause()  # the last frame painted
        elapsed = time.perf_counter() - t0
        done.set()
        await beat
    return {"elapsed": elapsed, "rate": total / elapsed, "max_gap": max(gaps),
            "p99_gap": sorted(gaps)[int(len(gaps) * 0.99)]}


def tmux_round(socket: str, data_file: str, total: int) -> float:
    """One ``cat`` in a new pane of a tmux server already running on ``socket`` (its start
    is not timed, as corral's start is not)."""
    marker = Path(tempfile.mkdtemp()) / "done"
    t0 = time.perf_counter()
    subprocess.run(["tmux", "-L", socket, "new-window", "-d", "-t", "bench",
                    f"cat {data_file}; touch {marker}; sleep 30"], check=True)
    try:
        while not marker.exists():
            time.sleep(0.001)
        return total / (time.perf_counter() - t0)
    finally:
        shutil.rmtree(marker.parent, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=20.0)
    parser.add_argument("--frame", type=int, default=4096, help="websocket frame size")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--corpus", default="ls_color.bin")
    args = parser.parse_args()
    sample = (CORPUS / args.corpus).read_bytes()
    data = sample * max(1, int(args.mb * 1_000_000 / len(sample)))
    work = Path(tempfile.mkdtemp(prefix="corral-e2e-"))
    data_file = work / "stream.bin"
    data_file.write_bytes(data)
    sock = str(work / "ws.sock")
    server = subprocess.Popen([sys.executable, "-c", SERVER, sock, str(data_file),
                               str(args.frame)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        corral, tmux, gaps = [], [], []
        tmux_socket = f"bench-e2e-{os.getpid()}"  # a private server, started once
        subprocess.run(["tmux", "-L", tmux_socket, "-f", "/dev/null", "new-session", "-d",
                        "-s", "bench", "-x", "120", "-y", "40", "sleep 600"], check=True)
        try:
            for _ in range(args.rounds):
                result = asyncio.run(corral_round(sock, len(data)))
                corral.append(result["rate"])
                gaps.append(result["max_gap"])
                tmux.append(tmux_round(tmux_socket, str(data_file), len(data)))
        finally:
            subprocess.run(["tmux", "-L", tmux_socket, "kill-server"], check=False)
        c, t = statistics.median(corral), statistics.median(tmux)
        print(f"{args.corpus} x{len(data) // len(sample)} = {len(data) / 1e6:.1f} MB, "
              f"{args.frame}-byte websocket frames, 120x40, medians of {args.rounds}")
        print(f"corral websocket -> emulator -> pane: {c / 1e6:6.2f} MB/s  "
              f"(all: {', '.join(f'{r / 1e6:.2f}' for r in corral)})")
        print(f"tmux, cat in a pane:                  {t / 1e6:6.2f} MB/s  "
              f"(all: {', '.join(f'{r / 1e6:.2f}' for r in tmux)})")
        print(f"corral / tmux:                        {c / t:6.2f}  (target >= 0.7)")
        print(f"longest event-loop stall during the flood: {max(gaps) * 1000:.0f} ms "
              f"(target <= 50 ms)")
        return 0
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
