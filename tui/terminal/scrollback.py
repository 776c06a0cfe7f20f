"""The scrollback: lines that left the top of the screen, oldest first, at most ``maxlen``.

A flood pushes tens of thousands of lines through the scrollback, and nobody looks at
most of them: a limit of 5000 keeps only the last 5000 rows, and even those are read only
when the user scrolls back, searches or copies. So the flood fast path hands over whole
blocks of simple lines *unlaid* (:meth:`Scrollback.defer`): the raw text, the attributes it
starts with, the width it is laid out at and the number of rows it makes (counted exactly,
without laying it out). A block is laid out when the scrollback is first read, and only if
some of its rows are still inside the limit; the rows are identical to what laying it out
at once would have given (``tests/terminal`` compares the two).

Length is exact at all times without laying anything out, so a view at the bottom of a
flood (the usual case) never pays for lines it does not show.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from .layout import Layout
from .lines import Run
from .sgr import DEFAULT_CHAR, Char

Row = tuple[Run, ...]


class _Geometry(NamedTuple):
    """What a :class:`~tui.terminal.layout.Layout` reads from a screen, frozen as it was
    when a block was deferred (the fast path runs only with normal video, and a deferred
    block holds no tab)."""

    columns: int
    default_char: Char = DEFAULT_CHAR
    tabstops: frozenset[int] = frozenset()


class _Entry(NamedTuple):
    rows: list[Row] | None  # laid-out rows, or None for a deferred block
    block: str  # complete simple lines joined by LF (each ending in CR)
    attrs: Char  # the attributes the block starts with
    columns: int
    nrows: int  # rows the entry makes (not ``count``: that is tuple's method)


class Scrollback:
    """A bounded sequence of rows (``len``, indexing, iteration, ``extend``, ``clear``),
    some of which may still be raw text laid out on first read."""

    def __init__(self, maxlen: int) -> None:
        self.maxlen = max(0, maxlen)
        self._rows: deque[Row] = deque(maxlen=self.maxlen)
        self._pending: deque[_Entry] = deque()
        self._pending_rows = 0
        self._layouts: dict[int, Layout] = {}

    def __len__(self) -> int:
        if not self._pending:
            return len(self._rows)
        return min(self.maxlen, len(self._rows) + self._pending_rows)

    def __getitem__(self, index: int) -> Row:
        self._settle()
        return self._rows[index]

    def __iter__(self) -> Iterator[Row]:
        self._settle()
        return iter(self._rows)

    @property
    def deferred_rows(self) -> int:
        """Rows not laid out yet (for tests and benchmarks)."""
        return sum(e.nrows for e in self._pending if e.rows is None)

    def extend(self, rows: Iterable[Row]) -> None:
        if not self._pending:
            self._rows.extend(rows)
            return
        rows = list(rows)
        if rows:
            self._add(_Entry(rows, "", DEFAULT_CHAR, 0, len(rows)))

    def defer(self, block: str, attrs: Char, columns: int, count: int) -> None:
        """Take ``block`` (see :class:`_Entry`), which makes ``count`` rows at ``columns``,
        to be laid out when read."""
        if count:
            self._add(_Entry(None, block, attrs, columns, count))

    def clear(self) -> None:
        self._rows.clear()
        self._pending.clear()
        self._pending_rows = 0

    def _add(self, entry: _Entry) -> None:
        pending = self._pending
        pending.append(entry)
        self._pending_rows += entry.nrows
        # Entries whose every row is beyond the limit are dropped unread.
        while pending and self._pending_rows - pending[0].nrows >= self.maxlen:
            self._pending_rows -= pending.popleft().nrows
        if self._pending_rows >= self.maxlen:
            self._rows.clear()

    def _settle(self) -> None:
        """Lay out the deferred blocks (the rows beyond the limit fall off the front)."""
        if not self._pending:
            return
        rows = self._rows
        for entry in self._pending:
            rows.extend(entry.rows if entry.rows is not None else self._lay_out(entry))
        self._pending.clear()
        self._pending_rows = 0

    def _lay_out(self, entry: _Entry) -> list[Row]:
        layout = self._layouts.get(entry.columns)
        if layout is None:
            if len(self._layouts) > 4:
                self._layouts.clear()
            layout = self._layouts[entry.columns] = Layout(_Geometry(entry.columns))
        return layout.rows(entry.block, 0, entry.attrs)[0]
