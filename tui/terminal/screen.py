"""The screen of the console terminal: pyte's buffer and cursor model with the rules of
xterm where pyte 0.8.2 differs, driven by the parser (``parser.py``) and by
:class:`~tui.terminal.emulator.TerminalEmulator`, which the screen calls back (``emu``) to
keep lines that scroll off the top.
"""

from __future__ import annotations

import copy
import unicodedata
from collections import defaultdict
from typing import TYPE_CHECKING

import pyte
from pyte import modes as mo
from pyte.screens import Margins, StaticDefaultDict

from .charsets import designate
from .lines import Buffer, CharCursor, Row, row_runs
from .widths import char_width
from .resize import resize_screen
from .sgr import DEFAULT_CHAR, Char, apply_sgr

if TYPE_CHECKING:
    from .emulator import TerminalEmulator

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


_REVERSED_CHAR = DEFAULT_CHAR._replace(reverse=True)
_PRIVATE_ALT = (1049, 1047, 47)
_MOUSE_MODES = (9, 1000, 1001, 1002, 1003, 1005, 1006, 1015)


class Screen(pyte.Screen):
    """pyte.Screen with corral's fixes. Private: driven by :class:`TerminalEmulator`."""

    # pyte's types fix its cells as pyte's Char; this screen's cells are sgr.Char (the same
    # fields, which pyte's code reads, and three more), in rows, cursor and default_char.
    buffer: Buffer  # type: ignore[assignment]  # pyte's cell type is fixed (above)
    cursor: CharCursor  # type: ignore[assignment]  # pyte's cell type is fixed (above)

    def __init__(self, emulator: TerminalEmulator, columns: int, lines: int) -> None:
        self.emu = emulator
        self.alternate = False
        self.main_buffer: Buffer | None = None
        self.main_saved: tuple | None = None  # the main screen's DECSC slot, while alternate
        self.bracketed_paste = False
        self.app_cursor = False
        self.mouse_modes: set[int] = set()
        self.char_caches: dict[Char, CharCache] = {}
        self.last_char = ""
        self.gsets: list[dict[int, str] | None] = [None, None, None, None]  # G0-G3
        self.gl = 0  # the set invoked into GL (SI: G0, SO: G1, LS2: G2, LS3: G3)
        self.translate: dict[int, str] | None = None  # gsets[gl], what draw() applies
        self.single: dict[int, str] | None = None  # SS2/SS3: the set of the next character
        self.single_pending = False
        self._saved: tuple | None = None
        super().__init__(columns, lines)

    @property
    def default_char(self) -> Char:  # type: ignore[override]  # pyte's cell type is fixed
        return _REVERSED_CHAR if mo.DECSCNM in self.mode else DEFAULT_CHAR

    def new_buffer(self) -> defaultdict[int, Row]:
        return defaultdict(lambda: StaticDefaultDict(self.default_char))

    # -- drawing ---------------------------------------------------------------------------

    def draw(self, data: str) -> None:
        if self.single_pending:
            self.single_pending = False
            first = data[0].translate(self.single) if self.single else data[0]
            rest = data[1:].translate(self.translate) if self.translate else data[1:]
            data = first + rest
        elif self.translate is not None:
            data = data.translate(self.translate)
        cursor = self.cursor
        mode = self.mode
        if data.isascii() and data.isprintable() and mo.DECAWM in mode and mo.IRM not in mode:
            # Fast ASCII path: same result as the per-character loop below.
            attrs = cursor.attrs
            cache = self.char_caches.get(attrs)
            if cache is None:
                if len(self.char_caches) > 1024:
                    self.char_caches.clear()
                cache = self.char_caches[attrs] = CharCache(attrs)
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
                self._split_wide(line, x, x + take)
                line.update(zip(range(x, x + take), map(getc, data[i:i + take])))
                x += take
                i += take
            cursor.x = x
            self.dirty.add(cursor.y)
            self.last_char = data[-1]
            return

        for char in data:
            width = char_width(char)
            if width == 0:
                # Combining marks (also enclosing ones such as U+20DD), zero-width joiners and
                # variation selectors join the character before them, as in xterm and tmux.
                self._combine(char)
                continue
            if width < 0:
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
            self._split_wide(line, cursor.x, cursor.x + width)
            line[cursor.x] = cursor.attrs._replace(data=char)
            if width == 2 and cursor.x + 1 < self.columns:
                line[cursor.x + 1] = cursor.attrs._replace(data="")
            cursor.x = min(cursor.x + width, self.columns)
            self.last_char = char
        self.dirty.add(cursor.y)

    def _split_wide(self, line: dict, start: int, end: int) -> None:
        """Cells ``start``..``end - 1`` are about to be written: a wide character cut by
        either edge loses its other half, which becomes a blank (xterm blanks that cell
        only; left alone, the half would still draw the whole character)."""
        if start > 0:
            cell = line.get(start)
            if cell is not None and cell.data == "":
                left = line.get(start - 1)
                if left is not None and left.data:
                    line[start - 1] = left._replace(data=" ")
        if end < self.columns:
            cell = line.get(end)
            if cell is not None and cell.data == "":
                line[end] = cell._replace(data=" ")

    def _combine(self, char: str) -> None:
        cursor = self.cursor
        if cursor.x:
            line = self.buffer[cursor.y]
            x = min(cursor.x, self.columns) - 1
            if line[x].data == "" and x:  # the stub of a wide character
                x -= 1
        elif cursor.y:
            line = self.buffer[cursor.y - 1]
            x = self.columns - 1
        else:
            return
        last = line[x]
        line[x] = last._replace(data=unicodedata.normalize("NFC", last.data + char))
        self.dirty.add(cursor.y)

    # -- character sets (charsets.py) --------------------------------------------------------

    def designate(self, g: int, final: str, size96: bool = False) -> None:
        """``ESC ( F`` and friends: put a set into G0-G3 (in UTF-8 mode too, as xterm)."""
        self.gsets[g] = designate(final, size96)
        self.translate = self.gsets[self.gl]

    def locking_shift(self, g: int) -> None:
        self.gl = g
        self.translate = self.gsets[g]

    def shift_in(self) -> None:
        self.locking_shift(0)

    def shift_out(self) -> None:
        self.locking_shift(1)

    def single_shift(self, g: int) -> None:
        """SS2/SS3: the next character comes from G2/G3 (xterm; tmux ignores both)."""
        self.single = self.gsets[g]
        self.single_pending = True

    # -- cursor ----------------------------------------------------------------------------

    def cursor_position(self, line: int | None = None, column: int | None = None) -> None:
        """CUP/HVP. In origin mode the row counts from the top margin and is clamped to the
        scrolling region (xterm and tmux; pyte ignored the whole move)."""
        line = (line or 1) - 1
        if mo.DECOM in self.mode and self.margins is not None:
            line = min(line + self.margins.top, self.margins.bottom)
        self.cursor.x = min((column or 1) - 1, self.columns - 1)
        self.cursor.y = min(line, self.lines - 1)

    def cursor_to_line(self, line: int | None = None) -> None:
        """VPA, relative to the scrolling region in origin mode (clamped to it)."""
        self.cursor_position(line, min(self.cursor.x, self.columns - 1) + 1)

    def forward_tab(self, count: int = 0) -> None:
        """CHT: ``count`` tab stops forward."""
        for _ in range(min(max(count, 1), self.columns)):
            self.tab()

    def back_tab(self, count: int = 0) -> None:
        """CBT: ``count`` tab stops back (column 1 at most)."""
        x = min(self.cursor.x, self.columns - 1)
        stops = sorted(self.tabstops)
        for _ in range(max(count, 1)):
            earlier = [t for t in stops if t < x]
            x = earlier[-1] if earlier else 0
            if not x:
                break
        self.cursor.x = x

    def reset_tab_stops(self) -> None:
        """DECST8C: a stop every 8 columns from column 9, and no other."""
        self.tabstops = set(range(8, self.columns, 8))

    def next_line(self) -> None:
        """NEL: a line feed and a carriage return (pyte did only the line feed)."""
        self.index()
        self.carriage_return()

    def save_cursor(self) -> None:
        """DECSC: position, attributes, character sets and origin mode (xterm's list;
        the auto-wrap mode is not part of it)."""
        self._saved = (copy.copy(self.cursor), tuple(self.gsets), self.gl,
                       mo.DECOM in self.mode)

    def restore_cursor(self) -> None:
        """DECRC; with nothing saved the cursor goes home and origin mode is reset."""
        if self._saved is None:
            self.mode.discard(mo.DECOM)
            self.cursor.x = self.cursor.y = 0
            self.cursor.attrs = self.default_char
            return
        cursor, gsets, gl, origin = self._saved
        self.gsets = list(gsets)
        self.locking_shift(gl)
        (self.mode.add if origin else self.mode.discard)(mo.DECOM)
        self.cursor = copy.copy(cursor)
        self.ensure_hbounds()
        self.ensure_vbounds()

    def alignment_display(self) -> None:
        """DECALN: the screen filled with E, margins reset, cursor home (xterm, tmux)."""
        e = self.default_char._replace(data="E")
        for y in range(self.lines):
            self.buffer[y] = StaticDefaultDict(self.default_char)
            self.buffer[y].update(dict.fromkeys(range(self.columns), e))
        self.margins = None
        self.cursor.x = self.cursor.y = 0
        self.dirty.update(range(self.lines))

    def soft_reset(self) -> None:
        """DECSTR: modes, margins, attributes, character sets and the saved cursor back to
        their defaults; the screen is kept."""
        for m in (mo.IRM, mo.DECOM):
            self.mode.discard(m)
        self.mode.add(mo.DECTCEM)
        self.cursor.hidden = False
        self.app_cursor = False
        self.margins = None
        self.cursor.attrs = self.default_char
        self.gsets = [None, None, None, None]
        self.locking_shift(0)
        self.single_pending = False
        self._saved = None

    def sgr(self, params: str) -> None:
        """SGR from its parameter string (``sgr.py``: colon sub-parameters included)."""
        self.cursor.attrs = apply_sgr(self.cursor.attrs, params, self.default_char)

    def select_graphic_rendition(self, *attrs: int, **kwargs) -> None:
        self.sgr(";".join(map(str, attrs)))

    def _settle_wrap(self) -> None:
        """A wrap pending at the right margin ends: the cursor is in the last column again.
        The cursor waits there after a character written in it (here: one column past it);
        xterm's edits act on that column and cancel the wrap (its ResetWrap), so the next
        character lands in it, not on the next line."""
        if self.cursor.x >= self.columns:
            self.cursor.x = self.columns - 1

    def erase_in_line(self, how: int = 0, *args, **kwargs) -> None:
        self._settle_wrap()
        super().erase_in_line(how, *args, **kwargs)

    def erase_characters(self, count: int | None = None) -> None:
        self._settle_wrap()
        super().erase_characters(count)

    def insert_characters(self, count: int | None = None) -> None:
        self._settle_wrap()
        super().insert_characters(count)

    def delete_characters(self, count: int | None = None) -> None:
        """DCH: the rest of the line moves left, blanks in the current colours come in at
        the right (pyte stopped at the first unwritten cell and left the rest in place)."""
        self._settle_wrap()
        columns = self.columns
        x0 = min(self.cursor.x, columns - 1)
        count = min(max(count or 1, 1), columns - x0)
        line = self.buffer[self.cursor.y]
        blank = self.cursor.attrs._replace(data=" ")
        fill = blank != self.default_char
        for x in range(x0, columns):
            src = x + count
            if src < columns and src in line:
                line[x] = line[src]
            elif src >= columns and fill:
                line[x] = blank
            else:
                line.pop(x, None)
        self.dirty.add(self.cursor.y)

    def repeat_last(self, count: int = 1, *args, **kwargs) -> None:
        """REP: the last graphic character again, ``count`` times; a second REP right after
        repeats nothing (xterm and tmux; vttest checks it)."""
        if self.last_char:
            self.draw(self.last_char * min(max(count, 1), self.columns * self.lines))
            self.last_char = ""

    def tab(self) -> None:
        """HT; with a wrap pending at the right margin the cursor stays, so the next
        character still wraps (xterm, tmux; pyte moved it back onto the last column)."""
        if self.cursor.x < self.columns:
            super().tab()

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

    def index(self) -> None:
        cursor_y = self.cursor.y
        if cursor_y == self.lines - 1 and not self.alternate:
            margins = self.margins
            if margins is None or (margins.top == 0 and margins.bottom == self.lines - 1):
                self.emu.push_history(row_runs(self.buffer.get(0), self.columns))
        super().index()

    def erase_in_display(self, how: int = 0, *args, **kwargs) -> None:
        if how == 3:
            self.emu.clear_history()  # xterm/tmux: ED 3 erases the saved lines only
            return
        if how in (0, 1):
            self._settle_wrap()
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
                # DECCOLM: the width stays (as in tmux, and xterm without allowColumnMode),
                # but the screen is cleared, the margins reset and the cursor sent home, as
                # xterm with allowColumnMode, a VT100 and tmux do: vttest relies on it.
                self.margins = None
                self.erase_in_display(2)
                self.cursor.x = self.cursor.y = 0
            else:
                rest.append(m)
        return tuple(rest)

    def _enter_alternate(self, save_cursor: bool) -> None:
        """?1049 saves the cursor as DECSC does, into the main screen's slot; each screen
        has its own saved cursor (xterm), so DECRC after ?1049l finds the same one."""
        if self.alternate:
            return
        if save_cursor:
            self.save_cursor()
        self.main_saved, self._saved = self._saved, None
        self.main_buffer = self.buffer
        self.buffer = self.new_buffer()
        self.alternate = True
        self.dirty.update(range(self.lines))

    def _leave_alternate(self, restore_cursor: bool) -> None:
        main = self.main_buffer
        if not self.alternate or main is None:  # (the main buffer is kept while alternate)
            return
        self.buffer = main
        self.main_buffer = None
        self.alternate = False
        self._saved, self.main_saved = self.main_saved, None
        if restore_cursor and self._saved is not None:
            self.restore_cursor()
        self.dirty.update(range(self.lines))

    def reset(self) -> None:
        if getattr(self, "alternate", False):
            self._leave_alternate(restore_cursor=False)
        self.bracketed_paste = False
        self.app_cursor = False
        self.mouse_modes = set()
        self.gsets = [None, None, None, None]
        self.locking_shift(0)
        self.single_pending = False
        self._saved = None
        super().reset()
        self.cursor.attrs = self.default_char

    # -- queries -------------------------------------------------------------------------------

    def report_device_attributes(self, mode: int = 0, *args, **kwargs) -> None:
        if mode == 0:
            self.write_process_input("\x1b[?62;22c")  # VT220 with ANSI colour

    def report_secondary_attributes(self) -> None:
        self.write_process_input("\x1b[>1;10;0c")  # VT220, firmware 10

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
        self.emu.answer(data.encode())

    # -- resize ----------------------------------------------------------------------------

    def resize(self, lines: int | None = None, columns: int | None = None) -> None:
        resize_screen(self, lines, columns)
