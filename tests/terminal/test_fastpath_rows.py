"""The rows the flood fast path lays out: they remember their runs only while unchanged,
draw exactly as the parser's rows do, and small chunks (a websocket's 4 KiB) use the fast
path too once a flood is under way."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from pyte.screens import StaticDefaultDict

from tests.terminal.test_emulator import _random_stream
from tui.terminal.emulator import DEFAULT_KEY, TerminalEmulator
from tui.terminal.lines import RunsRow, row_runs
from tui.terminal.sgr import DEFAULT_CHAR

CORPUS = Path(__file__).resolve().parent / "corpus"

_CHANGES = [
    lambda r: r.__setitem__(0, DEFAULT_CHAR._replace(data="x")),
    lambda r: r.__delitem__(1),
    lambda r: r.pop(1),
    lambda r: r.pop(99, None),
    lambda r: r.popitem(),
    lambda r: r.update({5: DEFAULT_CHAR._replace(data="y")}),
    lambda r: r.setdefault(7, DEFAULT_CHAR._replace(data="z")),
    lambda r: r.clear(),
    lambda r: r.__ior__({3: DEFAULT_CHAR._replace(data="w")}),
]


@pytest.mark.parametrize("change", _CHANGES)
def test_a_runs_row_forgets_its_runs_when_changed(change):
    runs = (("ab", DEFAULT_KEY),)
    row = RunsRow(DEFAULT_CHAR, runs)
    dict.update(row, {0: DEFAULT_CHAR._replace(data="a"), 1: DEFAULT_CHAR._replace(data="b")})
    assert row_runs(row, 10) is runs
    change(row)
    assert row.runs is None
    plain = StaticDefaultDict(DEFAULT_CHAR)
    plain.update(row)
    assert row_runs(row, 10) == row_runs(plain, 10)


def _flood(lines: int) -> bytes:
    return b"".join(b"\x1b[01;34mdir%d\x1b[0m file %d\r\n" % (i, i) for i in range(lines))


def test_rows_edited_after_the_fast_path_scroll_off_as_edited():
    # The parser overwrites, erases and shifts rows the fast path laid out; when they leave
    # the screen the scrollback has what the parser left, as without the fast path.
    edits = (b"\x1b[5;3Hxx\x1b[7;1H\x1b[2K\x1b[9;4H\x1b[2P\x1b[11;2H\x1b[3@"
             b"\x1b[13;1H\x1b[1K\x1b[40;1H")
    data = _flood(100) + edits + _flood(60)
    fast = TerminalEmulator(120, 40)
    slow = TerminalEmulator(120, 40, fast_path=False)
    for emu in (fast, slow):
        for i in range(0, len(data), 4096):
            emu.feed(data[i:i + 4096])
    assert fast.state() == slow.state()
    assert "dixx5 file 65" in fast.history_text()


def _drawn(emu: TerminalEmulator, cursor: bool) -> list[list[tuple]]:
    return [[(s.text, s.style) for s in emu.render_view_line(y, cursor=cursor)]
            for y in range(emu.lines)]


@pytest.mark.parametrize("seed", range(30))
def test_fast_rows_draw_as_the_parsers_rows(seed):
    rng = random.Random(seed)
    data = _random_stream(rng, rng.randint(50, 400))
    columns = rng.choice([20, 80, 120])
    lines = rng.choice([3, 10, 40])
    fast = TerminalEmulator(columns, lines)
    slow = TerminalEmulator(columns, lines, fast_path=False)
    step = rng.choice([100, 4096, 65536])
    for i in range(0, len(data), step):
        fast.feed(data[i:i + step])
        slow.feed(data[i:i + step])
        assert _drawn(fast, False) == _drawn(slow, False)
    assert _drawn(fast, True) == _drawn(slow, True)


def test_a_flood_in_4_kib_chunks_takes_the_fast_path():
    data = (CORPUS / "ls_color.bin").read_bytes()
    emu = TerminalEmulator(120, 40)
    laid_out = []
    original = emu._fast._lines
    emu._fast._lines = lambda block: (laid_out.append(block.count("\n") + 1),
                                      original(block))[1]
    for i in range(0, len(data), 4096):
        emu.feed(data[i:i + 4096])
    assert sum(laid_out) > 0.7 * data.count(b"\n")
    slow = TerminalEmulator(120, 40, fast_path=False)
    slow.feed(data)
    assert emu.state() == slow.state()


def test_mixed_line_endings_tabs_and_carriage_returns_in_one_block():
    # CR LF lines, a bare LF (the next line starts mid-row), tabs, a CR inside a line, a
    # line wider than the screen, empty lines, all in one stretch of simple lines.
    parts = []
    for i in range(60):
        parts.append([b"plain %d\r\n" % i, b"\x1b[1mbold\x1b[0m %d\n" % i, b"a\tb\tc\r\n",
                      b"over\rOV\r\n", b"w" * 130 + b"\r\n", b"\r\n", b"\n",
                      b"\x1b[32mgreen \x1b[0m  \r\n", b"  \r\n"][i % 9])
    data = b"".join(parts) * 3
    for columns in (40, 120):
        fast = TerminalEmulator(columns, 10)
        slow = TerminalEmulator(columns, 10, fast_path=False)
        fast.feed(data)
        slow.feed(data)
        assert fast.state() == slow.state()
        assert _drawn(fast, True) == _drawn(slow, True)
