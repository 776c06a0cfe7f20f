"""The queue between a console session and the emulator stays bounded when a guest writes
faster than the emulator reads, and says where output was skipped."""

from __future__ import annotations

import asyncio
import time

from tui.terminal.emulator import TerminalEmulator
from tui.widgets.terminal_io import OutputPump


async def test_a_flood_is_bounded_and_the_gap_is_shown():
    emulator = TerminalEmulator(columns=100, lines=10, scrollback=40_000)
    pump = OutputPump(emulator, lambda: None)
    line = b"y" * 79 + b"\r\n"
    peak = 0
    for _ in range(200):  # 64 MiB arriving in 320 KiB bursts, without yielding between
        pump.put(line * 4096)
        peak = max(peak, len(pump))
    assert peak <= OutputPump.MAX_PENDING + len(line) * 4096
    assert pump.skipped > 50 << 20
    pump.put(b"the-end\r\n")
    deadline = time.monotonic() + 30
    while len(pump):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    text = "\n".join(emulator.history_text() + emulator.screen_text())
    assert "bytes of output skipped" in text and "the-end" in text
    # (queueing is linear: tests/bench/bench_pump.py times it beside a quarter-size run)


async def test_many_small_pieces_are_all_taken():
    emulator = TerminalEmulator(columns=80, lines=24)
    pump = OutputPump(emulator, lambda: None)
    for i in range(200_000):
        pump.put(b"%d\r\n" % (i % 10))
    while len(pump):
        await asyncio.sleep(0)
    # (how long it takes: tests/bench/bench_pump.py)
    assert pump.skipped == 0
