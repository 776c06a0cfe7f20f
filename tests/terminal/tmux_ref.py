"""tmux as the reference terminal: a stream ``cat``-ed into a tmux pane of a given size, and
the screen it shows, for the corpus comparisons (test_corpus_tmux.py, test_vttest.py and
tests/bench/corpus_report.py).

tmux runs on a private socket (``-L corral-ref-<pid>-<id>``, no config) with a pane of
exactly the size asked that puts its tty in raw mode (no LF -> CRLF translation: the streams
carry their own CRs) and ``cat``s the file; ``capture-pane -e -p`` is read once the pane stops
changing. ``capture-pane -p`` alone prints cells drawn with the DEC line-drawing set as the
letters that selected them (``lqqk``); with ``-e`` tmux brackets them in SO/SI, and they are
mapped here with xterm's DEC Special Graphics table, so the comparison is of what tmux's
grid holds, drawn as xterm draws it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import unicodedata
import uuid
from pathlib import Path
from typing import Self

from tui.terminal.charsets import DEC_GRAPHICS

TMUX = shutil.which("tmux")
_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|[()][0-~]|[ -/]*[0-~])")


_NOT_DRAWN = re.compile("[\u200b-\u200d\u2060\ufeff\ufe00-\ufe0f]")
"""Zero-width characters and variation selectors: kept in cells, never drawn."""


def normalise(lines: list[str]) -> list[str]:
    """Screens compared as drawn: NFC text without the characters that take no column and
    draw nothing (tui/terminal/widths.py), right-trimmed, without trailing blank lines."""
    out = [unicodedata.normalize("NFC", _NOT_DRAWN.sub("", line).rstrip()) for line in lines]
    while out and not out[-1]:
        out.pop()
    return out


def decode_capture(text: str) -> list[str]:
    """``capture-pane -e -p`` output -> plain lines, SO..SI cells through the DEC table."""
    acs = False
    lines = []
    for line in text.split("\n"):
        out = []
        for part in re.split(r"([\x0e\x0f])", _ESCAPE.sub("", line)):
            if part == "\x0e":
                acs = True
            elif part == "\x0f":
                acs = False
            elif acs:
                out.append(part.translate(DEC_GRAPHICS))
            else:
                out.append(part)
        lines.append("".join(out))
    return lines


class Tmux:
    """A private tmux server; :meth:`screen` shows one stream in it."""

    def __init__(self) -> None:
        if TMUX is None:  # the reference terminal is part of the lab: missing fails
            raise RuntimeError("tmux is not installed (run scripts/setup-lab.sh)")
        self.sock = f"corral-ref-{os.getpid()}-{uuid.uuid4().hex[:6]}"

    def run(self, *args: str, check: bool = True) -> str:
        return subprocess.run([TMUX, "-L", self.sock, "-f", "/dev/null", *args],
                              capture_output=True, text=True, check=check, timeout=20).stdout

    def close(self) -> None:
        self.run("kill-server", check=False)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def screen(self, path: Path, width: int, height: int) -> list[str]:
        session = f"s{uuid.uuid4().hex[:8]}"
        command = f"stty raw -echo; cat '{path}'; sleep 60"
        for attempt in range(3):  # a busy machine can make the first server start fail
            try:
                self.run("new-session", "-d", "-x", str(width), "-y", str(height),
                         "-s", session, command)
                break
            except subprocess.CalledProcessError:
                if attempt == 2:
                    raise
                time.sleep(0.5)
        try:
            self.run("set-option", "-t", session, "status", "off")
            self.run("resize-window", "-t", session, "-x", str(width), "-y", str(height))
            previous = None
            stable = 0
            deadline = time.monotonic() + 15
            time.sleep(0.3)
            while time.monotonic() < deadline:
                screen = self.run("capture-pane", "-e", "-p", "-t", session)
                if screen == previous:
                    stable += 1
                    if stable >= 3:
                        break
                else:
                    stable = 0
                previous = screen
                time.sleep(0.15)
            size = self.run("display-message", "-p", "-t", session,
                            "#{pane_width}x#{pane_height}")
            assert size.strip() == f"{width}x{height}", size
            return decode_capture(previous or "")
        finally:
            self.run("kill-session", "-t", session, check=False)


def emulator_screen(data: bytes, width: int, height: int) -> list[str]:
    """The screen of a TerminalEmulator fed ``data`` in uneven chunks, as a console
    delivers it."""
    from tui.terminal.emulator import TerminalEmulator

    emulator = TerminalEmulator(width, height)
    step = 1
    i = 0
    while i < len(data):
        emulator.feed(data[i:i + step])
        i += step
        step = step * 3 % 65521 + 1
    emulator.flush()
    return emulator.shown_text()
