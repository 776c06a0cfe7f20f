"""How many columns a character takes, and what a cell shows, as xterm takes them: one
code point at a time (its wcwidth), so that the emulator's cells, Rich's measure of the
text drawn from them and the host terminal agree, and the rest of a row (the pane's border
included) never shifts.

- Regional indicators are one column each (East Asian Width "N"; xterm, glibc and tmux),
  so a flag is two; the ``wcwidth`` package counts two each.
- Zero-width characters (ZWSP, ZWNJ, ZWJ, WORD JOINER, BOM) and the variation selectors
  join the cell before them, as combining marks do, and are kept in its text (what a copy
  gives) but never drawn: a host terminal would join ``👨`` ZWJ ``👩`` into one glyph of
  two columns where xterm shows two emoji in four, and show ``❤`` VS16 two columns wide
  where xterm takes one.
"""

from __future__ import annotations

import re

from pyte.screens import wcwidth
from rich.cells import cell_len

_NOT_DRAWN = re.compile("[\u200b-\u200d\u2060\ufeff\ufe00-\ufe0f]")


def char_width(ch: str) -> int:
    """Columns of one code point: 0 (joins the cell before), 1 or 2; -1 for controls."""
    if "\U0001f1e6" <= ch <= "\U0001f1ff":
        return 1
    return wcwidth(ch)


def cell_display(data: str, width: int) -> str:
    """The text drawn for a cell holding ``data`` that takes ``width`` columns: without
    the characters never drawn, and, where what is left would not measure ``width`` columns
    (a lone emoji modifier), U+FFFD padded to it."""
    shown = _NOT_DRAWN.sub("", data) if not data.isascii() else data
    if shown.isascii() and len(shown) == width:
        return shown
    if not shown or cell_len(shown) != width:
        return "\ufffd" + " " * (width - 1)
    return shown
