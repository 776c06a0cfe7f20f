"""The flood fast path of the terminal emulator: long stretches of simple lines (printable
ASCII, TAB, CR, LF and SGR) laid out without the parser, with the screen's own rules, so that
``cat`` of a big file or a chatty boot does not crawl. The result is identical to feeding
everything through the parser (``tests/terminal`` checks it), at ~20x the speed.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pyte import modes as mo

from .layout import Layout
from .lines import Run, RunsRow, row_runs
from .parser import Parser
from .screen import CharCache, Screen
from .sgr import Char

# What ends a "simple" stretch (printable ASCII, TAB, CR, LF, SGR): two patterns, each
# much faster to search than their alternation.
_NOT_SIMPLE_CHAR = re.compile(r"[^\x20-\x7e\t\r\n\x1b]")
_NOT_SIMPLE_ESC = re.compile(r"\x1b(?!\[[0-9;]*m)")


class FastPath:
    """Lays out simple lines straight into the screen and its scrollback."""

    MIN_LINES = 8
    """A stretch of simple lines shorter than this, plus the rows the cursor has to go down
    to reach the bottom, goes through the parser."""

    def __init__(self, screen: Screen, stream: Parser,
                 scrolled_off: Callable[[list[tuple[Run, ...]]], None]) -> None:
        """``scrolled_off`` receives the lines that leave the top of the screen."""
        self._screen = screen
        self._stream = stream
        self._scrolled_off = scrolled_off
        self._layout = Layout(screen)

    def ok(self) -> bool:
        """Whether the next complete lines can be laid out here (see :meth:`feed`)."""
        s = self._screen
        m = s.margins
        mode = s.mode
        return (
            self._stream.ground
            and not s.alternate
            and (m is None or (m.top == 0 and m.bottom == s.lines - 1))
            and s.cursor.y == s.lines - 1
            and s.columns >= 2
            and mo.DECAWM in mode
            and mo.IRM not in mode
            and mo.LNM not in mode
            and mo.DECSCNM not in mode
            and s.translate is None
            and not s._single_pending
            and not row_runs(s.buffer.get(s.lines - 1) or {}, s.columns)
        )

    def need(self) -> int:
        """Lines a stretch needs to be worth laying out here: once the cursor sits on the
        bottom row (a flood under way) a few; on a fresh screen a screenful more."""
        s = self._screen
        return self.MIN_LINES + max(0, s.lines - 1 - s.cursor.y)

    def feed(self, text: str) -> None:
        """Feed ``text``, skipping the parser for long stretches of simple lines.

        A stretch is a run of printable ASCII, TAB, CR, LF and SGR sequences. Inside one, once
        the parser has taken the first lines and the cursor sits on a blank bottom row of a
        full-screen scrolling region (parser in ground state, auto-wrap on, no insert or
        newline mode), every further complete line is laid out here with the screen's rules
        (wrap at the last column, tab stops, CR overwrites) and goes to the scrollback
        directly; the screen then gets the last rows and the parser the partial line after.
        SGR sequences are applied with the screen's own rules (``sgr.apply_sgr``, cached),
        so the cursor attributes end up as the parser would leave them.
        """
        feed = self._stream.feed
        need = self.need()
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
                # Let the parser take lines until the cursor reaches a blank bottom row.
                cut = text.index("\n", pos) + 1
                feed(text[fed:cut])
                fed = cut
                for _ in range(4):
                    if self.ok():
                        break
                    if not self._stream.ground:
                        break
                    steps = max(1, self._screen.lines - 1 - self._screen.cursor.y)
                    for _ in range(steps):
                        nxt = text.find("\n", fed, end)
                        if nxt < 0:
                            break
                        feed(text[fed:nxt + 1])
                        fed = nxt + 1
                last = text.rfind("\n", fed, end) + 1
                if last > fed and self.ok() and text.count("\n", fed, last) >= self.MIN_LINES:
                    self._lines(text[fed:last - 1])
                    fed = last
            pos = end + 1
        if fed < n:
            feed(text[fed:])

    def _lines(self, block: str) -> None:
        """Lay out complete simple lines (``block`` = lines joined by LF, no final LF)."""
        s = self._screen
        columns = s.columns
        cursor = s.cursor
        rows, x, attrs, last_text = self._layout.rows(block, cursor.x, cursor.attrs)
        # Scroll the emitted rows through the screen.
        lines = s.lines
        buffer = s.buffer
        old = [buffer.get(y) for y in range(lines - 1)]
        e = len(rows)
        pushed = [row_runs(old[y] or {}, columns) for y in range(min(e, lines - 1))]
        pushed.extend(rows[: max(0, e - (lines - 1))])
        if pushed:
            self._scrolled_off(pushed)
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
        fill = dict.update  # RunsRow.update would forget the runs
        for r in keep_new:
            d = RunsRow(default, r)
            cx = 0
            for text, k in r:
                a = Char(" ", *k)
                cache = caches.get(a)
                if cache is None:
                    cache = caches[a] = CharCache(a)
                n = len(text)
                fill(d, zip(range(cx, cx + n), map(cache.__getitem__, text)))
                cx += n
            new_buffer[y] = d
            y += 1
        s.buffer = new_buffer
        if last_text:
            s._last_char = last_text[-1]
        cursor.x = x
        cursor.attrs = attrs
        s.dirty.update(range(lines))
