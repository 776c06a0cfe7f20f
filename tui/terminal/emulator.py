"""A fast terminal emulator for console panes.

Its parts: the parser (``parser.py``, xterm's parser states) feeding the screen
(``screen.py``: pyte's buffer and cursor model with xterm's rules; character sets in
``charsets.py``, SGR in ``sgr.py``), the flood fast path in ``fastpath.py``, lines, palettes
and selections in ``lines.py``, Rich styles in ``style.py``; this module feeds them, keeps the
scrollback and renders rows.

Pure logic: no Textual imports (Rich is used only for the ``Segment``/``Style`` objects a row
renders to). What it does (docs/protocols.md, "Terminal emulation"):

- incremental UTF-8 and a feed that never raises; a sequence cut by the end of a chunk is
  completed by the next one;
- the control sequences programs send (DEC line drawing, NEL, HPA/CBT, origin mode, DCS and
  friends consumed, combining marks and emoji sequences kept, colon SGR, the alternate
  screen ``?1049``/``?1047``/``?47``, ``ED 3`` clearing the scrollback only, DECCOLM keeping
  the width), with xterm as the reference where tmux differs;
- answers to DSR/CPR and DA (primary and secondary) through a ``respond(bytes)`` callback;
- bracketed-paste and application-cursor-keys flags;
- a scrollback of styled lines;
- dirty-row tracking and row rendering to cached Rich styles;
- a fast path for floods of simple lines (``fastpath.py``): the result is identical to
  feeding everything through the parser, at ~20x the speed.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Mapping
from itertools import groupby, repeat

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style

from .fastpath import FastPath
from .lines import (
    ANSI_DARK,
    ANSI_LIGHT,
    DEFAULT_KEY,
    Key,
    Run,
    RunsRow,
    Selection,
    ansi_palette,
    cell_key,
    cell_text,
    row_runs,
    visible_cells,
)
from .parser import Parser
from .screen import Screen
from .scrollback import Scrollback
from .sgr import Char
from .widths import char_width
from .style import Styles

__all__ = [
    "ANSI_DARK",
    "ANSI_LIGHT",
    "DEFAULT_KEY",
    "Selection",
    "TerminalEmulator",
    "ansi_palette",
]

def _blank(text: str) -> str:
    """How concealed text (SGR 8, ``Key[9]``) shows: blanks of the same width (xterm; the
    cells keep their colours and the text can still be selected and copied)."""
    return " " * cell_len(text)


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
        fast_path: the flood fast path (on by default; off gives the parser's result, for
            tests and benchmarks).
    """

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
        self._history = Scrollback(scrollback)
        self._history_changed = False
        self._respond = respond
        self._answers: list[bytes] = []
        self.fast_path = fast_path
        self._screen = Screen(self, max(1, columns), max(1, lines))
        self._stream = Parser(self._screen)
        self._fast = FastPath(self._screen, self._stream, self._push_lines, self._push_unlaid)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._held = ""
        self._styles = Styles(palette or ANSI_DARK)
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
        """Feed decoded text (used by :meth:`feed`). A sequence cut at the end of the text
        is completed by the next call, as in a real terminal."""
        if not text:
            return
        try:
            if self.fast_path and text.count("\n") >= self._fast.need():
                self._fast.feed(text)
            else:
                self._stream.feed(text)
        except Exception:  # belt and braces: never let output kill the UI
            self._stream.reset()
        self._flush_answers()

    def flush(self) -> None:
        """Nothing is held back any more: the parser keeps a sequence cut by the end of a
        chunk in its state, as a terminal does (kept for callers that signal "no more data
        pending")."""
        self._flush_answers()

    def resize(self, columns: int, lines: int) -> None:
        """Resize the screen (rows dropped at the top go to the scrollback)."""
        self._screen.resize(lines=lines, columns=columns)

    def reset(self) -> None:
        """Full reset (RIS); the scrollback is kept."""
        self._screen.reset()

    # -- answers -------------------------------------------------------------------------------

    def answer(self, data: bytes) -> None:
        self._answers.append(data)

    def _flush_answers(self) -> None:
        if self._answers:
            answers, self._answers = self._answers, []
            if self._respond is not None:
                for a in answers:
                    self._respond(a)

    # -- scrollback ----------------------------------------------------------------------------

    def push_history(self, runs: tuple[Run, ...]) -> None:
        self._push_lines([runs])

    def _push_lines(self, lines: list[tuple[Run, ...]]) -> None:
        """Lines that left the top of the screen, oldest first."""
        self._history.extend(lines)
        self._history_changed = True
        self.lines_scrolled += len(lines)

    def _push_unlaid(self, block: str, attrs: Char, columns: int, count: int) -> None:
        """Lines that left the top of the screen as text, laid out when read."""
        self._history.defer(block, attrs, columns, count)
        self._history_changed = True
        self.lines_scrolled += count

    def clear_history(self) -> None:
        self._history.clear()
        self._history_changed = True

    def history_text(self) -> list[str]:
        """The scrollback as plain text, oldest first."""
        return ["".join(t for t, _ in runs) for runs in self._history]

    # -- output for tests and copying ----------------------------------------------------------

    def screen_text(self) -> list[str]:
        """The visible lines as text (each rstripped; wide-character stubs skipped)."""
        s = self._screen
        return ["".join(t for t, _ in row_runs(s.buffer.get(y), s.columns)).rstrip()
                for y in range(s.lines)]

    def shown_text(self) -> list[str]:
        """The visible lines as drawn: :meth:`screen_text` with concealed text (SGR 8) as
        the blanks it shows as."""
        s = self._screen
        return ["".join(_blank(t) if key[9] else t
                        for t, key in row_runs(s.buffer.get(y), s.columns)).rstrip()
                for y in range(s.lines)]

    def screen_runs(self) -> list[tuple[Run, ...]]:
        """The visible lines as canonical styled runs."""
        s = self._screen
        return [row_runs(s.buffer.get(y), s.columns) for y in range(s.lines)]

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
            s.last_char,
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
                    if not ch.isascii() and char_width(ch[0]) == 2:
                        cells.append("")
            return cells
        y = absolute - len(hist)
        s = self._screen
        if y >= s.lines:
            return []
        line: Mapping[int, Char] = s.buffer.get(y) or {}
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
        self._styles = Styles(palette)
        self._screen.dirty.update(range(self._screen.lines))

    def style_for(self, key: Key) -> Style:
        """The Rich style of an attribute key (cached; rules in ``style.py``)."""
        return self._styles.style(key)

    def _cursor_style(self, key: Key) -> Style:
        return self._styles.cursor(key)

    def render_view_line(self, y: int, offset: int = 0, *, cursor: bool = True) -> list[Segment]:
        """Segments for view row ``y`` scrolled back ``offset`` lines. The cursor is drawn in
        reverse video when ``cursor`` is true, it is visible and the view is at the bottom."""
        absolute = self.view_to_absolute(y, offset)
        hist = self._history
        if absolute < 0:
            return []
        if absolute < len(hist):
            style_for = self._styles.style
            return [Segment(_blank(text) if key[9] else text, style_for(key))
                    for text, key in hist[absolute]]
        row = absolute - len(hist)
        s = self._screen
        if row >= s.lines:
            return []
        cx = -1
        if cursor and offset == 0 and not s.cursor.hidden and s.cursor.y == row:
            cx = min(s.cursor.x, s.columns - 1)
        return self._render_row(s.buffer.get(row) or {}, cx)

    def _render_row(self, line: dict, cursor_x: int) -> list[Segment]:
        if not line and cursor_x < 0:
            return []
        if cursor_x < 0 and type(line) is RunsRow and line.runs is not None:
            # A row laid out by the fast path: drawn from its runs, as a scrollback line.
            style_for = self._styles.style
            return [Segment(_blank(text) if key[9] else text, style_for(key))
                    for text, key in line.runs]
        last = min(max(max(line) if line else 0, cursor_x), self._screen.columns - 1)
        cells = list(map(line.get, range(last + 1), repeat(self._screen.default_char, last + 1)))
        datas = "".join(map(cell_text, cells))
        if len(datas) != len(cells) or not datas.isascii():
            return self._render_cells(cells, cursor_x)
        # Common case: one character per cell; runs grouped in C.
        style_for = self._styles.style
        segments: list[Segment] = []
        groups = [(key, len(list(group))) for key, group in groupby(cells, cell_key)]
        final = len(groups) - 1
        pos = 0
        for i, (key, n) in enumerate(groups):
            text = datas[pos:pos + n]
            if pos <= cursor_x < pos + n:
                k = cursor_x - pos
                if k:
                    head = text[:k]
                    segments.append(Segment(_blank(head) if key[9] else head, style_for(key)))
                segments.append(Segment(" " if key[9] else text[k], self._styles.cursor(key)))
                text = text[k + 1:]
            pos += n
            if i == final and key == DEFAULT_KEY:
                text = text.rstrip(" ")
            if text:
                segments.append(Segment(_blank(text) if key[9] else text, style_for(key)))
        return segments

    def _render_cells(self, cells: list, cursor_x: int) -> list[Segment]:
        """A row holding wide characters, combining marks or non-ASCII text."""
        style_for = self._styles.style
        segments: list[Segment] = []
        texts: list[str] = []
        run_key: Key = ()  # the key of ``texts``; () while it is empty (no run yet)
        for x, data, c in visible_cells(cells):
            key = c[1:]
            if x == cursor_x:
                if texts:
                    text = "".join(texts)
                    segments.append(Segment(_blank(text) if run_key[9] else text,
                                            style_for(run_key)))
                    texts = []
                segments.append(Segment(_blank(data) if key[9] else data,
                                        self._cursor_style(key)))
                run_key = ()
                continue
            if key != run_key:
                if texts:
                    text = "".join(texts)
                    segments.append(Segment(_blank(text) if run_key[9] else text,
                                            style_for(run_key)))
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
                text = "".join(texts)
                segments.append(Segment(_blank(text) if run_key[9] else text, style_for(run_key)))
        return segments
