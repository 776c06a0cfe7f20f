"""Rich styles for cell attributes, over the pane's ANSI palette (``lines.py``).

Where the palette's notion of "default" matters (xterm's rules, whose defaults are black text
on white):

- default text on a coloured background keeps the theme's text colour only while it stays
  readable there; on a background too close to it (``bg 7`` on a dark theme) it becomes the
  palette's black or bright white, whichever stands out more;
- concealed text (SGR 8) is drawn as blanks by the emulator (its cells keep their colours);
- dim (SGR 2) and overline (SGR 53) are passed on as such.
"""

from __future__ import annotations

from rich.color import Color
from rich.style import Style

from .lines import Key

_MIN_CONTRAST = 2.0  # below this ratio the theme's text colour is taken as unreadable


def _luminance(c: Color) -> float:
    r, g, b = c.get_truecolor()

    def lin(v: int) -> float:
        c = v / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)


def contrast(a: Color, b: Color) -> float:
    """WCAG contrast ratio of two colours (1 to 21)."""
    la, lb = _luminance(a), _luminance(b)
    if la < lb:
        la, lb = lb, la
    return (la + 0.05) / (lb + 0.05)


class Styles:
    """Attribute key -> Rich style, cached, for one palette."""

    def __init__(self, palette: dict[str, str]) -> None:
        self._palette = dict(palette)
        self._cache: dict[Key, Style] = {}
        self._cursor_cache: dict[Key, Style] = {}

    def color(self, name: str) -> Color | None:
        """A stored colour (palette name or ``#rrggbb``) as a Rich colour; None for the
        terminal's default."""
        if name == "default":
            return None
        value = self._palette.get(name, name)
        try:
            return Color.parse(value)
        except Exception:  # an unknown name is drawn as the default
            return None

    def _readable(self, bg: Color) -> Color | None:
        """None (the theme's text colour) when it reads well on ``bg``, else black or bright
        white, whichever contrasts more."""
        fg = self.color(self._palette.get("foreground", "default"))
        if fg is None or contrast(fg, bg) >= _MIN_CONTRAST:
            return None
        dark, light = self.color("black"), self.color("brightwhite")
        if dark is None or light is None:
            return None
        return dark if contrast(dark, bg) >= contrast(light, bg) else light

    def style(self, key: Key) -> Style:
        style = self._cache.get(key)
        if style is None:
            (fg, bg, bold, italics, underscore, strike, reverse, blink,
             dim, conceal, overline) = key
            color, bgcolor = self.color(fg), self.color(bg)
            if color is None and bgcolor is not None:
                color = self._readable(bgcolor)
            style = Style(
                color=color, bgcolor=bgcolor, bold=bold, dim=dim, italic=italics,
                underline=underscore, strike=strike, reverse=reverse, blink=blink,
                conceal=conceal, overline=overline,
            )
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[key] = style
        return style

    def cursor(self, key: Key) -> Style:
        """The style of the cell under the cursor: its style in reverse video."""
        style = self._cursor_cache.get(key)
        if style is None:
            style = self.style(key) + Style(reverse=not key[6])
            self._cursor_cache[key] = style
        return style
