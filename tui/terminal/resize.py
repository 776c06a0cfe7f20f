"""Resizing the console screen: rows dropped at the top go to the scrollback, blank rows below
the cursor go first (what xterm does), on the main screen also while the alternate one is
shown; tab stops are extended every 8 columns."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lines import row_runs

if TYPE_CHECKING:
    from .screen import Screen


def resize_screen(screen: Screen, lines: int | None, columns: int | None) -> None:
    lines = max(1, lines or screen.lines)
    columns = max(1, columns or screen.columns)
    if lines == screen.lines and columns == screen.columns:
        return
    old_lines, old_columns = screen.lines, screen.columns
    if lines < old_lines:
        _shrink(screen, screen.buffer, screen.cursor, old_lines, lines, push=not screen.alternate)
        if screen.alternate and screen.main_buffer is not None:
            saved = screen.main_saved[0] if screen.main_saved else None
            cursor = saved or type("C", (), {"y": old_lines - 1})()
            _shrink(screen, screen.main_buffer, cursor, old_lines, lines, push=True)
    if columns < old_columns:
        for buffer in (screen.buffer, screen.main_buffer or {}):
            for line in buffer.values():
                for x in [x for x in line if x >= columns]:
                    del line[x]
    screen.lines, screen.columns = lines, columns
    screen.margins = None
    if columns > old_columns:
        screen.tabstops.update(range(8 * ((old_columns + 7) // 8), columns, 8))
    screen.tabstops = {t for t in screen.tabstops if t < columns}
    screen.cursor.x = min(screen.cursor.x, columns - 1)
    screen.cursor.y = min(screen.cursor.y, lines - 1)
    screen.dirty = set(range(lines))


def _shrink(screen: Screen, buffer: dict, cursor, old: int, new: int, push: bool) -> None:
    """Drop ``old - new`` rows: blank rows below the cursor first, then rows from the top,
    which go to the scrollback when ``push``."""
    columns = screen.columns
    excess = old - new
    y = old - 1
    while excess and y > cursor.y and not row_runs(buffer.get(y), columns):
        buffer.pop(y, None)
        excess -= 1
        y -= 1
    if excess:
        if push:
            for row in range(excess):
                screen.emu.push_history(row_runs(buffer.get(row), columns))
        rows = {r - excess: buffer[r] for r in list(buffer) if r >= excess}
        buffer.clear()
        buffer.update(rows)
        cursor.y = max(0, cursor.y - excess)
    for r in [r for r in buffer if r >= new]:
        del buffer[r]
