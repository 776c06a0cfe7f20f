"""A fast terminal emulator on top of pyte, for console panes.

Pure logic: no Textual imports (Rich is used only for the ``Segment``/``Style`` objects a row
renders to). What it adds to ``pyte.Screen`` (docs/protocols.md, "Terminal emulation"):

- incremental UTF-8 and a feed that never raises (a malformed sequence is dropped, like a real
  terminal does, instead of killing the parser);
- fixes for pyte's red flags: zero-width characters no longer drop the rest of a chunk, the colon
  SGR form is rewritten to the semicolon form, the alternate screen (``?1049``/``?1047``/``?47``)
  saves and restores the main screen, ``CSI > … c`` (secondary DA) is answered instead of being
  taken for a primary DA, ``CSI > 4 ; 2 m`` (vim's modifyOtherKeys) is no longer taken for SGR,
  a wide character at the last column wraps, ``ED 3`` clears the scrollback only, ``DECCOLM`` is
  ignored (as in xterm by default and tmux), resize keeps the cursor on screen;
- answers to DSR/CPR and DA through a ``respond(bytes)`` callback;
- bracketed-paste and application-cursor-keys flags;
- a scrollback of styled lines;
- dirty-row tracking and row rendering to cached Rich styles;
- a fast path for floods of simple lines (see ``_feed_fast``): the result is identical to
  feeding everything through pyte, at ~20x the speed.
"""

from __future__ import annotations

import codecs
import re
import unicodedata
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from itertools import groupby
from operator import itemgetter
from typing import NamedTuple

import pyte
from pyte import charsets as _cs
from pyte import graphics as _g
from pyte import modes as mo
from pyte.screens import Char, Margins, StaticDefaultDict, wcwidth
from rich.color import Color
from rich.segment import Segment
from rich.style import Style

__all__ = [
    "ANSI_DARK",
    "ANSI_LIGHT",
    "DEFAULT_KEY",
    "TerminalEmulator",
    "ansi_palette",
]

# --------------------------------------------------------------------------------------------
# Palettes

ANSI_NAMES = (
    "black", "red", "green", "yellow", "blue", "magenta", "cyan", "white",
    "brightblack", "brightred", "brightgreen", "brightyellow",
    "brightblue", "brightmagenta", "brightcyan", "brightwhite",
)

ANSI_DARK: dict[str, str] = dict(zip(ANSI_NAMES, (
    "#1C232C", "#E06C75", "#7BC47F", "#E5C07B", "#5FA8D3", "#C678DD", "#56B6C2", "#D8DEE9",
    "#5C6773", "#FF7A85", "#98D99B", "#F2D28F", "#82C0E6", "#D7A1E7", "#7FD0DA", "#F4F6FA",
)))
"""16 ANSI colours for corral-dark (and any dark theme): readable on #151A21."""

ANSI_LIGHT: dict[str, str] = dict(zip(ANSI_NAMES, (
    "#1E2329", "#B3261E", "#2E7D32", "#8A6100", "#1F6FA3", "#8E3FA8", "#0E7C86", "#C9CED6",
    "#5F6B7A", "#D93B30", "#3E9B43", "#A87A00", "#2C85C2", "#A855C7", "#1496A1", "#F7F8FA",
)))
"""16 ANSI colours for corral-light (and any light theme): readable on #F7F8FA."""


def ansi_palette(dark: bool) -> dict[str, str]:
    """The ANSI palette for a theme: pass ``app.current_theme.dark``."""
    return ANSI_DARK if dark else ANSI_LIGHT


# pyte colour names -> palette names ("brown" is pyte's yellow; 105 is misspelt in pyte 0.8.2).
_NAME_FIX = {"brown": "yellow", "brightbrown": "brightyellow", "bfightmagenta": "brightmagenta"}
# 256-colour indexes 0-15 arrive as xterm's hex values: give them back to the palette.
_HEX16 = {hex_: ANSI_NAMES[i] for i, hex_ in enumerate(_g.FG_BG_256[:16])}

# --------------------------------------------------------------------------------------------
# Lines

Key = tuple  # (fg, bg, bold, italics, underscore, strikethrough, reverse, blink)
Run = tuple  # (text, Key)

DEFAULT_KEY: Key = ("default", "default", False, False, False, False, False, False)
"""The attribute key of an unwritten cell."""


