"""Drawing a VM's screen in the terminal, and typing into it: no widgets here.

- :func:`choose_mode` picks how the screen is drawn: the Kitty graphics protocol, Sixel,
  or Unicode half-blocks (two pixels per cell, true colour), which work everywhere,
  inside tmux and over SSH too. ``[console] graphics`` forces one; ``auto`` asks the
  terminal once, before the UI starts (the answer cannot be read after).
- :class:`Fit` places a screen of W×H pixels in a pane of C×R cells, keeping its aspect
  ratio, and maps a cell back to the guest pixel under it (for the mouse).
- :class:`HalfBlocks` turns a Pillow image into rows of ``▀`` cells (foreground: the upper
  pixel, background: the lower), only the rows asked for.
- :func:`key_events` turns a Textual key into X keysym presses and releases.
"""

from __future__ import annotations

import math
import os
import sys
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.color import Color, ColorType
from rich.color_triplet import ColorTriplet
from rich.segment import Segment
from rich.style import Style

from backends.vnc import KEYSYMS, MODIFIERS, SHIFTED, keysym_for_char

if TYPE_CHECKING:
    from PIL import Image  # imported when a screen is first drawn, not at start-up

MODES = ("auto", "kitty", "sixel", "halfblock")

_probed: str | None = None


def probe_terminal() -> str:
    """Ask the terminal what it can draw (call before Textual starts): "kitty", "sixel" or
    "halfblock". Inside tmux or screen, or without a terminal, half-blocks: graphics
    escapes would not reach the real terminal there."""
    global _probed
    if _probed is not None:
        return _probed
    env = os.environ
    _probed = "halfblock"
    if (env.get("TMUX") or env.get("STY") or env.get("TERM", "").startswith(("screen", "tmux"))
            or not (sys.__stdout__ and sys.__stdout__.isatty())):
        return _probed
    try:
        # importing it asks the terminal (Sixel first, then the Kitty protocol: Kitty has
        # no Sixel, terminals with both draw Sixel better through textual-image)
        import textual_image.renderable as chosen
        from textual_image.renderable.sixel import Image as SixelImage
        from textual_image.renderable.tgp import Image as TGPImage

        if chosen.Image is SixelImage:
            _probed = "sixel"
        elif chosen.Image is TGPImage:
            _probed = "kitty"
    except Exception:  # any trouble asking: half-blocks always work
        _probed = "halfblock"
    return _probed


def prepare(setting: str) -> None:
    """Before Textual starts: ask the terminal (``auto``), and let textual-image read the
    cell size in pixels while it still can (Kitty and Sixel need it)."""
    mode = probe_terminal() if setting == "auto" else setting
    if mode in ("kitty", "sixel") and sys.__stdout__ and sys.__stdout__.isatty():
        try:
            import textual_image.widget  # noqa: F401 - reads the cell size on import
        except Exception as e:  # drawing falls back on half-blocks
            print(f"corral: textual-image cannot draw here ({e}); using half-blocks",
                  file=sys.stderr)


def cell_pixels() -> tuple[int, int]:
    """A cell's size in pixels, as textual-image read it (10×20 when unknown)."""
    try:
        from ._textual_compat import image_cell_size

        width, height = image_cell_size()
        return max(1, width), max(1, height)
    except Exception:
        return 10, 20


def choose_mode(setting: str) -> str:
    """The drawing mode for ``[console] graphics`` (``auto`` uses :func:`probe_terminal`'s
    answer, or half-blocks when the terminal was not asked)."""
    if setting in ("kitty", "sixel", "halfblock"):
        return setting
    return _probed or "halfblock"


@dataclass(frozen=True)
class Fit:
    """A screen of ``width``×``height`` pixels scaled into ``columns``×``rows`` cells of
    ``cell_w``×``cell_h`` sub-pixels (half-blocks: 1×2), aspect ratio kept, centred."""

    width: int
    height: int
    columns: int
    rows: int
    cell_w: int = 1
    cell_h: int = 2

    @property
    def scale(self) -> float:
        """Sub-pixels per guest pixel."""
        if self.width <= 0 or self.height <= 0:
            return 0.0
        return min(self.columns * self.cell_w / self.width,
                   self.rows * self.cell_h / self.height)

    @property
    def size(self) -> tuple[int, int]:
        """The scaled image, in sub-pixels."""
        s = self.scale
        return max(1, round(self.width * s)), max(1, round(self.height * s))

    @property
    def cells(self) -> tuple[int, int]:
        """The scaled image, in cells."""
        w, h = self.size
        return min(self.columns, math.ceil(w / self.cell_w)), min(self.rows,
                                                                   math.ceil(h / self.cell_h))

    @property
    def offset(self) -> tuple[int, int]:
        """Where the image starts, in cells (left, top)."""
        cw, ch = self.cells
        return (self.columns - cw) // 2, (self.rows - ch) // 2

    def to_guest(self, column: int, row: int, *, clamp: bool = False) -> tuple[int, int] | None:
        """The guest pixel under the middle of cell (column, row); None outside the
        image (with ``clamp``, the nearest edge pixel: a drag that leaves the picture)."""
        ox, oy = self.offset
        cw, ch = self.cells
        if self.scale <= 0:
            return None
        if clamp:
            column, row = max(ox, min(column, ox + cw - 1)), max(oy, min(row, oy + ch - 1))
        if not (ox <= column < ox + cw and oy <= row < oy + ch):
            return None
        sx, sy = self.scale, self.scale
        x = ((column - ox) + 0.5) * self.cell_w / sx
        y = ((row - oy) + 0.5) * self.cell_h / sy
        return min(self.width - 1, int(x)), min(self.height - 1, int(y))

    def rows_of(self, y: int, h: int) -> range:
        """The cell rows showing guest rows ``y``..``y+h`` (for a dirty rectangle)."""
        s = self.scale
        oy = self.offset[1]
        top = oy + int(y * s) // self.cell_h
        bottom = oy + math.ceil((y + h) * s / self.cell_h)
        return range(max(0, top - 1), min(self.rows, bottom + 1))


