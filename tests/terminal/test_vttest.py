"""vttest's screens (recorded by record_vttest.py from a real run at 80x24) shown by
TerminalEmulator and by tmux give the same text, except where tmux itself does not do what
vttest asks the user to check: there the screen is compared with the one vttest describes,
written out in corpus/vttest/expected/<menu>-<n>.txt (made from corral's screen after checking
each against vttest's instructions).

Not compared: the size of double-height/double-width lines (``ESC # 3``-``6``, the "double"
menu). tmux draws them single size and so does corral; only their text is compared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.terminal.tmux_ref import Tmux, emulator_screen, normalise

VTTEST = Path(__file__).resolve().parent / "corpus" / "vttest"
WIDTH, HEIGHT = 80, 24

_LATIN1 = ("tmux ignores this designation of 'A'; xterm, as a VT220 without NRC mode, shows it "
           "as ISO Latin-1's upper half, which vttest names 'ISO Latin-1'")
TMUX_WRONG: dict[str, str] = {
    "vttest/charsets/0": _LATIN1 + " (the VT100 test calls it 'British')",
    "vttest/charsets/1": _LATIN1 + ", selected into G1 with SO",
    "vttest/charsets/2": "tmux ignores G2/G3 and the locking shifts LS2/LS3 that show Latin-1 "
                         "in GL; the GR shifts (LS1R...) send raw 8-bit bytes, not UTF-8, which "
                         "xterm shows as U+FFFD and tmux drops",
    "vttest/charsets/3": "tmux ignores the single shift SS2 (ESC N) and G2; vttest shows "
                         "'G2 is ISO Latin-1' over the table",
    "vttest/charsets/4": "tmux ignores the single shift SS3 (ESC O) and G3",
    "vttest/cursor/2": "tmux moves BS/CUB from the wrap-pending position at the right margin "
                       "as if the cursor were one column further; xterm and a VT100 go to the "
                       "column before the last. vttest: 'the left/right margins should have "
                       "letters in order'",
    "vttest/cursor/3": "the same autowrap screen after the next step (the same tmux fault)",
    "vttest/iso6429/3": "tmux has no CHT (CSI I); vttest: 'the lines with *'s above should "
                        "look the same (they wrap once)'",
    "vttest/iso6429/4": "tmux has no HPR (CSI a); vttest draws a box of *'s with it",
    "vttest/iso6429/8": "tmux has no VPR (CSI e); vttest draws a box of *'s with it",
    "vttest/screen/10": "tmux's DECSTBM homes the cursor to the screen's first line even in "
                        "origin mode; xterm and a VT100 home to the region's. vttest: 'This "
                        "line should be at the bottom of the screen'",
}
"""Screens where tmux differs from what vttest asks the user to check, and why."""


def screens() -> list[tuple[str, bytes]]:
    out = []
    for meta in sorted(VTTEST.glob("*.json")):
        data = meta.with_suffix(".bin").read_bytes()
        for i, screen in enumerate(json.loads(meta.read_text())):
            out.append((f"vttest/{meta.stem}/{i}", data[:screen["offset"]]))
    return out


def expected_screen(label: str) -> list[str]:
    _, menu, n = label.split("/")
    return (VTTEST / "expected" / f"{menu}-{n}.txt").read_text().split("\n")


SCREENS = screens()


@pytest.fixture(scope="module")
def tmux():
    try:
        ref = Tmux()
    except RuntimeError as exc:  # missing fails, never skips
        pytest.fail(str(exc), pytrace=False)
    yield ref
    ref.close()


@pytest.mark.parametrize(("label", "data"), SCREENS, ids=[label for label, _ in SCREENS])
def test_vttest_screen(tmux, tmp_path, label: str, data: bytes) -> None:
    got = normalise(emulator_screen(data, WIDTH, HEIGHT))
    path = tmp_path / "stream.bin"
    path.write_bytes(data)
    reference = normalise(tmux.screen(path, WIDTH, HEIGHT))
    if label in TMUX_WRONG:
        assert reference != got, f"tmux now agrees on {label}: drop it from TMUX_WRONG"
        assert got == normalise(expected_screen(label))
    else:
        assert got == reference


def test_vttest_recordings_cover_the_menus() -> None:
    menus = {label.split("/")[1] for label, _ in SCREENS}
    assert {"cursor", "screen", "charsets", "double"} <= menus
    assert len(SCREENS) >= 50
    for label in TMUX_WRONG:
        assert any(label == name for name, _ in SCREENS), label
