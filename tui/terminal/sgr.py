"""Character attributes and SGR (``CSI … m``): the cell type of the screen and how a
parameter string changes it.

Colours are stored so that every distinct colour a program asks for stays distinct: the 16
ANSI colours by name (``"red"``, ``"brightred"``), 256-colour indexes 16-255 and direct
colours as ``"#rrggbb"``. (pyte stored indexes 0-15 as xterm's hex values, so index 16, the
black of the colour cube, came back as the theme's "black" slot.)
"""

from __future__ import annotations

from typing import Any, NamedTuple

from pyte.graphics import FG_BG_256

from .lines import ANSI_NAMES


class Char(NamedTuple):
    """One cell: its text (a character plus any combining marks) and its attributes.
    Field-compatible with ``pyte.screens.Char``, with three more attributes at the end."""

    data: str
    fg: str = "default"
    bg: str = "default"
    bold: bool = False
    italics: bool = False
    underscore: bool = False
    strikethrough: bool = False
    reverse: bool = False
    blink: bool = False
    dim: bool = False
    conceal: bool = False
    overline: bool = False


DEFAULT_CHAR = Char(" ")
CUBE = ["#" + h for h in FG_BG_256]  # index -> "#rrggbb" (16-255 used)

# Plain SGR numbers -> (field, value).
_SIMPLE: dict[int, tuple[str, str | bool]] = {
    1: ("bold", True), 2: ("dim", True), 3: ("italics", True), 4: ("underscore", True),
    5: ("blink", True), 6: ("blink", True), 7: ("reverse", True), 8: ("conceal", True),
    9: ("strikethrough", True), 21: ("underscore", True), 23: ("italics", False),
    24: ("underscore", False), 25: ("blink", False), 27: ("reverse", False),
    28: ("conceal", False), 29: ("strikethrough", False), 39: ("fg", "default"),
    49: ("bg", "default"), 53: ("overline", True), 55: ("overline", False),
}
for _i in range(8):
    _SIMPLE[30 + _i] = ("fg", ANSI_NAMES[_i])
    _SIMPLE[40 + _i] = ("bg", ANSI_NAMES[_i])
    _SIMPLE[90 + _i] = ("fg", ANSI_NAMES[8 + _i])
    _SIMPLE[100 + _i] = ("bg", ANSI_NAMES[8 + _i])


def _indexed(n: int) -> str | None:
    if 0 <= n < 16:
        return ANSI_NAMES[n]
    if 16 <= n < 256:
        return CUBE[n]
    return None


def _direct(r: int, g: int, b: int) -> str | None:
    if 0 <= r < 256 and 0 <= g < 256 and 0 <= b < 256:
        return f"#{r:02x}{g:02x}{b:02x}"
    return None


def _number(s: str) -> int:
    if not s.isdigit():
        return 0
    s = s.lstrip("0")
    if len(s) > 5:  # clamped as xterm does, and never thousands of digits converted
        return 65535
    return int(s) if s else 0


def _extended(groups: list[str], i: int) -> tuple[str | None, int]:
    """``38``/``48`` in the semicolon form (``38;5;n``, ``38;2;r;g;b``) starting at
    ``groups[i]`` (the ``38``); returns the colour and the index after it."""
    kind = _number(groups[i + 1]) if i + 1 < len(groups) else -1
    if kind == 5 and i + 2 < len(groups):
        return _indexed(_number(groups[i + 2])), i + 3
    if kind == 2 and i + 4 < len(groups):
        r, g, b = (_number(v) for v in groups[i + 2:i + 5])
        return _direct(r, g, b), i + 5
    return None, len(groups)  # malformed: xterm stops reading the sequence here


def _colon(sub: list[str]) -> str | None:
    """The colon form (ITU T.416): ``38:5:n``, ``38:2:cs:r:g:b`` or, as many programs
    send it, ``38:2:r:g:b`` without the colour-space id."""
    kind = _number(sub[1]) if len(sub) > 1 else -1
    if kind == 5 and len(sub) >= 3:
        return _indexed(_number(sub[2]))
    if kind == 2 and len(sub) >= 5:
        rgb = sub[3:6] if len(sub) >= 6 else sub[2:5]
        return _direct(*(_number(v) for v in rgb))
    return None


def apply_sgr(attrs: Char, params: str, default: Char = DEFAULT_CHAR) -> Char:
    """``attrs`` after ``CSI params m`` (xterm's rules; unknown numbers are ignored).
    ``default`` is what ``SGR 0`` goes back to."""
    if not params or params == "0":
        return default
    changes: dict[str, Any] = {}  # field -> value (a str or a bool, as the field has it)
    groups = params.split(";")
    i = 0
    n = len(groups)
    while i < n:
        group = groups[i]
        if ":" in group:
            sub = group.split(":")
            head = _number(sub[0])
            if head in (38, 48):
                colour = _colon(sub)
                if colour is not None:
                    changes["fg" if head == 38 else "bg"] = colour
            elif head == 4:
                # Underline styles: 4:0 off, 4:1..4:5 (single, double, curly, ...) on.
                changes["underscore"] = _number(sub[1]) != 0 if len(sub) > 1 else True
            # 58 (underline colour) and anything else with sub-parameters: ignored.
            i += 1
            continue
        code = _number(group)
        if code == 0:
            changes = default._asdict()
            del changes["data"]
        elif code in _SIMPLE:
            field, value = _SIMPLE[code]
            changes[field] = value
        elif code == 22:
            changes["bold"] = changes["dim"] = False
        elif code in (38, 48):
            colour, i = _extended(groups, i)
            if colour is not None:
                changes["fg" if code == 38 else "bg"] = colour
            continue
        i += 1
    return attrs._replace(**changes)