def _color(rgb: bytes) -> Color:
    return Color("#" + rgb.hex(), ColorType.TRUECOLOR,
                 triplet=ColorTriplet(rgb[0], rgb[1], rgb[2]))


class HalfBlocks:
    """Rows of half-block cells from an image scaled with a :class:`Fit` (1×2)."""

    def __init__(self) -> None:
        self._styles: dict[bytes, Style] = {}
        self._scaled: bytes = b""
        self._fit: Fit | None = None

    def scale(self, image: Image.Image, fit: Fit) -> None:
        """Scale ``image`` for ``fit`` (done once per frame, in C)."""
        from PIL import Image

        self._fit = fit
        w, h = fit.size
        self._scaled = image.resize((w, h), Image.Resampling.BOX).tobytes()

    def _style(self, key: bytes) -> Style:
        style = self._styles.get(key)
        if style is None:
            # Style.from_color and a bare Color: ~2.5x faster than Style(color=...),
            # which matters when a whole new picture brings thousands of new colours
            style = Style.from_color(_color(key[:3]), _color(key[3:]))
            if len(self._styles) < 65536:  # full: new pairs are not kept (clearing a
                self._styles[key] = style  # full cache at once stalls one frame)
        return style

    def row(self, y: int, blank: Style) -> list[Segment]:
        """Cell row ``y`` of the pane: padding in ``blank``, then the image."""
        fit = self._fit
        if fit is None:
            return []
        ox, oy = fit.offset
        w, h = fit.size
        columns = fit.columns
        line = y - oy
        top_y, bottom_y = line * 2, line * 2 + 1
        if line < 0 or top_y >= h:
            return [Segment(" " * columns, blank)]
        data = self._scaled
        stride = w * 3
        top = data[top_y * stride:(top_y + 1) * stride]
        bottom = data[bottom_y * stride:(bottom_y + 1) * stride] if bottom_y < h else None
        segments = [Segment(" " * ox, blank)] if ox else []
        run_key = b""
        run = 0
        for x in range(0, stride, 3):
            if bottom is not None:
                key = top[x:x + 3] + bottom[x:x + 3]
            else:
                key = top[x:x + 3] + b"\x00\x00\x00"
            if key == run_key:
                run += 1
                continue
            if run:
                segments.append(Segment("▀" * run, self._style(run_key)))
            run_key, run = key, 1
        if run:
            segments.append(Segment("▀" * run, self._style(run_key)))
        right = columns - ox - w
        if right > 0:
            segments.append(Segment(" " * right, blank))
        return segments


def _base_keysym(name: str, character: str | None) -> tuple[int | None, bool]:
    """The keysym of a key name's last part, and whether it is typed with shift."""
    if name in KEYSYMS:
        return KEYSYMS[name], False
    if len(name) == 1:
        return keysym_for_char(name), name in SHIFTED
    if character and len(character) == 1 and character.isprintable():
        return keysym_for_char(character), character in SHIFTED
    try:
        ch = unicodedata.lookup(name.replace("_", " "))
    except KeyError:
        return None, False
    return keysym_for_char(ch), ch in SHIFTED


def key_events(key: str, character: str | None) -> list[tuple[int, bool]]:
    """The X keysym presses and releases for a Textual key ("a", "A", "ctrl+c",
    "shift+f5", "alt+x", "enter", "@"...): modifiers pressed first and released last;
    shift added for characters a US keyboard types with it. Empty when unknown."""
    aliases = {"escape": "escape", "return": "enter", "ctrl+i": "tab", "ctrl+m": "enter",
               "ctrl+h": "backspace"}
    key = aliases.get(key, key)
    parts = key.split("+")
    mods = [m for m in parts[:-1] if m in MODIFIERS]
    base = parts[-1] if parts[-1] else "+"
    if len(mods) != len(parts) - 1:
        return []
    sym: int | None
    if not mods and character and len(character) == 1 and character.isprintable():
        sym, shifted = keysym_for_char(character), character in SHIFTED
    else:
        sym, shifted = _base_keysym(base, None if mods else character)
    if sym is None:
        return []
    if shifted and "shift" not in mods:
        mods.append("shift")
    if "shift" in mods and len(base) == 1 and base.isalpha():
        sym = keysym_for_char(base.upper())  # QEMU takes the case from the keysym
    events = [(KEYSYMS[m], True) for m in mods]
    events += [(sym, True), (sym, False)]
    events += [(KEYSYMS[m], False) for m in reversed(mods)]
    return events
