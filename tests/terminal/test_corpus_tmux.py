"""Each corpus stream, shown by tmux and by TerminalEmulator at 120x40, gives the same screen
(the tmux side is in tmux_ref.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.terminal.tmux_ref import Tmux, emulator_screen, normalise
from tests.terminal.xterm_cases import CASES, TMUX_WRONG, expected

CORPUS = Path(__file__).resolve().parent / "corpus"
FILES = sorted(CORPUS.glob("*.bin"))
WIDTH, HEIGHT = 120, 40


@pytest.fixture(scope="module")
def tmux():
    try:
        ref = Tmux()
    except RuntimeError as exc:  # missing fails, never skips
        pytest.fail(str(exc), pytrace=False)
    yield ref
    ref.close()


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_screen_matches_tmux(tmux, path: Path) -> None:
    data = path.read_bytes()
    assert len(data) < 200_000
    reference = normalise(tmux.screen(path, WIDTH, HEIGHT))
    got = normalise(emulator_screen(data, WIDTH, HEIGHT))
    if path.stem in TMUX_WRONG:  # tmux is wrong there (xterm_cases.py says why)
        assert reference != got, f"tmux now agrees on {path.stem}: drop it from TMUX_WRONG"
        assert got == normalise(expected(path.stem, HEIGHT))
    else:
        assert got == reference


def test_corpus_is_present() -> None:
    names = {p.stem for p in FILES}
    assert {"ls_color", "top", "vim_inside", "vim_exit", "scroll_regions", "wide_chars",
            "busybox_boot", "flood", "line_editing", "tabs", "utf8", "dec_graphics", "nel",
            "strings", "esc_in_csi", "hpa_cbt", "origin_mode", "combining",
            "dialog_checklist", "dialog_yesno_acs", *CASES} <= names
