"""The flood fast path of the terminal emulator: long stretches of simple lines (printable
ASCII, TAB, CR, LF and SGR) laid out without the parser, with the screen's own rules, so that
``cat`` of a big file or a chatty boot does not crawl. The result is identical to feeding
everything through the parser (``tests/terminal`` checks it), at ~20x the speed.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pyte import modes as mo

from .layout import SGR, Layout
from .lines import Run, RunsRow, row_runs
from .parser import Parser
from .screen import CharCache, Screen
from .sgr import Char

# What ends a "simple" stretch (printable ASCII, TAB, CR, LF, SGR): two patterns, each
# much faster to search than their alternation.
_NOT_SIMPLE_CHAR = re.compile(r"[^\x20-\x7e\t\r\n\x1b]")
_NOT_SIMPLE_ESC = re.compile(r"\x1b(?!\[[0-9;]*m)")


def _positions(text: str, *chars: str) -> list[int]:
    """Where any of ``chars`` is in ``text``, in order (a few places: faster by ``find``
    than by a regex, which looks at every character in Python's engine)."""
    out = []
    for char in chars:
        i = text.find(char)
        while i >= 0:
            out.append(i)
            i = text.find(char, i + 1)
    return sorted(out)


def _drawn(clean: str) -> str:
    """The text clean lines draw (for REP, which repeats the last character drawn)."""
    return SGR.sub("", clean).replace("\r", "").replace("\n", "")



class FastPath:
    """Lays out simple lines straight into the screen and its scrollback."""

    MIN_LINES = 8
    """A stretch of simple lines shorter than this, plus the rows the cursor has to go down
    to reach the bottom, goes through the parser."""

    DEFER_LINES = 64
    """A block holding at least this many lines more than fit on the screen hands the lines
    that only pass through to the scrollback unlaid (``scrollback.py``)."""

    def __init__(self, screen: Screen, stream: Parser,
                 scrolled_off: Callable[[list[tuple[Run, ...]]], None],
                 scrolled_off_unlaid: Callable[[str, Char, int, int], None] | None = None,
                 ) -> None:
        """``scrolled_off`` receives the lines that leave the top of the screen;
        ``scrolled_off_unlaid`` long stretches of them as text (the arguments of
        ``Scrollback.defer``)."""
        self._screen = screen
        self._stream = stream
        self._scrolled_off = scrolled_off
        self._scrolled_off_unlaid = scrolled_off_unlaid
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
            and not s.single_pending
            and not row_runs(s.buffer.get(s.lines - 1), s.columns)
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

    def _split(self, block: str) -> tuple[list[tuple[str, int]], str] | None:
        """Cut a long block into what to lay out now and what only passes through to the
        scrollback. Returns the pieces before the last screenful of lines, in order and
        each ``(text, rows)``: ``rows`` < 0 for a piece to lay out now, else the rows of a
        run of clean lines (each from the first column and ended by CR LF, no tab, no other
        CR) handed over unlaid; and the rest (the last screenful). Pieces and rest are cut
        at LFs. None when no run of clean lines is long enough to be worth it."""
        s = self._screen
        keep = s.lines - 1
        newlines = block.count("\n")
        if (not keep or newlines < keep + self.DEFER_LINES
                or block.count("\t") * 8 > newlines):  # tabs every few lines: not worth it
            return None
        cut = len(block)
        for _ in range(keep):
            cut = block.rindex("\n", 0, cut)
        # What keeps a line from the unlaid path: a tab, a CR without LF, an LF without CR
        # (then the next line may not start at column 1), the cursor not at column 1. CR LF
        # is masked by two characters a simple line cannot hold, leaving only those.
        end = cut + 1
        crlf = block.count("\r\n", 0, end)
        odd_chars = (block.count("\n", 0, end) - crlf + block.count("\r", 0, end) - crlf
                     + block.count("\t", 0, end))
        if not odd_chars:
            odd = []  # the usual flood: no such line
        elif odd_chars * 8 > crlf:
            return None  # odd lines every few lines: no run of clean ones long enough
        else:
            masked = block[:end].replace("\r\n", "\0\0")
            odd = _positions(masked, "\n", "\r", "\t")
        if s.cursor.x:
            odd.insert(0, 0)
        pieces: list[tuple[str, int]] = []
        eager = current = 0  # where the text to lay out now starts; the next line to look at
        need = self.DEFER_LINES
        for o in odd:
            if o < current:
                continue
            line = max(current, block.rfind("\n", current, o) + 1)  # the odd line
            if block.count("\n", current, line) >= need:
                if eager < current:
                    pieces.append((block[eager:current - 1], -1))
                pieces.append((block[current:line - 1], self._rows(block, current, line - 1)))
                eager = line
            crlf = block.find("\r\n", o, cut)  # the end of the first clean line after
            if crlf < 0:
                current = cut + 1
                break
            current = crlf + 2
        if current <= cut and block.count("\n", current, cut) >= need:
            if eager < current:
                pieces.append((block[eager:current - 1], -1))
            pieces.append((block[current:cut], self._rows(block, current, cut)))
            eager = cut + 1
        if not pieces:
            return None
        if eager <= cut:
            pieces.append((block[eager:cut], -1))
        return pieces, block[cut + 1:]

    def _rows(self, block: str, start: int, end: int) -> int:
        """Rows the clean lines ``block[start:end]`` make: one per line, more for the lines
        wider than the screen (whose raw text, SGR sequences and CR included, is at least
        two longer)."""
        columns = self._screen.columns
        count = block.count("\n", start, end) + 1
        if end - start > columns + 1:
            raw = block[start:end].split("\n")
            if max(map(len, raw)) > columns + 1:
                for line in raw:
                    if len(line) > columns + 1:
                        width = len(SGR.sub("", line)) - 1
                        if width > columns:
                            count += (width - 1) // columns
        return count

    def _fold(self, head: str, attrs: Char) -> Char:
        """The attributes after the SGR sequences of ``head``, from the last one that resets
        everything (SGR 0 or empty, alone or first: what comes before cannot matter)."""
        sgr = self._layout.sgr
        start = max(head.rfind("\x1b[0m"), head.rfind("\x1b[m"), head.rfind("\x1b[0;"), 0)
        for params in SGR.findall(head, start):
            attrs = sgr(attrs, params)[0]
        return attrs

    def _lines(self, block: str) -> None:
        """Lay out complete simple lines (``block`` = lines joined by LF, no final LF)."""
        s = self._screen
        columns = s.columns
        cursor = s.cursor
        lines = s.lines
        buffer = s.buffer
        old = [buffer.get(y) for y in range(lines - 1)]
        unlaid = self._scrolled_off_unlaid
        split = self._split(block) if unlaid is not None else None
        if split is None:
            rows, x, attrs, last_text = self._layout.rows(block, cursor.x, cursor.attrs)
            e = len(rows)
            pushed = [row_runs(old[y], columns) for y in range(min(e, lines - 1))]
            pushed.extend(rows[: max(0, e - (lines - 1))])
            if pushed:
                self._scrolled_off(pushed)
        else:
            # The whole screen scrolls off, then the pieces (some unlaid), and the rows of
            # the rest that do not fit on the screen.
            pieces, rest = split
            assert unlaid is not None
            self._scrolled_off([row_runs(row, columns) for row in old])
            x, attrs, last_text = cursor.x, cursor.attrs, ""
            unlaid_rows = 0
            for text, count in pieces:
                if count < 0:
                    rows, x, attrs, drawn = self._layout.rows(text, x, attrs)
                    self._scrolled_off(rows)
                else:
                    unlaid(text, attrs, columns, count)
                    unlaid_rows += count
                    attrs = self._fold(text, attrs)
                    x = 0
                    drawn = _drawn(text[-400:]) or _drawn(text)
                last_text = drawn or last_text
            rows, x, attrs, drawn = self._layout.rows(rest, x, attrs)
            last_text = drawn or last_text
            e = len(rows)
            self._scrolled_off(rows[: e - (lines - 1)])
            e += unlaid_rows
        keep_old = old[e:] if e < lines - 1 else []
        keep_new = rows[-(lines - 1):] if lines > 1 else []
        new_buffer = s.new_buffer()
        y = 0
        for line in keep_old:
            if line:
                new_buffer[y] = line
            y += 1
        default = s.default_char
        caches = s.char_caches
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
            s.last_char = last_text[-1]
        cursor.x = x
        cursor.attrs = attrs
        s.dirty.update(range(lines))
