#!/usr/bin/env python3
"""Corpus report: how many corpus screens corral's terminal shows exactly as tmux does.

    .venv/bin/python tests/bench/corpus_report.py [-v]

Screens: every stream of tests/terminal/corpus (120x40) and every recorded vttest screen of
tests/terminal/corpus/vttest (80x24, the stream up to that screen). Each is shown by a real
tmux (tests/terminal/tmux_ref.py) and by TerminalEmulator, and the text compared. Screens on
which tmux itself is wrong are listed in tests/terminal/test_vttest.py (TMUX_WRONG) with why;
they are counted apart and compared with the screen vttest asks the user to check, as are
the edge cases of tests/terminal/xterm_cases.py where tmux is wrong (with xterm's screen,
TMUX_WRONG there). Prints
"N of M screens identical to tmux". ``-v`` prints each differing screen.
"""

from __future__ import annotations

import difflib
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from tests.terminal.test_vttest import SCREENS, TMUX_WRONG, expected_screen  # noqa: E402
from tests.terminal.tmux_ref import Tmux, emulator_screen, normalise  # noqa: E402
from tests.terminal.xterm_cases import TMUX_WRONG as XTERM_CASES_TMUX_WRONG  # noqa: E402
from tests.terminal.xterm_cases import expected as xterm_expected  # noqa: E402

CORPUS = ROOT / "tests" / "terminal" / "corpus"


def screens():
    """(label, data, width, height) of every corpus screen."""
    for path in sorted(CORPUS.glob("*.bin")):
        yield path.stem, path.read_bytes(), 120, 40
    for label, data in SCREENS:
        yield label, data, 80, 24


def main() -> None:
    verbose = "-v" in sys.argv
    same = total = wrong_total = wrong_ok = 0
    with Tmux() as tmux, tempfile.TemporaryDirectory() as tmp:
        for label, data, width, height in screens():
            path = Path(tmp) / "stream.bin"
            path.write_bytes(data)
            ref = normalise(tmux.screen(path, width, height))
            got = normalise(emulator_screen(data, width, height))
            total += 1
            if got == ref:
                same += 1
            if label in TMUX_WRONG or label in XTERM_CASES_TMUX_WRONG:
                wrong_total += 1
                if label in TMUX_WRONG:
                    why, want, judge = TMUX_WRONG[label], expected_screen(label), "vttest"
                else:
                    why, judge = XTERM_CASES_TMUX_WRONG[label], "xterm"
                    want = xterm_expected(label, height)
                ok = got == normalise(want)
                wrong_ok += ok
                print(f"  {label}: tmux is wrong ({why}); "
                      f"{f'as {judge} shows it' if ok else f'DIFFERS from what {judge} shows'}")
            elif got != ref:
                print(f"  {label}: differs from tmux")
                if verbose:
                    print("\n".join(difflib.unified_diff(ref, got, "tmux", "corral",
                                                         lineterm="")))
    right = total - wrong_total
    print(f"{same} of {total} screens identical to tmux ({100 * same / total:.1f} %)")
    print(f"where tmux is right: {same} of {right} identical; where tmux is wrong "
          f"(documented): {wrong_ok} of {wrong_total} as vttest/xterm show them")


if __name__ == "__main__":
    main()
