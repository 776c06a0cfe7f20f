#!/usr/bin/env python3
"""Record vttest's screens as byte streams (committed; rerun only to change the recording).

    .venv/bin/python tests/terminal/record_vttest.py

vttest (Debian package ``vttest``) runs in an 80x24 pty, told so (``24x80.80``); corral's TerminalEmulator plays the
terminal only to answer its queries (DA, CPR). For each menu recorded (``MENUS``) it starts
vttest, chooses the menu, and at every screen that waits for RETURN notes the byte offset
reached once the output has been quiet for a while, then presses RETURN. It writes
``corpus/vttest/<name>.bin`` (everything vttest wrote, from its start) and
``corpus/vttest/<name>.json`` (the screens: offset and the prompt line). A screen is the
stream up to its offset, so each can be replayed alone (tests/terminal/test_vttest.py).
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import sys
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tui.terminal.emulator import TerminalEmulator  # noqa: E402

OUT = Path(__file__).resolve().parent / "corpus" / "vttest"
WIDTH, HEIGHT = 80, 24
QUIET = 0.6  # seconds without output: the screen is complete

# name -> keys: the main-menu choice, then per sub-menu the choices to visit (each followed by
# RETURN at every screen until the sub-menu is back), "0" leaving a sub-menu.
MENUS: dict[str, list[str]] = {
    "cursor": ["1"],
    "screen": ["2"],
    "charsets": ["3", "8", "9", "10", "11", "0"],
    "double": ["4"],
    "vt102": ["8"],
    "bugs": ["9", "1", "2", "7", "9", "0"],
    "iso6429": ["11", "5", "1", "2", "3", "4", "5", "6", "7", "8", "9", "0", "0"],
    "colors": ["11", "6", "2", "3", "4", "5", "6", "7", "8", "9", "0", "0"],
    "ecma48": ["11", "7", "2", "3", "6", "0", "0"],
    "vt220": ["11", "1", "2", "2", "3", "0", "0", "0"],
    "vt320": ["11", "2", "2", "1", "2", "0", "0", "0"],
    "altscreen": ["11", "8", "7", "3", "4", "5", "0", "0", "0"],
}


class Session:
    def __init__(self) -> None:
        pid, fd = pty.fork()
        if pid == 0:
            os.environ["TERM"] = "xterm"
            # 24x80.80: no 132-column passes (neither tmux nor corral switches, as xterm
            # by default; vttest's manual suggests this geometry for such terminals).
            os.execvp("vttest", ["vttest", "24x80.80"])
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", HEIGHT, WIDTH, 0, 0))
        self.data = bytearray()
        self.emu = TerminalEmulator(WIDTH, HEIGHT, respond=self.send)

    def send(self, data: bytes) -> None:
        os.write(self.fd, data)

    def settle(self, quiet: float = QUIET, limit: float = 20) -> None:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], quiet)
            if not ready:
                return
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.data += chunk
            self.emu.feed(chunk)

    def text(self) -> str:
        return "\n".join(self.emu.screen_text())

    def close(self) -> None:
        try:
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)
        os.close(self.fd)


def at_menu(text: str) -> bool:
    return "Enter choice number" in text


def record(name: str, keys: list[str]) -> list[dict]:
    s = Session()
    screens: list[dict] = []
    try:
        s.settle()
        for key in keys:
            s.send(key.encode() + b"\r")
            for _ in range(60):
                s.settle()
                text = s.text()
                if at_menu(text):
                    break
                prompt = next((line.strip() for line in reversed(text.split("\n"))
                               if line.strip()), "")
                screens.append({"offset": len(s.data), "prompt": prompt})
                s.send(b"\r")
        s.send(b"0\r")
        s.settle(quiet=0.3, limit=3)
    finally:
        s.close()
    (OUT / f"{name}.bin").write_bytes(bytes(s.data))
    (OUT / f"{name}.json").write_text(json.dumps(screens, indent=1) + "\n")
    print(f"{name}: {len(screens)} screens, {len(s.data)} bytes")
    return screens


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    names = sys.argv[1:] or list(MENUS)
    for name in names:
        record(name, MENUS[name])


if __name__ == "__main__":
    main()
