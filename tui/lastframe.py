"""The last frame: corral's screen as it was when it last quit, painted dimmed, and marked
``last run · refreshing…``, by the ``corral`` command before it imports anything else.

A start needs ~0.5 s of CPU before Textual paints its first frame (imports, styles, the
table's rows); this frame is on the screen in the time Python needs to start. Textual then
paints over it with current rows. It is used only when it can only be right: the same
terminal size, ``TERM``, ``COLORTERM`` and ``NO_COLOR``, the same configuration file
(unchanged since), ``--theme`` and ``--remote``. It is a private file beside the inventory
cache (``warm_start = false`` turns both off), and only text and CSI sequences (colours,
cursor moves) are written from it: anything else in it means it is not corral's, and it
is not used.

Standard library and :mod:`backends.paths` only: this runs before Textual and corral's
other modules are imported.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import shutil
import struct
import sys
import termios
from collections.abc import Mapping, Sequence
from pathlib import Path

from .locations import cache_dir, config_digest

VERSION = 1
MARK = " last run · refreshing… "
"""Written over the top right corner: the frame is not live (and says so in words)."""
_SAFE = re.compile(r"(?:[^\x00-\x1f\x7f-\x9f]|[\r\n]|\x1b\[[0-9;:]*[mH])*")
"""Printable text, CR/LF, colours and attributes (SGR) and cursor moves: what Textual
writes for a frame. Nothing that changes a mode or makes the terminal answer."""
_SGR = re.compile(r"\x1b\[([0-9;:]*)m")
ENTER = "\x1b[?1049h\x1b[?25l"
"""The alternate screen (Textual enters it again: a no-op) and no cursor."""
LEAVE = "\x1b[?1049l\x1b[?25h"


def frame_path(env: Mapping[str, str], config_path: Path) -> Path:
    return cache_dir(env) / f"frame-{config_digest(config_path)}.ansi"


def key(env: Mapping[str, str], config_path: Path, size: os.terminal_size,
        theme: str | None, remotes: Sequence[str] | None) -> dict:
    """What must be the same for a saved frame to be this start's."""
    try:
        mtime = Path(config_path).expanduser().stat().st_mtime_ns
    except OSError:
        mtime = 0
    return {"version": VERSION, "size": [size.columns, size.lines],
            "term": env.get("TERM", ""), "colorterm": env.get("COLORTERM", ""),
            "no_color": env.get("NO_COLOR", ""), "theme": theme or "",
            "remotes": sorted(remotes or ()), "config": str(config_path), "mtime": mtime}


class Spec:
    """What the app needs to save its last frame for the next start like this one."""

    def __init__(self, env: Mapping[str, str], config_path: Path, theme: str | None,
                 remotes: Sequence[str] | None) -> None:
        self.env, self.config_path = dict(env), config_path
        self.theme, self.remotes = theme, remotes

    def save(self, columns: int, lines: int, frame: str) -> None:
        size = os.terminal_size((columns, lines))
        save(frame_path(self.env, self.config_path),
             key(self.env, self.config_path, size, self.theme, self.remotes), frame)

    def forget(self) -> None:
        frame_path(self.env, self.config_path).unlink(missing_ok=True)


def dimmed(frame: str) -> str:
    """Every colour and attribute of ``frame`` with faint added (``2``)."""
    return _SGR.sub(lambda m: f"\x1b[{m.group(1) + ';' if m.group(1) else ''}2m", frame)


def save(path: Path, frame_key: dict, frame: str) -> None:
    """Keep ``frame`` (Textual's full render of the screen) for the next start, dimmed and
    marked: privately, atomically."""
    columns = frame_key["size"][0]
    mark = f"\x1b[1;{max(1, columns - len(MARK) + 1)}H\x1b[0;7m{MARK}\x1b[0m"
    # Right after the top line, not at the end: a terminal that shows the frame half
    # written (it is tens of KiB) must not show rows without the mark.
    first, newline, rest = dimmed(frame).partition("\n")
    payload = (json.dumps(frame_key, separators=(",", ":")) + "\n" + first + mark
               + newline + rest).encode()
    from backends.trust import write_private  # at quit: not on the way to the frame

    write_private(path, payload, mode=0o600)


def load(path: Path, frame_key: dict) -> str | None:
    """The saved frame when it is this start's (and safe to write), else None: only
    this user's private file in a checked directory (:func:`backends.paths.read_owned`;
    ``tui`` imports ``backends`` anyway)."""
    from backends.paths import UntrustedFile, read_owned

    try:
        data = read_owned(path, private=True, limit=4 << 20)
    except UntrustedFile as e:
        logging.getLogger(__name__).warning("the last frame was not painted: %s", e)
        return None
    except OSError:
        return None
    head, _, body = data.partition(b"\n")
    try:
        if json.loads(head) != frame_key:
            return None
        text = body.decode()
    except Exception:  # JSON, UTF-8, a header nested beyond recursion
        return None
    return text if _SAFE.fullmatch(text) else None