def _merge_runs(runs: Iterable[Run]) -> tuple[Run, ...]:
    """Canonical form of a line: adjacent runs with the same key merged, empty runs dropped,
    trailing default blanks trimmed. Two lines that look the same compare equal."""
    out: list[Run] = []
    last_key = None
    for run in runs:
        text, key = run
        if not text:
            continue
        if key is last_key or key == last_key:
            out[-1] = (out[-1][0] + text, last_key)
        else:
            out.append(run)
            last_key = key
    while out and out[-1][1] == DEFAULT_KEY:
        text = out[-1][0].rstrip(" ")
        if text:
            out[-1] = (text, DEFAULT_KEY)
            break
        out.pop()
    return tuple(out)


_attr_key = itemgetter(1, 2, 3, 4, 5, 6, 7, 8)


def _row_runs(line: dict, columns: int) -> tuple[Run, ...]:
    """A pyte buffer row as canonical runs (wide-character stubs skipped, orphans as spaces)."""
    if not line:
        return ()
    last = max(line)
    if last >= columns:
        last = columns - 1
    get = line.get
    default = line.default
    cells = [get(x, default) for x in range(last + 1)]
    datas = "".join([c[0] for c in cells])
    if len(datas) == len(cells) and datas.isascii():
        # Common case: one character per cell; group the attributes in C.
        runs: list[Run] = []
        pos = 0
        for key, group in groupby(cells, _attr_key):
            n = len(list(group))
            runs.append((datas[pos:pos + n], key))
            pos += n
        return _merge_runs(runs)
    runs = []
    prev_wide = False
    for c in cells:
        data = c.data
        if data == "":
            if prev_wide:
                prev_wide = False
                continue
            data = " "
        else:
            prev_wide = not data.isascii() and wcwidth(data[0]) == 2
        runs.append((data, c[1:]))
    return _merge_runs(runs)


class Selection(NamedTuple):
    """A selected range in view coordinates: absolute lines (scrollback then screen)."""

    start_line: int
    start_x: int
    end_line: int
    end_x: int


# --------------------------------------------------------------------------------------------
# Pre-processing of what pyte gets wrong

# CSI with a <=> prefix, intermediate bytes or colon parameters: pyte leaks or mis-parses them.
_NEEDS_FIX = re.compile(r"\x1b\[[?]?[0-9;]*[<=>:\x20-\x2f]")
_CSI_FIX = re.compile(r"\x1b\[([<=>?]?)([0-9;:]*)([\x20-\x2f]*)([\x40-\x7e])")
# An escape sequence cut by the end of a chunk: held back until the rest arrives.
_INCOMPLETE = re.compile(r"\x1b(?:\[[\x20-\x3f]*)?\Z")
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


def _fix_csi(m: re.Match) -> str:
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


class _CharCache(dict):
    """ch -> Char with fixed attributes (one ``_replace`` per distinct character)."""

    __slots__ = ("attrs",)

    def __init__(self, attrs: Char) -> None:
        super().__init__()
        self.attrs = attrs

    def __missing__(self, ch: str) -> Char:
        c = self[ch] = self.attrs._replace(data=ch)
        return c


_LAT1 = _cs.LAT1_MAP
_PRIVATE_ALT = (1049, 1047, 47)
_MOUSE_MODES = (9, 1000, 1001, 1002, 1003, 1005, 1006, 1015)


class _Screen(pyte.Screen):
    """pyte.Screen with corral's fixes. Private: driven by :class:`TerminalEmulator`."""

    def __init__(self, emulator: TerminalEmulator, columns: int, lines: int) -> None:
        self._emu = emulator
        self.alternate = False
        self._main_buffer = None
        self._alt_cursor = None
        self.bracketed_paste = False
        self.app_cursor = False
        self.mouse_modes: set[int] = set()
        self._char_caches: dict[Char, _CharCache] = {}
        self._last_char = ""
        super().__init__(columns, lines)

    def _new_buffer(self) -> defaultdict:
        return defaultdict(lambda: StaticDefaultDict(self.default_char))

    # -- drawing ---------------------------------------------------------------------------

    def draw(self, data: str) -> None:
        if self.charset or self.g0_charset is not _LAT1:
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
                cache = self._char_caches[attrs] = _CharCache(attrs)
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
                self._emu._push_history(_row_runs(self.buffer.get(0) or {}, self.columns))
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
        while excess and y > cursor.y and not _row_runs(buffer.get(y) or {}, self.columns):
            buffer.pop(y, None)
            excess -= 1
            y -= 1
        if excess:
            if push:
                for row in range(excess):
                    self._emu._push_history(_row_runs(buffer.get(row) or {}, self.columns))
            rows = {r - excess: buffer[r] for r in list(buffer) if r >= excess}
            buffer.clear()
            buffer.update(rows)
            cursor.y = max(0, cursor.y - excess)
        for r in [r for r in buffer if r >= new]:
            del buffer[r]


