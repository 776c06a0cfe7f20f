"""Character sets a program can designate into G0-G3 (``ESC ( F`` ... ``ESC + F``) and
shift in (SI/SO, LS2/LS3), as ``str.translate`` tables; ``None`` is plain ASCII/UTF-8.

xterm's rules: a designation works in UTF-8 mode too (pyte ignored it there, so ncurses boxes
showed as ``lqqqk``), and the DEC Special Graphics set maps only 0x5f-0x7e. tmux also turns
``+ , - . 0`` into arrows and a block (its terminfo ACS table) when it draws them; xterm and a
VT100 do not, and neither do we.
"""

from __future__ import annotations

# DEC Special Graphics ("0"), 0x5f-0x7e, as xterm draws them.
_DEC_GRAPHICS = dict(zip(
    range(0x5F, 0x7F),
    " ◆▒␉␌␍␊°±␤␋┘┐┌└┼⎺⎻─⎼⎽├┤┴┬│≤≥π≠£·",
))

DEC_GRAPHICS: dict[int, str] = _DEC_GRAPHICS
UK: dict[int, str] = {0x23: "£"}

LATIN1_UPPER: dict[int, str] = {c: chr(c + 0x80) for c in range(0x20, 0x80)}

CHARSETS: dict[str, dict[int, str] | None] = {
    "0": DEC_GRAPHICS,  # DEC Special Graphics (line drawing)
    "2": DEC_GRAPHICS,  # DEC Alternate ROM special graphics: xterm draws it as "0"
    "A": UK,            # United Kingdom: # is the pound sign
    "B": None,          # US ASCII
}
"""Final byte of a 94-character designation (``ESC ( F`` ... ``ESC + F``) -> table. Any other
set (national replacement sets, DEC supplemental, ...) is taken as ASCII, as tmux does."""


def designate(final: str, size96: bool = False) -> dict[int, str] | None:
    """The table of a designated set. A 96-character set (``ESC - A`` ... ``ESC / A``) "A" is
    the upper half of ISO Latin-1, which xterm shows when it is shifted into GL (LS1/LS2/LS3:
    ``a`` becomes ``á``); tmux ignores 96-character designations."""
    if size96:
        return LATIN1_UPPER if final == "A" else None
    return CHARSETS.get(final)