def _write(text: str) -> None:
    data = memoryview(text.encode())
    while data:
        data = data[os.write(sys.stdout.fileno(), data):]


class Painted:
    """The terminal while corral starts: in :func:`typeahead_modes` until the UI takes it
    (what is typed meanwhile waits for it, unseen and unchanged), and maybe the last
    frame on it; :meth:`done` puts things back."""

    def __init__(self, fd: int, attrs: list) -> None:
        self.fd = fd
        self.attrs = attrs
        """The terminal's modes before corral."""
        self.ui_ran = False
        """The UI's driver took the terminal (and leaves the alternate screen itself)."""
        self.entered = False
        """A frame was written (on the alternate screen)."""
        self.cooked = 0
        """Bytes typed before :func:`typeahead_modes` were set (Python was still
        starting): the line discipline had made each Enter (CR) a newline already."""

    def done(self) -> None:
        """The UI has ended, or never started: the screen (when the UI did not leave the
        alternate screen itself) and the terminal's modes as they were before corral."""
        global _painted
        _painted = None
        try:
            if self.entered and not self.ui_ran:
                _write(LEAVE)
        except OSError:
            pass  # the terminal is gone
        finally:
            try:
                termios.tcsetattr(self.fd, termios.TCSADRAIN, self.attrs)
            except termios.error:
                pass


_painted: Painted | None = None


def ui_started() -> list | None:
    """Called by the UI's terminal driver each time it takes the terminal (at start and
    after a suspend): the modes it must put back whenever it lets go of it are the ones
    from before the frame (echo on), not the quiet ones it found. None: no frame."""
    painted = _painted
    if painted is None:
        return None
    painted.ui_ran = True
    return painted.attrs


def take_cooked() -> int:
    """How many bytes at the head of the input were typed before corral took the terminal
    (each ``\\n`` among them was an Enter, made a newline by the terminal's ICRNL); asked
    once, by the UI's driver as it starts reading."""
    painted = _painted
    if painted is None:
        return 0
    cooked, painted.cooked = painted.cooked, 0
    return cooked


def uncook(data: bytes, cooked: int) -> tuple[bytes, int]:
    """``data`` read from the terminal with its first ``cooked`` bytes' newlines made the
    Enter (CR) they were typed as; and how many cooked bytes are still to come."""
    if cooked <= 0:
        return data, 0
    head = data[:cooked].replace(b"\n", b"\r")
    return head + data[cooked:], cooked - len(head)


def typeahead_modes(attrs: list) -> list:
    """The terminal's modes while corral starts: what is typed is neither echoed nor
    changed by the line discipline (no line editing, Enter stays a CR, no flow control),
    so that it reaches the UI byte for byte once it reads (tui/keyboard.py replays it in
    order). Ctrl+C still interrupts."""
    quiet = list(attrs)
    quiet[0] = attrs[0] & ~(termios.ICRNL | termios.INLCR | termios.IGNCR | termios.IXON)
    quiet[3] = attrs[3] & ~(termios.ECHO | termios.ICANON | termios.IEXTEN)
    cc = list(attrs[6])
    cc[termios.VMIN], cc[termios.VTIME] = 1, 0
    quiet[6] = cc
    return quiet


def _pending(fd: int) -> int:
    """Bytes waiting to be read on the terminal ``fd`` (0 when it cannot say)."""
    try:
        return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    except OSError:
        return 0


def paint(env: Mapping[str, str], config_path: Path, theme: str | None,
          remotes: Sequence[str] | None) -> Painted | None:
    """Take the terminal for the start (:func:`typeahead_modes`) and write the last frame
    if there is one for this start. None: no terminal, or another driver than corral's."""
    global _painted
    try:
        if env.get("TEXTUAL_DRIVER") or not (sys.stdin.isatty() and sys.stdout.isatty()):
            return None  # (another driver would not hand the terminal's modes back)
        fd = sys.stdin.fileno()
        attrs = termios.tcgetattr(fd)
    except (OSError, termios.error):
        return None
    painted = _painted = Painted(fd, attrs)
    try:
        termios.tcsetattr(fd, termios.TCSANOW, typeahead_modes(attrs))
        painted.cooked = _pending(fd)
        size = shutil.get_terminal_size()  # what Textual sizes its screen by (COLUMNS…)
        frame = load(frame_path(env, config_path), key(env, config_path, size, theme,
                                                         remotes))
        if frame is not None:
            painted.entered = True
            _write(ENTER + frame)
    except (OSError, termios.error):
        painted.done()
        return None
    except BaseException:  # Ctrl+C while a slow terminal takes the frame
        painted.done()
        raise
    return painted
