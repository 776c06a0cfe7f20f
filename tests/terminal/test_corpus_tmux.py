"""Each corpus stream, shown by tmux and by TerminalEmulator at 120x40, gives the same screen.

tmux runs on a private socket (``-L corral-test-<pid>``, no config) with a pane of exactly
120x40 that puts its tty in raw mode (no LF -> CRLF translation: the streams carry their own
CRs) and ``cat``s the file; ``capture-pane -p`` is compared with ``screen_text()`` once the
pane stops changing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import unicodedata
import uuid
from pathlib import Path

import pytest

from tui.terminal.emulator import TerminalEmulator

CORPUS = Path(__file__).resolve().parent / "corpus"
FILES = sorted(CORPUS.glob("*.bin"))
WIDTH, HEIGHT = 120, 40
TMUX = shutil.which("tmux")

@pytest.fixture(scope="module")
def tmux():
    if TMUX is None:  # the reference terminal is part of the lab: missing fails, never skips
        pytest.fail("tmux is not installed (run scripts/setup-lab.sh)", pytrace=False)
    sock = f"corral-test-{os.getpid()}-{uuid.uuid4().hex[:6]}"

    def run(*args: str, check: bool = True) -> str:
        return subprocess.run([TMUX, "-L", sock, "-f", "/dev/null", *args],
                              capture_output=True, text=True, check=check, timeout=20).stdout

    yield run
    run("kill-server", check=False)


def _normalise(lines: list[str]) -> list[str]:
    out = [unicodedata.normalize("NFC", line.rstrip()) for line in lines]
    while out and not out[-1]:
        out.pop()
    return out


def tmux_screen(run, path: Path) -> list[str]:
    session = f"s{uuid.uuid4().hex[:8]}"
    command = f"stty raw -echo; cat '{path}'; sleep 60"
    run("new-session", "-d", "-x", str(WIDTH), "-y", str(HEIGHT), "-s", session, command)
    try:
        run("set-option", "-t", session, "status", "off")
        run("resize-window", "-t", session, "-x", str(WIDTH), "-y", str(HEIGHT))
        previous = None
        stable = 0
        deadline = time.monotonic() + 15
        time.sleep(0.3)
        while time.monotonic() < deadline:
            screen = run("capture-pane", "-p", "-t", session)
            if screen == previous:
                stable += 1
                if stable >= 3:
                    break
            else:
                stable = 0
            previous = screen
            time.sleep(0.15)
        size = run("display-message", "-p", "-t", session, "#{pane_width}x#{pane_height}")
        assert size.strip() == f"{WIDTH}x{HEIGHT}"
        return (previous or "").split("\n")
    finally:
        run("kill-session", "-t", session, check=False)


def emulator_screen(data: bytes) -> list[str]:
    emulator = TerminalEmulator(WIDTH, HEIGHT)
    # Feed in uneven chunks, as a console delivers it.
    step = 1
    i = 0
    while i < len(data):
        emulator.feed(data[i:i + step])
        i += step
        step = step * 3 % 65521 + 1
    emulator.flush()
    return emulator.screen_text()


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_screen_matches_tmux(tmux, path: Path) -> None:
    data = path.read_bytes()
    assert len(data) < 200_000
    expected = _normalise(tmux_screen(tmux, path))
    got = _normalise(emulator_screen(data))
    assert got == expected


def test_corpus_is_present() -> None:
    names = {p.stem for p in FILES}
    assert {"ls_color", "top", "vim_inside", "vim_exit", "scroll_regions", "wide_chars",
            "busybox_boot", "flood", "line_editing", "tabs", "utf8"} <= names
