"""A fast terminal emulator on top of pyte, for console panes.

This module is larger than the house limit on purpose: :class:`TerminalEmulator` is one
cohesive class (feeding, the flood fast path, scrollback, rendering rows and answering
queries share its state at every step), and cutting it would only spread that state over
modules. What could stand alone does: the pyte screen with its fixes in
``tui/terminal/screen.py``, lines, palettes and selections in ``tui/terminal/lines.py``.

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
from collections import deque
from collections.abc import Callable

from pyte import modes as mo
from pyte.screens import Char, StaticDefaultDict, wcwidth
from rich.color import Color
from rich.segment import Segment
from rich.style import Style

from .lines import (
    ANSI_DARK,
    ANSI_LIGHT,
    DEFAULT_KEY,
    HEX16,
    NAME_FIX,
    Key,
    Run,
    Selection,
    ansi_palette,
    merge_runs,
    row_runs,
    visible_cells,
)
from .screen import CSI_FIX, INCOMPLETE, LAT1, NEEDS_FIX, CharCache, Screen, Stream, fix_csi

__all__ = [
    "ANSI_DARK",
    "ANSI_LIGHT",
    "DEFAULT_KEY",
    "Selection",
    "TerminalEmulator",
    "ansi_palette",
]

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
        self._screen = Screen(self, max(1, columns), max(1, lines))
        self._stream = Stream(self._screen)
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
        if cut >= 0 and INCOMPLETE.match(text, cut):
            self._held = text[cut:]
            text = text[:cut]
        if not text:
            return
        if NEEDS_FIX.search(text):
            text = CSI_FIX.sub(fix_csi, text)
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
            and s.g0_charset is LAT1
            and not row_runs(s.buffer.get(s.lines - 1) or {}, s.columns)
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
        pushed = [row_runs(old[y] or {}, columns) for y in range(min(e, lines - 1))]
        for r in rows[: max(0, e - (lines - 1))]:
            if len(r) == 1 and r[0][0] and (r[0][1] != DEFAULT_KEY or r[0][0][-1] != " "):
                pushed.append((r[0],))  # already canonical: one non-blank-ended run
            else:
                pushed.append(merge_runs(r))
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
                    cache = caches[a] = CharCache(a)
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
        return ["".join(t for t, _ in row_runs(s.buffer.get(y) or {}, s.columns)).rstrip()
                for y in range(s.lines)]

    def screen_runs(self) -> list[tuple[Run, ...]]:
        """The visible lines as canonical styled runs."""
        s = self._screen
        return [row_runs(s.buffer.get(y) or {}, s.columns) for y in range(s.lines)]

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
        name = NAME_FIX.get(name, name)
        if name in HEX16:
            name = HEX16[name]
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
        for x, data, c in visible_cells([line.get(x, default) for x in range(last + 1)]):
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
