"""The flood fast path of the terminal emulator: long stretches of simple lines (printable
ASCII, TAB, CR, LF and SGR) laid out without the parser, with the screen's own rules, so that
``cat`` of a big file or a chatty boot does not crawl. The result is identical to feeding
everything through the parser (``tests/terminal`` checks it), at ~20x the speed.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pyte import modes as mo
from pyte.screens import StaticDefaultDict

from .lines import DEFAULT_KEY, Key, Run, merge_runs, row_runs
from .parser import Parser
from .screen import CharCache, Screen
from .sgr import Char, apply_sgr

# What ends a "simple" stretch (printable ASCII, TAB, CR, LF, SGR): two patterns, each
# much faster to search than their alternation.
_NOT_SIMPLE_CHAR = re.compile(r"[^\x20-\x7e\t\r\n\x1b]")
_NOT_SIMPLE_ESC = re.compile(r"\x1b(?!\[[0-9;]*m)")
_SGR_SPLIT = re.compile(r"\x1b\[([0-9;]*)m")
_TOKENS = re.compile(r"([\x20-\x7e]+)|\x1b\[([0-9;]*)m|(\r)|(\t)")



class FastPath:
    """Lays out simple lines straight into the screen and its scrollback."""

    MIN_LINES = 8
    """A stretch of simple lines shorter than ``lines + this`` goes through the parser."""

    def __init__(self, screen: Screen, stream: Parser,
                 scrolled_off: Callable[[list[tuple[Run, ...]]], None]) -> None:
        """``scrolled_off`` receives the lines that leave the top of the screen."""
        self._screen = screen
        self._stream = stream
        self._scrolled_off = scrolled_off
        self._sgr_cache: dict[tuple[Char, str], tuple[Char, Key]] = {}

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
        need = self._screen.lines + self.MIN_LINES
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

    def _sgr(self, attrs: Char, params: str) -> tuple[Char, Key]:
        """Cursor attributes after ``CSI params m``, as the screen computes them (cached)."""
        k = (attrs, params)
        r = self._sgr_cache.get(k)
        if r is None:
            new = apply_sgr(attrs, params, self._screen.default_char)
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

    def _lines(self, block: str) -> None:
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
                    for params, body in pairs:  # noqa: B007 - binds the next run's text (used above)
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
                    if x < columns:  # wrap pending at the margin: a tab keeps it
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