class _Stream(pyte.Stream):
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


# --------------------------------------------------------------------------------------------
# Fast path

# What ends a "simple" stretch (printable ASCII, TAB, CR, LF, SGR): two patterns, each
# much faster to search than their alternation.
_NOT_SIMPLE_CHAR = re.compile(r"[^\x20-\x7e\t\r\n\x1b]")
_NOT_SIMPLE_ESC = re.compile(r"\x1b(?!\[[0-9;]*m)")
_SGR_SPLIT = re.compile(r"\x1b\[([0-9;]*)m")
_TOKENS = re.compile(r"([\x20-\x7e]+)|\x1b\[([0-9;]*)m|(\r)|(\t)")


# --------------------------------------------------------------------------------------------
# The emulator


class TerminalEmulator:
    """A terminal screen fed with bytes from a console, rendered row by row.

    Args:
        columns: width in cells.
        lines: height in rows.
        scrollback: how many lines scrolled off the top are kept.
        respond: called with the bytes the terminal answers to queries (DSR/CPR, DA); send
            them to the guest. Called synchronously from :meth:`feed`.
        palette: the 16 ANSI colours (see :func:`ansi_palette`); defaults to the dark one.
        fast_path: the flood fast path (on by default; off gives the plain pyte result, for
            tests and benchmarks).
    """

    FAST_PATH_MIN_LINES = 8
    """A stretch of simple lines shorter than ``lines + this`` goes through pyte."""

    def __init__(
        self,
        columns: int = 80,
        lines: int = 24,
        *,
        scrollback: int = 5000,
        respond: Callable[[bytes], None] | None = None,
        palette: dict[str, str] | None = None,
        fast_path: bool = True,
    ) -> None:
        self._history: deque[tuple[Run, ...]] = deque(maxlen=max(0, scrollback))
        self._history_changed = False
        self._respond = respond
        self._answers: list[bytes] = []
        self.fast_path = fast_path
        self._screen = _Screen(self, max(1, columns), max(1, lines))
        self._stream = _Stream(self._screen)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._held = ""
        self._sgr_cache: dict[tuple[Char, str], tuple[Char, Key]] = {}
        self._palette = dict(palette or ANSI_DARK)
        self._style_cache: dict[Key, Style] = {}
        self._cursor_style_cache: dict[Key, Style] = {}
        self._last_cursor: tuple[int, int, bool] | None = None
        self.bytes_fed = 0
        self.lines_scrolled = 0
        """Lines pushed to the scrollback so far (a view scrolled back adds the difference
        to its offset to stay on the same text)."""

    # -- properties ----------------------------------------------------------------------------

    @property
    def columns(self) -> int:
        return self._screen.columns

    @property
    def lines(self) -> int:
        return self._screen.lines

    @property
    def cursor(self) -> tuple[int, int]:
        """(x, y) of the cursor, 0-based; x is clamped to the last column."""
        s = self._screen
        return min(s.cursor.x, s.columns - 1), s.cursor.y

    @property
    def cursor_visible(self) -> bool:
        return not self._screen.cursor.hidden

    @property
    def bracketed_paste(self) -> bool:
        """The guest enabled bracketed paste (``CSI ? 2004 h``)."""
        return self._screen.bracketed_paste

    @property
    def app_cursor_keys(self) -> bool:
        """The guest enabled application cursor keys (DECCKM, ``CSI ? 1 h``)."""
        return self._screen.app_cursor

    @property
    def alternate_screen(self) -> bool:
        return self._screen.alternate

    @property
    def mouse_reporting(self) -> bool:
        """The guest asked for mouse reports (not forwarded; informational)."""
        return bool(self._screen.mouse_modes)

    @property
    def title(self) -> str:
        return self._screen.title

    @property
    def history_size(self) -> int:
        """Lines in the scrollback."""
        return len(self._history)

    # -- input ---------------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Feed bytes from the guest. Never raises; a UTF-8 sequence may span calls."""
        self.bytes_fed += len(data)
        self.feed_text(self._decoder.decode(data))

    def feed_text(self, text: str) -> None:
        """Feed decoded text (used by :meth:`feed`)."""
        if self._held:
            text = self._held + text
            self._held = ""
        cut = text.rfind("\x1b", max(0, len(text) - 64))
        if cut >= 0 and _INCOMPLETE.match(text, cut):
            self._held = text[cut:]
            text = text[:cut]
        if not text:
            return
        if _NEEDS_FIX.search(text):
            text = _CSI_FIX.sub(_fix_csi, text)
        try:
            if self.fast_path and text.count("\n") >= self.lines + self.FAST_PATH_MIN_LINES:
                self._feed_fast(text)
            else:
                self._stream.feed(text)
        except Exception:  # noqa: BLE001 - belt and braces: never let output kill the UI
            self._stream._initialize_parser()
        self._flush_answers()

    def flush(self) -> None:
        """Process an escape sequence held back at the end of the last chunk (call when no
        more data is pending, so a lone ESC is not kept waiting)."""
        if self._held:
            text, self._held = self._held, ""
            try:
                self._stream.feed(text)
            except Exception:  # noqa: BLE001
                self._stream._initialize_parser()
            self._flush_answers()

    def resize(self, columns: int, lines: int) -> None:
        """Resize the screen (rows dropped at the top go to the scrollback)."""
        self._screen.resize(lines=lines, columns=columns)

    def reset(self) -> None:
        """Full reset (RIS); the scrollback is kept."""
        self._screen.reset()

    # -- answers -------------------------------------------------------------------------------

    def _answer(self, data: bytes) -> None:
        self._answers.append(data)

    def _flush_answers(self) -> None:
        if self._answers:
            answers, self._answers = self._answers, []
            if self._respond is not None:
                for a in answers:
                    self._respond(a)

    # -- scrollback ----------------------------------------------------------------------------

    def _push_history(self, runs: tuple[Run, ...]) -> None:
        self._history.append(runs)
        self._history_changed = True
        self.lines_scrolled += 1

    def clear_history(self) -> None:
        self._history.clear()
        self._history_changed = True

    def history_text(self) -> list[str]:
        """The scrollback as plain text, oldest first."""
        return ["".join(t for t, _ in runs) for runs in self._history]

    # -- the fast path -------------------------------------------------------------------------

    def _fast_ok(self) -> bool:
        s = self._screen
        m = s.margins
        mode = s.mode
        return (
            self._stream._taking_plain_text is True
            and not s.alternate
            and (m is None or (m.top == 0 and m.bottom == s.lines - 1))
            and s.cursor.y == s.lines - 1
            and s.columns >= 2
            and mo.DECAWM in mode
            and mo.IRM not in mode
            and mo.LNM not in mode
            and mo.DECSCNM not in mode
            and s.charset == 0
            and s.g0_charset is _LAT1
            and not _row_runs(s.buffer.get(s.lines - 1) or {}, s.columns)
        )

    def _feed_fast(self, text: str) -> None:
        """Feed ``text``, skipping pyte for long stretches of simple lines.

        A stretch is a run of printable ASCII, TAB, CR, LF and SGR sequences. Inside one, once
        pyte has taken the first lines and the cursor sits on a blank bottom row of a
        full-screen scrolling region (parser in ground state, auto-wrap on, no insert or
        newline mode), every further complete line is laid out here with pyte's own rules
        (wrap at the last column, tab stops, CR overwrites) and goes to the scrollback
        directly; the screen then gets the last rows and pyte the partial line after them.
        SGR sequences are applied through the screen's own ``select_graphic_rendition`` (cached),
        so the cursor attributes end up as pyte would leave them.
        """
        feed = self._stream.feed
        need = self.lines + self.FAST_PATH_MIN_LINES
        fed = 0
        pos = 0
        n = len(text)
        bad_char = bad_esc = -1
        while pos < n:
            if bad_char < pos:
                m = _NOT_SIMPLE_CHAR.search(text, pos)
                bad_char = m.start() if m else n
            if bad_esc < pos:
                m = _NOT_SIMPLE_ESC.search(text, pos)
                bad_esc = m.start() if m else n
            end = min(bad_char, bad_esc)
            if end - pos > need * 2 and text.count("\n", pos, end) >= need:
                # Let pyte take lines until the cursor reaches a blank bottom row.
                cut = text.index("\n", pos) + 1
                feed(text[fed:cut])
                fed = cut
                for _ in range(4):
                    if self._fast_ok():
                        break
                    if self._stream._taking_plain_text is not True:
                        break
                    steps = max(1, self.lines - 1 - self._screen.cursor.y)
                    for _ in range(steps):
                        nxt = text.find("\n", fed, end)
                        if nxt < 0:
                            break
                        feed(text[fed:nxt + 1])
                        fed = nxt + 1
                last = text.rfind("\n", fed, end) + 1
                if last > fed and self._fast_ok() and text.count("\n", fed, last) >= self.FAST_PATH_MIN_LINES:
                    self._fast_lines(text[fed:last - 1])
                    fed = last
            pos = end + 1
        if fed < n:
            feed(text[fed:])

    def _sgr(self, attrs: Char, params: str) -> tuple[Char, Key]:
        """Cursor attributes after ``CSI params m``, computed by pyte itself (cached)."""
        k = (attrs, params)
        r = self._sgr_cache.get(k)
        if r is None:
            s = self._screen
            values = [min(int(p or 0), 9999) for p in params.split(";")]
            saved = s.cursor.attrs
            s.cursor.attrs = attrs
            try:
                s.select_graphic_rendition(*values)
            except Exception:  # noqa: BLE001 - pyte's parser would drop it too
                s.cursor.attrs = attrs
            new = s.cursor.attrs
            s.cursor.attrs = saved
            r = (new, tuple(new[1:]))
            if len(self._sgr_cache) > 4096:
                self._sgr_cache.clear()
            self._sgr_cache[k] = r
        return r

    def _next_tab(self, x: int) -> int:
        s = self._screen
        for stop in sorted(s.tabstops):
            if x < stop:
                return stop
        return s.columns - 1

    def _fast_lines(self, block: str) -> None:
        """Lay out complete simple lines (``block`` = lines joined by LF, no final LF)."""
        s = self._screen
        columns = s.columns
        cursor = s.cursor
        x = cursor.x
        attrs = cursor.attrs
        key = tuple(attrs[1:])
        rows: list[list[Run]] = []
        append_row = rows.append
        last_text = ""
        sgr = self._sgr
        split = _SGR_SPLIT.split
        for line in block.split("\n"):
            cr_end = line.endswith("\r")
            body = line[:-1] if cr_end else line
            if "\t" not in body and "\r" not in body:
                row: list[Run] = []
                if x and x < columns:
                    row.append((" " * x, DEFAULT_KEY))
                if "\x1b" in body:
                    parts = split(body)
                    pairs = zip(parts[1::2], parts[2::2])
                    body = parts[0]
                else:
                    pairs = ()
                while True:
                    if body:
                        last_text = body
                        n = len(body)
                        if x + n <= columns:
                            row.append((body, key))
                            x += n
                        else:
                            p = body
                            while p:
                                if x >= columns:
                                    append_row(row)
                                    row = []
                                    x = 0
                                take = columns - x
                                row.append((p[:take], key))
                                x += len(p[:take])
                                p = p[take:]
                    for params, body in pairs:
                        attrs, key = sgr(attrs, params)
                        break
                    else:
                        break
                append_row(row)
                if cr_end:
                    x = 0
                continue
            # General case: tabs and carriage returns inside the line, cell by cell.
            cells: list[tuple[str, Key]] = []
            for tok in _TOKENS.finditer(line):
                chunk, params, cr, _tab = tok.groups()
                if chunk is not None:
                    last_text = chunk
                    for ch in chunk:
                        if x >= columns:
                            append_row(cells)
                            cells = []
                            x = 0
                        if x < len(cells):
                            cells[x] = (ch, key)
                        else:
                            if x > len(cells):
                                cells.extend([(" ", DEFAULT_KEY)] * (x - len(cells)))
                            cells.append((ch, key))
                        x += 1
                elif params is not None:
                    attrs, key = sgr(attrs, params)
                elif cr is not None:
                    x = 0
                else:
                    x = self._next_tab(x)
            append_row(cells)
        # Scroll the emitted rows through the screen.
        lines = s.lines
        buffer = s.buffer
        old = [buffer.get(y) for y in range(lines - 1)]
        e = len(rows)
        pushed = [_row_runs(old[y] or {}, columns) for y in range(min(e, lines - 1))]
        for r in rows[: max(0, e - (lines - 1))]:
            if len(r) == 1 and r[0][0] and (r[0][1] != DEFAULT_KEY or r[0][0][-1] != " "):
                pushed.append((r[0],))  # already canonical: one non-blank-ended run
            else:
                pushed.append(_merge_runs(r))
        if pushed:
            self._history.extend(pushed)
            self._history_changed = True
            self.lines_scrolled += len(pushed)
        keep_old = old[e:] if e < lines - 1 else []
        keep_new = rows[-(lines - 1):] if lines > 1 else []
        new_buffer = s._new_buffer()
        y = 0
        for line in keep_old:
            if line:
                new_buffer[y] = line
            y += 1
        default = s.default_char
        caches = s._char_caches
        for r in keep_new:
            d = StaticDefaultDict(default)
            cx = 0
            for text, k in r:
                a = Char(" ", *k)
                cache = caches.get(a)
                if cache is None:
                    cache = caches[a] = _CharCache(a)
                n = len(text)
                d.update(zip(range(cx, cx + n), map(cache.__getitem__, text)))
                cx += n
            new_buffer[y] = d
            y += 1
        s.buffer = new_buffer
        if last_text:
            s._last_char = last_text[-1]
        cursor.x = x
        cursor.attrs = attrs
        s.dirty.update(range(lines))

    # -- output for tests and copying ----------------------------------------------------------

    def screen_text(self) -> list[str]:
        """The visible lines as text (each rstripped; wide-character stubs skipped)."""
        s = self._screen
        return ["".join(t for t, _ in _row_runs(s.buffer.get(y) or {}, s.columns)).rstrip()
                for y in range(s.lines)]

    def screen_runs(self) -> list[tuple[Run, ...]]:
        """The visible lines as canonical styled runs."""
        s = self._screen
        return [_row_runs(s.buffer.get(y) or {}, s.columns) for y in range(s.lines)]

    def history_runs(self) -> list[tuple[Run, ...]]:
        return list(self._history)

    def state(self) -> tuple:
        """Everything that decides future output: for fast == slow comparisons."""
        s = self._screen
        return (
            tuple(self.screen_runs()),
            tuple(self._history),
            (s.cursor.x, s.cursor.y, s.cursor.attrs, s.cursor.hidden),
            s.margins,
            frozenset(s.mode),
            s.alternate,
            s._last_char,
        )

    # -- the view: scrollback + screen ---------------------------------------------------------

    def total_lines(self) -> int:
        """Lines in the scrollback plus the screen (absolute line numbers count from 0 at the
        oldest scrollback line)."""
        return len(self._history) + self._screen.lines

    def view_to_absolute(self, y: int, offset: int) -> int:
        """The absolute line shown at view row ``y`` when scrolled back ``offset`` lines."""
        return len(self._history) - offset + y

    def line_cells(self, absolute: int) -> list[str]:
        """One string per cell of an absolute line ("" for the right half of a wide char)."""
        hist = self._history
        if absolute < 0:
            return []
        if absolute < len(hist):
            cells: list[str] = []
            for text, _ in hist[absolute]:
                for ch in text:
                    cells.append(ch)
                    if not ch.isascii() and wcwidth(ch[0]) == 2:
                        cells.append("")
            return cells
        y = absolute - len(hist)
        s = self._screen
        if y >= s.lines:
            return []
        line = s.buffer.get(y) or {}
        return [line[x].data if x in line else " " for x in range(s.columns)]

    def selection_text(self, sel: Selection) -> str:
        """The text of a selection (stream order, lines joined by newlines, rstripped)."""
        out = []
        for absolute in range(sel.start_line, sel.end_line + 1):
            cells = self.line_cells(absolute)
            x0 = sel.start_x if absolute == sel.start_line else 0
            x1 = sel.end_x if absolute == sel.end_line else len(cells)
            out.append("".join(cells[x0:x1]).rstrip())
        return "\n".join(out)

    # -- dirty tracking ----------------------------------------------------------------------

    def take_dirty(self) -> set[int]:
        """Screen rows changed since the last call (the cursor's old and new rows included)."""
        s = self._screen
        dirty = {y for y in s.dirty if 0 <= y < s.lines}
        s.dirty.clear()
        cur = (s.cursor.x, s.cursor.y, s.cursor.hidden)
        if cur != self._last_cursor:
            if self._last_cursor is not None and self._last_cursor[1] < s.lines:
                dirty.add(self._last_cursor[1])
            if s.cursor.y < s.lines:
                dirty.add(s.cursor.y)
            self._last_cursor = cur
        return dirty

    def take_history_changed(self) -> bool:
        changed = self._history_changed
        self._history_changed = False
        return changed

    # -- rendering -----------------------------------------------------------------------------

    def set_palette(self, palette: dict[str, str]) -> None:
        """Use another ANSI palette (theme change); every row becomes dirty."""
        self._palette = dict(palette)
        self._style_cache.clear()
        self._cursor_style_cache.clear()
        self._screen.dirty.update(range(self._screen.lines))

    def _color(self, name: str) -> Color | None:
        if name == "default":
            return None
        name = _NAME_FIX.get(name, name)
        if name in _HEX16:
            name = _HEX16[name]
        value = self._palette.get(name)
        if value is None:
            if len(name) == 6:
                value = "#" + name
            else:
                return None
        try:
            return Color.parse(value)
        except Exception:  # noqa: BLE001
            return None

    def style_for(self, key: Key) -> Style:
        """The Rich style of an attribute key (cached)."""
        style = self._style_cache.get(key)
        if style is None:
            fg, bg, bold, italics, underscore, strike, reverse, blink = key
            style = Style(
                color=self._color(fg), bgcolor=self._color(bg), bold=bold, italic=italics,
                underline=underscore, strike=strike, reverse=reverse, blink=blink,
            )
            self._style_cache[key] = style
        return style

    def _cursor_style(self, key: Key) -> Style:
        style = self._cursor_style_cache.get(key)
        if style is None:
            style = self.style_for(key) + Style(reverse=not key[6])
            self._cursor_style_cache[key] = style
        return style

    def render_view_line(self, y: int, offset: int = 0, *, cursor: bool = True) -> list[Segment]:
        """Segments for view row ``y`` scrolled back ``offset`` lines. The cursor is drawn in
        reverse video when ``cursor`` is true, it is visible and the view is at the bottom."""
        absolute = self.view_to_absolute(y, offset)
        hist = self._history
        if absolute < 0:
            return []
        if absolute < len(hist):
            style_for = self.style_for
            return [Segment(text, style_for(key)) for text, key in hist[absolute]]
        row = absolute - len(hist)
        s = self._screen
        if row >= s.lines:
            return []
        cx = -1
        if cursor and offset == 0 and not s.cursor.hidden and s.cursor.y == row:
            cx = min(s.cursor.x, s.columns - 1)
        return self._render_row(s.buffer.get(row) or {}, cx)

    def _render_row(self, line: dict, cursor_x: int) -> list[Segment]:
        columns = self._screen.columns
        style_for = self.style_for
        segments: list[Segment] = []
        if not line and cursor_x < 0:
            return segments
        last = max(max(line) if line else 0, cursor_x)
        last = min(last, columns - 1)
        default = self._screen.default_char
        texts: list[str] = []
        run_key: Key | None = None
        prev_wide = False
        for x in range(last + 1):
            c = line.get(x, default)
            data = c.data
            if data == "":
                if prev_wide:
                    prev_wide = False
                    continue
                data = " "
            else:
                prev_wide = not data.isascii() and wcwidth(data[0]) == 2
            key = c[1:]
            if x == cursor_x:
                if texts:
                    segments.append(Segment("".join(texts), style_for(run_key)))
                    texts = []
                segments.append(Segment(data, self._cursor_style(key)))
                run_key = None
                continue
            if key != run_key:
                if texts:
                    segments.append(Segment("".join(texts), style_for(run_key)))
                texts = [data]
                run_key = key
            else:
                texts.append(data)
        if texts:
            if run_key == DEFAULT_KEY:
                text = "".join(texts).rstrip(" ")
                if text:
                    segments.append(Segment(text, style_for(run_key)))
            else:
                segments.append(Segment("".join(texts), style_for(run_key)))
        return segments
