"""A data table that does not paint while it is hidden.

Switching the main table between views hides one table and shows another. The frame
painted right after the switch still uses the old layout, and the table just hidden has
lost the focus (a style change that empties its render caches): painting it again in full
(every visible cell, 50-190 ms for a 40-line table on a loaded machine) would delay the new
view's first frame for nothing, as it is not on screen once laid out again."""

from __future__ import annotations

from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import DataTable


class HiddenNoPaintTable(DataTable):
    def render_lines(self, crop: Region) -> list[Strip]:
        if not self.display:
            return [Strip.blank(crop.width)] * crop.height
        return super().render_lines(crop)
