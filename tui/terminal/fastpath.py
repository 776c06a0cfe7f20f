"""The flood fast path of the terminal emulator: long stretches of simple lines (printable
ASCII, TAB, CR, LF and SGR) laid out without the parser, with the screen's own rules, so that
``cat`` of a big file or a chatty boot does not crawl. The result is identical to feeding
everything through the parser (``tests/terminal`` checks it), at ~20x the speed.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pyte import modes as mo

from .lines import DEFAULT_KEY, Key, Run, RunsRow, merge_runs, row_runs
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
        self._plans: dict[tuple[Char, tuple[str, ...]], tuple] = {}

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

    def _long(self, parts: list[str], x: int, attrs: Char, key: Key, last_text: str,
              rows: list[tuple[Run, ...]]) -> tuple[int, Char, Key, str]:
        """A simple line (``parts`` as split at its SGR sequences) that wraps."""
        sgr = self._sgr
        columns = self._screen.columns
        row: list[Run] = []
        if x and x < columns:
            row.append((" " * x, DEFAULT_KEY))
        for i, body in enumerate(parts):
            if i % 2:
                attrs, key = sgr(attrs, body)
                continue
            if not body:
                continue
            last_text = body
            if x + len(body) <= columns:
                row.append((body, key))
                x += len(body)
                continue
            p = body
            while p:
                if x >= columns:
                    rows.append(merge_runs(row))
                    row = []
                    x = 0
                take = columns - x
                row.append((p[:take], key))
                x += len(p[:take])
                p = p[take:]
        rows.append(merge_runs(row))
        return x, attrs, key, last_text

    def _cells(self, line: str, x: int, attrs: Char, key: Key, last_text: str,
               rows: list[tuple[Run, ...]]) -> tuple[int, Char, Key, str]:
        """A line with tabs or carriage returns inside, cell by cell."""
        sgr = self._sgr
        columns = self._screen.columns
        cells: list[tuple[str, Key]] = []
        for tok in _TOKENS.finditer(line):
            chunk, params, cr, _tab = tok.groups()
            if chunk is not None:
                last_text = chunk
                for ch in chunk:
                    if x >= columns:
                        rows.append(merge_runs(cells))
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
        rows.append(merge_runs(cells))
        return x, attrs, key, last_text

    def _plan(self, sig: tuple[Char, tuple[str, ...]]) -> tuple:
        """What the SGR sequences of a line do to a line that starts with attributes
        ``sig[0]``: ``(groups, attrs after, key after, length of the sequences)``, where
        ``groups`` are ``(first, end, key)`` of the text pieces between the sequences with
        the same key (cached: a stream has few distinct sequences of sequences)."""
        attrs, params = sig
        keys = [tuple(attrs[1:])]
        for p in params:
            attrs, key = self._sgr(attrs, p)
            keys.append(key)
        groups = []
        first = 0
        for i in range(1, len(keys) + 1):
            if i == len(keys) or keys[i] != keys[first]:
                groups.append((first, i, keys[first]))
                first = i
        plan = (tuple(groups), attrs, keys[-1], sum(len(p) + 3 for p in params))
        if len(self._plans) > 4096:
            self._plans.clear()
        self._plans[sig] = plan
        return plan

    def _lines(self, block: str) -> None:
        """Lay out complete simple lines (``block`` = lines joined by LF, no final LF)."""
        s = self._screen
        columns = s.columns
        cursor = s.cursor
        x = cursor.x
        attrs = cursor.attrs
        key = tuple(attrs[1:])
        rows: list[tuple[Run, ...]] = []
        last_text = ""
        plans = self._plans
        split = _SGR_SPLIT.split
        for line in block.split("\n"):
            cr_end = line[-1:] == "\r"
            body = line[:-1] if cr_end else line
            if "\t" in body or "\r" in body:
                x, attrs, key, last_text = self._cells(line, x, attrs, key, last_text, rows)
                continue
            x0 = x
            if "\x1b" in body:
                parts = split(body)
                sig = (attrs, tuple(parts[1::2]))
                plan = plans.get(sig)
                if plan is None:
                    plan = self._plan(sig)
                groups, end_attrs, end_key, esc_len = plan
                width = len(body) - esc_len
                if x + width > columns:
                    x, attrs, key, last_text = self._long(parts, x, attrs, key, last_text,
                                                          rows)
                    if cr_end:
                        x = 0
                    continue
                attrs, key = end_attrs, end_key
                texts = parts[0::2]
                out: list[Run] = []
                last_key = None
                for a, b, k in groups:
                    t = texts[a] if b - a == 1 else "".join(texts[a:b])
                    if t:
                        last_text = t
                        if k == last_key:
                            out[-1] = (out[-1][0] + t, k)
                        else:
                            out.append((t, k))
                            last_key = k
            else:
                width = len(body)
                if x + width > columns:
                    x, attrs, key, last_text = self._long([body], x, attrs, key, last_text,
                                                          rows)
                    if cr_end:
                        x = 0
                    continue
                if body:
                    last_text = body
                    out = [(body, key)]
                else:
                    out = []
            x += width
            if x0 and x0 < columns:
                if out and out[0][1] == DEFAULT_KEY:
                    out[0] = (" " * x0 + out[0][0], DEFAULT_KEY)
                else:
                    out.insert(0, (" " * x0, DEFAULT_KEY))
            while out and out[-1][1] == DEFAULT_KEY:
                t = out[-1][0].rstrip(" ")
                if t:
                    out[-1] = (t, DEFAULT_KEY)
                    break
                out.pop()
            rows.append(tuple(out))
            if cr_end:
                x = 0
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
