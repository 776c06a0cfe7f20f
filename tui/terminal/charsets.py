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

LATIN1_UPPER: dict[int, str] = {c: chr(c + 0x80) for c in range(0x20, 0x80)}

CHARSETS: dict[str, dict[int, str] | None] = {
    "0": DEC_GRAPHICS,  # DEC Special Graphics (line drawing)
    "A": LATIN1_UPPER,  # British, which xterm at VT220 level without NRC mode shows as Latin-1
    "B": None,          # US ASCII
}
"""Final byte of a designation -> table. Any other set (the DEC alternate ROMs "1" and "2",
national replacement sets, DEC supplemental, ...) is drawn as ASCII, as xterm does without
NRC mode."""


def designate(final: str, size96: bool = False) -> dict[int, str] | None:
    """The table of a designated set. "A" is the upper half of ISO Latin-1 shifted into GL
    (``a`` shows as ``á``) both as a 96-character set (``ESC - A`` ... ``ESC / A``) and as the
    94-character "British" set: xterm maps British so unless NRC mode is on or it plays a
    VT100 (then only ``#`` changes, to ``£``); corral answers DA as a VT220. tmux ignores
    these designations."""
    if size96:
        return LATIN1_UPPER if final == "A" else None
    return CHARSETS.get(final)
