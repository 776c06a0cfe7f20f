"""Lines of a terminal as canonical runs of styled text, the ANSI palettes, selections.

Pure data and functions shared by the screen (``screen.py``) and the emulator.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import groupby, repeat
from operator import itemgetter
from typing import TYPE_CHECKING, NamedTuple, Protocol, Self

from pyte.screens import StaticDefaultDict

from .widths import cell_display, char_width

if TYPE_CHECKING:
    from .sgr import Char  # (sgr.py imports this module)

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
)), foreground="#D8DEE9", background="#151A21")
"""16 ANSI colours for corral-dark (and any dark theme): readable on #151A21. ``foreground``
and ``background`` are the theme's default colours the pane shows for "default"."""

ANSI_LIGHT: dict[str, str] = dict(zip(ANSI_NAMES, (
    "#1E2329", "#B3261E", "#2E7D32", "#8A6100", "#1F6FA3", "#8E3FA8", "#0E7C86", "#C9CED6",
    "#5F6B7A", "#D93B30", "#3E9B43", "#A87A00", "#2C85C2", "#A855C7", "#1496A1", "#F7F8FA",
)), foreground="#1E2329", background="#F7F8FA")
"""16 ANSI colours for corral-light (and any light theme): readable on #F7F8FA."""


def ansi_palette(dark: bool) -> dict[str, str]:
    """The ANSI palette for a theme: pass ``app.current_theme.dark``."""
    return ANSI_DARK if dark else ANSI_LIGHT


# --------------------------------------------------------------------------------------------
# Lines

Key = tuple  # (fg, bg, bold, italics, underscore, strikethrough, reverse, blink, dim,
#               conceal, overline): a cell's attributes (sgr.Char without its text)
Run = tuple  # (text, Key)

DEFAULT_KEY: Key = ("default", "default") + (False,) * 9
"""The attribute key of an unwritten cell."""


def merge_runs(runs: Iterable[Run]) -> tuple[Run, ...]:
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


cell_key = itemgetter(slice(1, None))  # a cell's Key (one C-level slice)
cell_text = itemgetter(0)


Row = StaticDefaultDict[int, "Char"]
"""A screen row: its cells by column, the row's default cell for the others."""

Buffer = dict[int, Row]
"""A screen's rows by line number (a ``defaultdict``)."""


class CharCursor(Protocol):
    """pyte's cursor as the console's screen keeps it: its attributes are an ``sgr.Char``."""

    x: int
    y: int
    attrs: Char
    hidden: bool


class RunsRow(StaticDefaultDict[int, "Char"]):  # (a Row)
    """A screen row laid out by the fast path, which remembers its canonical runs until it
    is changed: a row that scrolls off untouched goes to the scrollback without being read
    cell by cell again, and is drawn from its runs. Every way of changing a dict forgets them
    (pyte changes rows with ``[]=``, ``del``, ``pop``, ``update`` and ``clear``)."""

    def __init__(self, default: Char, runs: tuple[Run, ...]) -> None:
        super().__init__(default)
        self.runs: tuple[Run, ...] | None = runs

    def __setitem__(self, key: int, value: Char) -> None:
        self.runs = None
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: int) -> None:
        self.runs = None
        dict.__delitem__(self, key)

    # dict's ``|=`` takes any mapping or pairs where ``|`` takes dicts only, and mypy
    # wants an override of ``|=`` to take no more than ``|``.
    def __ior__(  # type: ignore[override,misc]
            self, other: Mapping[int, Char] | Iterable[tuple[int, Char]]) -> Self:
        self.runs = None
        return dict.__ior__(self, other)

    def pop(self, *args):
        self.runs = None
        return dict.pop(self, *args)

    def popitem(self):
        self.runs = None
        return dict.popitem(self)

    def setdefault(self, *args):
        self.runs = None
        return dict.setdefault(self, *args)

    def update(self, *args, **kwargs) -> None:
        self.runs = None
        dict.update(self, *args, **kwargs)

    def clear(self) -> None:
        self.runs = None
        dict.clear(self)


def row_runs(line: Row | None, columns: int) -> tuple[Run, ...]:
    """A pyte buffer row as canonical runs (wide-character stubs skipped, orphans as spaces;
    a row never written, None, has none)."""
    if not line:
        return ()
    if type(line) is RunsRow and line.runs is not None:
        return line.runs
    last = max(line)
    if last >= columns:
        last = columns - 1
    get = line.get
    default = line.default
    cells = list(map(get, range(last + 1), repeat(default, last + 1)))
    datas = "".join(map(cell_text, cells))
    if len(datas) == len(cells) and datas.isascii():
        # Common case: one character per cell; group the attributes in C.
        runs: list[Run] = []
        pos = 0
        for key, group in groupby(cells, cell_key):
            n = len(list(group))
            runs.append((datas[pos:pos + n], key))
            pos += n
        return merge_runs(runs)
    return merge_runs((data, c[1:]) for _x, data, c in visible_cells(cells))


def visible_cells(cells: Iterable) -> Iterable[tuple[int, str, tuple]]:
    """``(x, text, cell)`` of the cells a row shows: the empty stub after a wide character
    is skipped, an orphaned stub shows as a space."""
    prev_wide = False
    for x, c in enumerate(cells):
        data = c.data
        if data == "":
            if prev_wide:
                prev_wide = False
                continue
            data = " "
        elif not data.isascii():
            prev_wide = char_width(data[0]) == 2
            data = cell_display(data, 2 if prev_wide else 1)
        else:
            prev_wide = False
        yield x, data, c


class Selection(NamedTuple):
    """A selected range in view coordinates: absolute lines (scrollback then screen)."""

    start_line: int
    start_x: int
    end_line: int
    end_x: int
