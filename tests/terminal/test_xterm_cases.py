"""The console edge cases where xterm is clear (tests/terminal/xterm_cases.py): corral's
emulator shows xterm's screen for each, in uneven chunks as a console delivers them and in
one piece, and every row it draws measures exactly the columns its cells take (what follows
a wide, zero-width or emoji character, the pane's border included, never shifts)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.cells import cell_len

from tests.terminal.tmux_ref import emulator_screen, normalise
from tests.terminal.xterm_cases import CASES, TMUX_WRONG, expected, stream
from tui.terminal.emulator import TerminalEmulator
from tui.terminal.widths import char_width

CORPUS = Path(__file__).resolve().parent / "corpus"
WIDTH, HEIGHT = 120, 40


@pytest.mark.parametrize("name", CASES)
def test_emulator_shows_what_xterm_shows(name: str) -> None:
    data = stream(name)
    assert (CORPUS / f"{name}.bin").read_bytes() == data  # the corpus holds it as it is here
    want = normalise(expected(name, HEIGHT))
    assert normalise(emulator_screen(data, WIDTH, HEIGHT)) == want
    whole = TerminalEmulator(WIDTH, HEIGHT)
    whole.feed(data)
    whole.flush()
    assert normalise(whole.shown_text()) == want


@pytest.mark.parametrize("name", CASES)
def test_every_drawn_row_measures_its_cells(name: str) -> None:
    emulator = TerminalEmulator(WIDTH, HEIGHT)
    emulator.feed(stream(name))
    emulator.flush()
    buffer = emulator._screen.buffer  # the cells the row is drawn from
    for y in range(HEIGHT):
        line = buffer.get(y) or {}
        text = "".join(s.text for s in emulator.render_view_line(y, cursor=False))
        drawn = [x for x, c in line.items() if c.data not in ("", " ")]
        last = max(drawn, default=-1)
        columns = last + (char_width(line[last].data[0]) if drawn else 1)
        assert cell_len(text.rstrip()) == columns, (y, text)


def test_tmux_errors_are_cases() -> None:
    assert set(TMUX_WRONG) <= set(CASES)


@pytest.mark.parametrize("digits", [30, 300, 5000, 50000])
def test_a_huge_parameter_swallows_nothing(digits: int) -> None:
    for body in ("9" * digits + "m", "1;" * digits + "m", "38;5;" + "9" * digits + "m",
                 "?" + "9" * digits + "h", "9" * digits + "X"):
        data = ("\x1b[" + body + "after").encode()
        assert emulator_screen(data, 40, 5)[0].rstrip() == "after", body[:12]
        whole = TerminalEmulator(40, 5)
        whole.feed(data)
        whole.flush()
        assert whole.shown_text()[0] == "after", body[:12]
