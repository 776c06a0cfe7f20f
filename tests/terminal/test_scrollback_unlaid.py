"""Lines a flood only passes through to the scrollback are handed over as text and laid out
when read: the scrollback's length is exact before that, and what it then holds is exactly
what the parser alone gives (random floods with wrapping lines, attributes carried from line
to line, the odd lines that cannot be handed over, several scrollback limits and chunk
sizes)."""

from __future__ import annotations

import random

import pytest

from tui.terminal.emulator import TerminalEmulator

COLUMNS, LINES = 80, 24
_SGRS = ["0", "", "1", "01;34", "0;31", "38;5;208", "48;2;10;20;30", "7", "22;27", "4",
         "0;1;32", "39;49"]


def _clean_line(rnd: random.Random) -> str:
    width = rnd.choice([0, 1, 10, 40, COLUMNS - 1, COLUMNS, COLUMNS + 1, 2 * COLUMNS,
                        2 * COLUMNS + 5, rnd.randrange(0, 3 * COLUMNS)])
    out = []
    while width > 0:
        if rnd.random() < 0.3:
            out.append(f"\x1b[{rnd.choice(_SGRS)}m")
        n = min(width, rnd.randrange(1, 30))
        out.append("".join(rnd.choice("abc xyz-_09 ") for _ in range(n)))
        width -= n
    if rnd.random() < 0.2:
        out.append(f"\x1b[{rnd.choice(_SGRS)}m")
    return "".join(out) + "\r\n"


def _odd_line(rnd: random.Random) -> str:
    return rnd.choice([
        "tab\there\r\n", "bare lf\n", "lone\rcr over\r\n", "\x1b[5;5Hmoved\x1b[24;1H\r\n",
        "no end yet ", "\x1b[2K\r\n", "  indented\n\n",
    ])


def _flood(rnd: random.Random, lines: int) -> bytes:
    out = []
    for _ in range(lines):
        out.append(_odd_line(rnd) if rnd.random() < 0.004 else _clean_line(rnd))
    return "".join(out).encode()


def _feed(emu: TerminalEmulator, data: bytes, rnd: random.Random) -> None:
    i = 0
    while i < len(data):
        n = rnd.choice([4096, 65536, 262_144, rnd.randrange(1, 400_000)])
        emu.feed(data[i:i + n])
        i += n


@pytest.mark.parametrize("scrollback", [5000, 300, 40, 0])
@pytest.mark.parametrize("seed", range(4))
def test_unlaid_scrollback_is_what_the_parser_gives(seed, scrollback):
    rnd = random.Random(seed * 31 + scrollback)
    data = _flood(rnd, 6000)
    fast = TerminalEmulator(COLUMNS, LINES, scrollback=scrollback)
    slow = TerminalEmulator(COLUMNS, LINES, scrollback=scrollback, fast_path=False)
    _feed(fast, data, rnd)
    _feed(slow, data, random.Random(seed))
    if scrollback >= 300:
        assert fast._history.deferred_rows > 0  # the unlaid path was taken
    # exact before anything is laid out
    assert fast.history_size == slow.history_size
    assert fast.lines_scrolled == slow.lines_scrolled
    assert fast.state() == slow.state()
    assert fast._history.deferred_rows == 0


def test_a_flood_read_midway_and_resized_keeps_each_line_as_it_was_laid():
    rnd = random.Random(7)
    fast = TerminalEmulator(COLUMNS, LINES)
    slow = TerminalEmulator(COLUMNS, LINES, fast_path=False)
    for part in range(3):
        data = _flood(rnd, 1500)
        fast.feed(data)
        slow.feed(data)
        if part == 1:
            assert fast.history_text()[-50:] == slow.history_text()[-50:]
        fast.resize(COLUMNS + 17, LINES - 3)
        slow.resize(COLUMNS + 17, LINES - 3)
    assert fast.state() == slow.state()


def test_rep_after_a_flood_repeats_the_last_character_drawn():
    # the last screenful is blank lines: the character comes from the unlaid lines
    data = ("".join(f"\x1b[1mline {i}\x1b[0m\r\n" for i in range(500)) + "\r\n" * 30
            + "\x1b[3b").encode()
    fast = TerminalEmulator(COLUMNS, LINES)
    slow = TerminalEmulator(COLUMNS, LINES, fast_path=False)
    fast.feed(data)
    slow.feed(data)
    assert fast.state() == slow.state()
    assert fast.screen_text()[-1] == "999"
