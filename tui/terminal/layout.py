"""How the flood fast path (``fastpath.py``) lays out simple lines — printable ASCII, TAB,
CR and SGR sequences, each ended by LF — into canonical rows (``lines.merge_runs``), with the
screen's rules: wrap at the last column, tab stops, CR overwriting, SGR as ``sgr.apply_sgr``
computes it.

Most lines of a flood end with CR LF, fit the width and hold no tab: they start at the first
column and are laid out without looking at single cells. The SGR sequences of a line are
applied as one cached *plan* per sequence of parameters and starting attributes; the plans of
one set of attributes sit in a table of their own, and a plan points to the table of the
attributes it ends with, so a line costs one split at its sequences and one lookup.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Set
from typing import Protocol

from .lines import DEFAULT_KEY, Key, Run, merge_runs
from .sgr import Char, apply_sgr

SGR = re.compile(r"\x1b\[([0-9;]*)m")
"""An SGR sequence, its parameters as the group (the fast path's only escape)."""
_TOKENS = re.compile(r"([\x20-\x7e]+)|\x1b\[([0-9;]*)m|(\r)|(\t)")

Rows = list[tuple[Run, ...]]
Plan = tuple  # (groups, attrs after, key after, length of the sequences, table after)

_MAX_PLANS = 4096


def _grouped(parts: list[str], groups: tuple) -> tuple[list[Run], str]:
    """The runs of a line (``parts`` as split at its SGR sequences) under a plan's
    ``groups`` (text pieces of one key joined, empty ones dropped, neighbours of one key
    merged), and the last non-empty piece."""
    out: list[Run] = []
    last_key = None
    last_text = ""
    for i, many, k in groups:
        t = parts[i] if many is None else "".join(parts[many])
        if t:
            last_text = t
            if k == last_key:
                out[-1] = (out[-1][0] + t, k)
            else:
                out.append((t, k))
                last_key = k
    return out, last_text


class Geometry(Protocol):
    """What a layout reads from its screen (the console's screen, or what the scrollback
    keeps of it for a deferred block)."""

    @property
    def columns(self) -> int: ...

    @property
    def default_char(self) -> Char: ...

    @property
    def tabstops(self) -> Set[int]: ...


class Layout:
    """Lays out simple lines for one screen (its width and tab stops at the time)."""

    def __init__(self, screen: Geometry) -> None:
        self._screen = screen
        self._sgr_cache: dict[tuple[Char, str], tuple[Char, Key]] = {}
        self._tables: dict[Char, dict[tuple[str, ...], Plan]] = {}
        self._plans = 0

    def rows(self, block: str, x: int, attrs: Char) -> tuple[Rows, int, Char, str]:
        """Lay out ``block`` (complete lines joined by LF, without the final LF) from column
        ``x`` with attributes ``attrs``. Returns the rows, the column and attributes after,
        and the last text drawn (for REP)."""
        rows: Rows = []
        pieces = block.split("\r\n")
        tail = pieces.pop()  # the last line, or lines ending with a bare LF
        key = tuple(attrs[1:])
        last_text = ""
        if pieces:
            odd = (len(pieces) != block.count("\n") or "\t" in block
                   or block.count("\r") != len(pieces) + (tail[-1:] == "\r"))
            if x:
                first = pieces[0]
                x, attrs, key, last_text = self._general(
                    (first + "\r").split("\n"), x, attrs, key, last_text, rows)
                pieces = pieces[1:]
            attrs, key, last_text = self._crlf(pieces, odd, attrs, key, last_text, rows)
            x = 0
        x, attrs, key, last_text = self._general(tail.split("\n"), x, attrs, key, last_text,
                                                 rows)
        return rows, x, attrs, last_text

    # -- plans and SGR -------------------------------------------------------------------------

    def _table(self, attrs: Char) -> dict[tuple[str, ...], Plan]:
        table = self._tables.get(attrs)
        if table is None:
            table = self._tables[attrs] = {}
        return table

    def _plan(self, attrs: Char, params: tuple[str, ...]) -> Plan:
        """What the SGR sequences ``params`` of a line do to a line starting with ``attrs``.
        ``groups`` are the runs of text pieces (between the sequences) that share a key, as
        ``(index of the piece in the split line, slice of its pieces if more than one,
        key)``."""
        start = attrs
        keys = [tuple(attrs[1:])]
        for p in params:
            attrs, key = self.sgr(attrs, p)
            keys.append(key)
        groups = []
        first = 0
        for i in range(1, len(keys) + 1):
            if i == len(keys) or keys[i] != keys[first]:
                groups.append((2 * first, None if i == first + 1 else
                               slice(2 * first, 2 * i, 2), keys[first]))
                first = i
        if self._plans >= _MAX_PLANS:
            self._tables.clear()  # tables still in use stay valid; they are dropped after
            self._plans = 0
        plan = (tuple(groups), attrs, keys[-1], sum(len(p) + 3 for p in params),
                self._table(attrs))
        self._table(start)[params] = plan
        self._plans += 1
        return plan

    def sgr(self, attrs: Char, params: str) -> tuple[Char, Key]:
        """Attributes after ``CSI params m``, as the screen computes them (cached)."""
        k = (attrs, params)
        r = self._sgr_cache.get(k)
        if r is None:
            new = apply_sgr(attrs, params, self._screen.default_char)
            r = (new, tuple(new[1:]))
            if len(self._sgr_cache) > _MAX_PLANS:
                self._sgr_cache.clear()
            self._sgr_cache[k] = r
        return r

    # -- lines ending with CR LF, from the first column -------------------------------------

    def _crlf(self, pieces: list[str], odd: bool, attrs: Char, key: Key, last_text: str,
              rows: Rows) -> tuple[Char, Key, str]:
        """Lines that each ended with CR LF (``odd``: some may hold a tab, a CR or a bare
        LF), every one starting at the first column."""
        columns = self._screen.columns
        table = self._table(attrs)
        split = SGR.split
        append = rows.append
        default = DEFAULT_KEY
        for body in pieces:
            if odd and ("\r" in body or "\n" in body or "\t" in body):
                _, attrs, key, last_text = self._general(
                    (body + "\r").split("\n"), 0, attrs, key, last_text, rows)
                table = self._table(attrs)
                continue
            if "\x1b" not in body:
                if len(body) > columns:
                    _, attrs, key, last_text = self._long([body], 0, attrs, key, last_text,
                                                          rows)
                elif body:
                    last_text = body
                    if key != default:
                        append(((body, key),))
                    elif body[-1] != " ":
                        append(((body, default),))
                    else:
                        t = body.rstrip(" ")
                        append(((t, default),) if t else ())
                else:
                    append(())
                continue
            parts = split(body)
            params = tuple(parts[1::2])
            plan = table.get(params)
            if plan is None:
                plan = self._plan(attrs, params)
            groups, end_attrs, end_key, esc_len, end_table = plan
            if len(body) - esc_len > columns:
                _, attrs, key, last_text = self._long(parts, 0, attrs, key, last_text, rows)
                table = self._table(attrs)
                continue
            attrs, key, table = end_attrs, end_key, end_table
            out, text = _grouped(parts, groups)
            if text:
                last_text = text
            if out and out[-1][1] == default:
                t = out[-1][0].rstrip(" ")
                if t:
                    out[-1] = (t, default)
                else:
                    out.pop()
            append(tuple(out))
        return attrs, key, last_text

    # -- any simple line ------------------------------------------------------------------

    def _general(self, lines: Iterable[str], x: int, attrs: Char, key: Key, last_text: str,
                 rows: Rows) -> tuple[int, Char, Key, str]:
        """Lines from any column, each with its CR (if any) still at the end."""
        columns = self._screen.columns
        split = SGR.split
        for line in lines:
            cr_end = line[-1:] == "\r"
            body = line[:-1] if cr_end else line
            if "\t" in body or "\r" in body:
                x, attrs, key, last_text = self._cells(line, x, attrs, key, last_text, rows)
                continue
            x0 = x
            if "\x1b" in body:
                parts = split(body)
                params = tuple(parts[1::2])
                plan = self._table(attrs).get(params)
                if plan is None:
                    plan = self._plan(attrs, params)
                groups, end_attrs, end_key, esc_len, _ = plan
                width = len(body) - esc_len
                if x + width > columns:
                    x, attrs, key, last_text = self._long(parts, x, attrs, key, last_text,
                                                          rows)
                    if cr_end:
                        x = 0
                    continue
                attrs, key = end_attrs, end_key
                out, text = _grouped(parts, groups)
                if text:
                    last_text = text
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
        return x, attrs, key, last_text

    def _long(self, parts: list[str], x: int, attrs: Char, key: Key, last_text: str,
              rows: Rows) -> tuple[int, Char, Key, str]:
        """A line without tab or CR (``parts`` as split at its SGR sequences) that wraps."""
        sgr = self.sgr
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
               rows: Rows) -> tuple[int, Char, Key, str]:
        """A line with tabs or carriage returns inside, cell by cell."""
        sgr = self.sgr
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

    def _next_tab(self, x: int) -> int:
        s = self._screen
        for stop in sorted(s.tabstops):
            if x < stop:
                return stop
        return s.columns - 1
