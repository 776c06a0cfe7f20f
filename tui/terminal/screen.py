"""The pyte screen and stream with corral's fixes, and the input pre-processing for what
pyte 0.8.2 mis-parses. Driven by :class:`~tui.terminal.emulator.TerminalEmulator`, which
the screen calls back (``_emu``) to keep lines that scroll off the top.
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from typing import TYPE_CHECKING

import pyte
from pyte import charsets as _cs
from pyte import modes as mo
from pyte.screens import Char, Margins, StaticDefaultDict, wcwidth

from .lines import row_runs

if TYPE_CHECKING:
    from .emulator import TerminalEmulator

# --------------------------------------------------------------------------------------------
# Pre-processing of what pyte gets wrong

# CSI with a <=> prefix, intermediate bytes or colon parameters: pyte leaks or mis-parses them.
NEEDS_FIX = re.compile(r"\x1b\[[?]?[0-9;]*[<=>:\x20-\x2f]")
CSI_FIX = re.compile(r"\x1b\[([<=>?]?)([0-9;:]*)([\x20-\x2f]*)([\x40-\x7e])")
# An escape sequence cut by the end of a chunk: held back until the rest arrives.
INCOMPLETE = re.compile(r"\x1b(?:\[[\x20-\x3f]*)?\Z")
_SECONDARY_DA = 9998  # internal marker: "CSI > c" is rewritten to "CSI 9998 c"


def _colon_sgr(params: str) -> str:
    """``38:2::r:g:b;4:3`` -> ``38;2;r;g;b;4``: ITU T.416 sub-parameters to what pyte reads."""
    out: list[str] = []
    for group in params.split(";"):
        if ":" not in group:
            out.append(group)
            continue
        sub = group.split(":")
        head = sub[0]
        if head in ("38", "48", "58"):
            if len(sub) >= 3 and sub[1] == "5":
                if head != "58":
                    out += [head, "5", sub[2] or "0"]
            elif len(sub) >= 5 and sub[1] == "2":
                rgb = sub[-3:] if len(sub) >= 6 else sub[2:5]
                if head != "58":
                    out += [head, "2"] + [v or "0" for v in rgb]
        elif head == "4":
            # Underline styles: 4:0 is off, 4:1..4:5 (single, double, curly...) are on.
            out.append("24" if sub[1:2] == ["0"] else "4")
        # Anything else with sub-parameters is unknown: dropped.
    return ";".join(out)


def fix_csi(m: re.Match) -> str:
    prefix, params, inter, final = m.groups()
    if prefix == ">" and final == "c" and not inter:
        return f"\x1b[{_SECONDARY_DA}c"
    if prefix in ("<", "=", ">") or inter:
        return ""  # modifyOtherKeys, DECSTR, DECSCUSR, ...: nothing pyte can use
    if ":" in params:
        if final == "m" and not prefix:
            return f"\x1b[{_colon_sgr(params)}m"
        return ""
    return m.group(0)


# --------------------------------------------------------------------------------------------
# The pyte screen


class CharCache(dict):
    """ch -> Char with fixed attributes (one ``_replace`` per distinct character)."""

    __slots__ = ("attrs",)

    def __init__(self, attrs: Char) -> None:
        super().__init__()
        self.attrs = attrs

    def __missing__(self, ch: str) -> Char:
        c = self[ch] = self.attrs._replace(data=ch)
        return c


LAT1 = _cs.LAT1_MAP
_PRIVATE_ALT = (1049, 1047, 47)
_MOUSE_MODES = (9, 1000, 1001, 1002, 1003, 1005, 1006, 1015)


class Screen(pyte.Screen):
    """pyte.Screen with corral's fixes. Private: driven by :class:`TerminalEmulator`."""

    def __init__(self, emulator: TerminalEmulator, columns: int, lines: int) -> None:
        self._emu = emulator
        self.alternate = False
        self._main_buffer = None
        self._alt_cursor = None
        self.bracketed_paste = False
        self.app_cursor = False
        self.mouse_modes: set[int] = set()
        self._char_caches: dict[Char, CharCache] = {}
        self._last_char = ""
        super().__init__(columns, lines)

    def _new_buffer(self) -> defaultdict:
        return defaultdict(lambda: StaticDefaultDict(self.default_char))

    # -- drawing ---------------------------------------------------------------------------

    def draw(self, data: str) -> None:
        if self.charset or self.g0_charset is not LAT1:
            data = data.translate(self.g1_charset if self.charset else self.g0_charset)
        cursor = self.cursor
        mode = self.mode
        if data.isascii() and data.isprintable() and mo.DECAWM in mode and mo.IRM not in mode:
            # Fast ASCII path: same result as the per-character loop below.
            attrs = cursor.attrs
            cache = self._char_caches.get(attrs)
            if cache is None:
                if len(self._char_caches) > 1024:
                    self._char_caches.clear()
                cache = self._char_caches[attrs] = CharCache(attrs)
            columns = self.columns
            x = cursor.x
            n = len(data)
            i = 0
            getc = cache.__getitem__
            while i < n:
                if x >= columns:
                    self.dirty.add(cursor.y)
                    self.carriage_return()
                    self.linefeed()
                    x = cursor.x
                take = min(columns - x, n - i)
                line = self.buffer[cursor.y]
                line.update(zip(range(x, x + take), map(getc, data[i:i + take])))
                x += take
                i += take
            cursor.x = x
            self.dirty.add(cursor.y)
            self._last_char = data[-1]
            return

        for char in data:
            width = wcwidth(char)
            if width == 0 and unicodedata.combining(char):
                # Combine with the previous character on this (or the previous) line.
                line = self.buffer[cursor.y]
                if cursor.x:
                    x = cursor.x - 1
                    if line[x].data == "" and x:  # the stub of a wide character
                        x -= 1
                    last = line[x]
                    line[x] = last._replace(data=unicodedata.normalize("NFC", last.data + char))
                elif cursor.y:
                    prev = self.buffer[cursor.y - 1]
                    last = prev[self.columns - 1]
                    prev[self.columns - 1] = last._replace(
                        data=unicodedata.normalize("NFC", last.data + char))
                continue
            if width <= 0:
                # pyte 0.8.2 stops the whole chunk here (``break``): ZWJ, VS16 and control
                # characters would eat the rest of the text. Skip the character instead.
                continue
            if cursor.x + width > self.columns:
                if mo.DECAWM in mode:
                    # A wide character that does not fit wraps whole (xterm, tmux).
                    self.dirty.add(cursor.y)
                    self.carriage_return()
                    self.linefeed()
                else:
                    cursor.x = self.columns - width
            if mo.IRM in mode:
                self.insert_characters(width)
            line = self.buffer[cursor.y]
            line[cursor.x] = cursor.attrs._replace(data=char)
            if width == 2 and cursor.x + 1 < self.columns:
                line[cursor.x + 1] = cursor.attrs._replace(data="")
            cursor.x = min(cursor.x + width, self.columns)
            self._last_char = char
        self.dirty.add(cursor.y)

    def repeat_last(self, count: int = 1, *args, **kwargs) -> None:
        """REP: the last graphic character again, ``count`` times."""
        if self._last_char:
            self.draw(self._last_char * min(max(count, 1), self.columns * self.lines))

    # -- scrolling and scrollback ----------------------------------------------------------

    def scroll_up(self, count: int = 1, *args, **kwargs) -> None:
        """SU: the scrolling region moves up ``count`` lines; the cursor stays."""
        top, bottom = self.margins or Margins(0, self.lines - 1)
        count = min(max(count, 1), bottom - top + 1)
        buffer = self.buffer
        for y in range(top, bottom + 1):
            if y + count <= bottom and y + count in buffer:
                buffer[y] = buffer.pop(y + count)
            else:
                buffer.pop(y, None)
        self.dirty.update(range(top, bottom + 1))

    def scroll_down(self, count: int = 1, *args, **kwargs) -> None:
        """SD: the scrolling region moves down ``count`` lines; the cursor stays."""
        top, bottom = self.margins or Margins(0, self.lines - 1)
        count = min(max(count, 1), bottom - top + 1)
        buffer = self.buffer
        for y in range(bottom, top - 1, -1):
            if y - count >= top and y - count in buffer:
                buffer[y] = buffer.pop(y - count)
            else:
                buffer.pop(y, None)
        self.dirty.update(range(top, bottom + 1))

    def sco_save_cursor(self, *args, **kwargs) -> None:
        if not kwargs.get("private"):
            self.save_cursor()

    def sco_restore_cursor(self, *args, **kwargs) -> None:
        if not kwargs.get("private"):
            self.restore_cursor()

    def index(self) -> None:
        cursor_y = self.cursor.y
        if cursor_y == self.lines - 1 and not self.alternate:
            margins = self.margins
            if margins is None or (margins.top == 0 and margins.bottom == self.lines - 1):
                self._emu._push_history(row_runs(self.buffer.get(0) or {}, self.columns))
        super().index()

    def erase_in_display(self, how: int = 0, *args, **kwargs) -> None:
        if how == 3:
            self._emu._history.clear()  # xterm/tmux: ED 3 erases the saved lines only
            self._emu._history_changed = True
            return
        # pyte only rewrites the cells a row happens to hold (``for x in line``), so an erase
        # with a background colour left unwritten cells default. Fill whole rows (xterm's BCE).
        if how == 0:
            interval = range(self.cursor.y + 1, self.lines)
        elif how == 1:
            interval = range(self.cursor.y)
        elif how == 2:
            interval = range(self.lines)
        else:
            return
        self.dirty.update(interval)
        attrs = self.cursor.attrs
        blank = attrs == self.default_char
        columns = self.columns
        for y in interval:
            line = self.buffer[y]
            line.clear()
            if not blank:
                line.update(dict.fromkeys(range(columns), attrs))
        if how == 0 or how == 1:
            self.erase_in_line(how)

    # -- modes -------------------------------------------------------------------------------

    def set_mode(self, *modes: int, **kwargs) -> None:
        if kwargs.get("private"):
            modes = self._private_modes(modes, True)
            if not modes:
                return
        super().set_mode(*modes, **kwargs)

    def reset_mode(self, *modes: int, **kwargs) -> None:
        if kwargs.get("private"):
            modes = self._private_modes(modes, False)
            if not modes:
                return
        super().reset_mode(*modes, **kwargs)

    def _private_modes(self, modes: tuple[int, ...], on: bool) -> tuple[int, ...]:
        rest = []
        for m in modes:
            if m in _PRIVATE_ALT:
                if on:
                    self._enter_alternate(save_cursor=(m == 1049))
                else:
                    self._leave_alternate(restore_cursor=(m == 1049))
            elif m == 2004:
                self.bracketed_paste = on
            elif m == 1:
                self.app_cursor = on
            elif m in _MOUSE_MODES:
                (self.mouse_modes.add if on else self.mouse_modes.discard)(m)
            elif m == 3:
                pass  # DECCOLM: ignored, as xterm (allowColumnMode off) and tmux do
            else:
                rest.append(m)
        return tuple(rest)

    def _enter_alternate(self, save_cursor: bool) -> None:
        if self.alternate:
            return
        if save_cursor:
            self._alt_cursor = (self.cursor.x, self.cursor.y, self.cursor.attrs)
        self._main_buffer = self.buffer
        self.buffer = self._new_buffer()
        self.alternate = True
        self.dirty.update(range(self.lines))

    def _leave_alternate(self, restore_cursor: bool) -> None:
        if not self.alternate:
            return
        self.buffer = self._main_buffer
        self._main_buffer = None
        self.alternate = False
        if restore_cursor and self._alt_cursor is not None:
            x, y, attrs = self._alt_cursor
            self.cursor.x = min(x, self.columns - 1)
            self.cursor.y = min(y, self.lines - 1)
            self.cursor.attrs = attrs
        self._alt_cursor = None
        self.dirty.update(range(self.lines))

    def reset(self) -> None:
        if getattr(self, "alternate", False):
            self._leave_alternate(restore_cursor=False)
        self.bracketed_paste = False
        self.app_cursor = False
        self.mouse_modes = set()
        super().reset()

    # -- queries -------------------------------------------------------------------------------

    def report_device_attributes(self, mode: int = 0, *args, **kwargs) -> None:
        if mode == _SECONDARY_DA:
            self.write_process_input("\x1b[>1;10;0c")  # VT220, firmware 10
        elif mode == 0 and not kwargs.get("private"):
            self.write_process_input("\x1b[?62;22c")  # VT220 with ANSI colour

    def report_device_status(self, mode: int = 0, *args, **kwargs) -> None:
        if mode == 5:
            self.write_process_input("\x1b[0n")
        elif mode == 6:
            x = min(self.cursor.x, self.columns - 1) + 1
            y = self.cursor.y + 1
            if mo.DECOM in self.mode and self.margins is not None:
                y -= self.margins.top
            prefix = "?" if kwargs.get("private") else ""
            self.write_process_input(f"\x1b[{prefix}{y};{x}R")

    def write_process_input(self, data: str) -> None:
        self._emu._answer(data.encode())

    # -- resize ----------------------------------------------------------------------------

    def resize(self, lines: int | None = None, columns: int | None = None) -> None:
        lines = max(1, lines or self.lines)
        columns = max(1, columns or self.columns)
        if lines == self.lines and columns == self.columns:
            return
        old_lines, old_columns = self.lines, self.columns
        if lines < old_lines:
            self._shrink(self.buffer, self.cursor, old_lines, lines, push=not self.alternate)
            if self.alternate and self._main_buffer is not None:
                saved = self._alt_cursor
                y = saved[1] if saved else old_lines - 1
                shim = type("C", (), {"y": y})()
                self._shrink(self._main_buffer, shim, old_lines, lines, push=True)
                if saved:
                    self._alt_cursor = (saved[0], shim.y, saved[2])
        if columns < old_columns:
            for buffer in (self.buffer, self._main_buffer or {}):
                for line in buffer.values():
                    for x in [x for x in line if x >= columns]:
                        del line[x]
        self.lines, self.columns = lines, columns
        self.margins = None
        if columns > old_columns:
            self.tabstops.update(range(8 * ((old_columns + 7) // 8), columns, 8))
        self.tabstops = {t for t in self.tabstops if t < columns}
        self.cursor.x = min(self.cursor.x, columns - 1)
        self.cursor.y = min(self.cursor.y, lines - 1)
        self.dirty = set(range(lines))

    def _shrink(self, buffer: dict, cursor, old: int, new: int, push: bool) -> None:
        """Drop ``old - new`` rows: blank rows below the cursor first, then rows from the top,
        which go to the scrollback (what xterm does)."""
        excess = old - new
        y = old - 1
        while excess and y > cursor.y and not row_runs(buffer.get(y) or {}, self.columns):
            buffer.pop(y, None)
            excess -= 1
            y -= 1
        if excess:
            if push:
                for row in range(excess):
                    self._emu._push_history(row_runs(buffer.get(row) or {}, self.columns))
            rows = {r - excess: buffer[r] for r in list(buffer) if r >= excess}
            buffer.clear()
            buffer.update(rows)
            cursor.y = max(0, cursor.y - excess)
        for r in [r for r in buffer if r >= new]:
            del buffer[r]


class Stream(pyte.Stream):
    """A stream whose parser survives any input: a handler or parse error drops the sequence.

    It also dispatches what pyte 0.8.2 ignores but ncurses and shells send: SU/SD (``CSI S``,
    ``CSI T``), REP (``CSI b``, in xterm-256color's terminfo) and SCOSC/SCORC (``CSI s``,
    ``CSI u``).
    """

    csi = dict(
        pyte.Stream.csi,
        S="scroll_up", T="scroll_down", b="repeat_last", s="sco_save_cursor",
        u="sco_restore_cursor",
    )
    events = pyte.Stream.events | frozenset(
        ["scroll_up", "scroll_down", "repeat_last", "sco_save_cursor", "sco_restore_cursor"])

    def _send_to_parser(self, data: str):
        try:
            return self._parser.send(data)
        except Exception:  # noqa: BLE001 - malformed input must never stop the console
            self._initialize_parser()
            return self._taking_plain_text
