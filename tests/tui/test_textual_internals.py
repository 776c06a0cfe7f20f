"""Loud failures when Textual changes what the instance table relies on.

``InstanceTable._update_rows`` writes into DataTable's private row data and drops only the
changed rows' render caches (see its docstring); ``on_resize`` sets
``_require_update_dimensions``. pyproject.toml pins Textual exactly; this test says what
to look at when the pin moves.
"""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from tui.widgets.instance_table import COLUMNS, InstanceTable, SortCell

PIN = next(d for d in tomllib.loads(
    (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"][
    "dependencies"] if d.startswith("textual"))


def test_textual_is_the_pinned_release():
    assert PIN == f"textual=={version('textual')}", (
        f"Textual {version('textual')} is installed but {PIN} is pinned: check "
        f"InstanceTable._update_rows against the new DataTable before moving the pin.")


def _screen(app: App) -> str:
    """The text on the (headless) screen now, as the compositor made it."""
    return app.export_screenshot().replace("&#160;", " ")


class _One(App[None]):
    def compose(self) -> ComposeResult:
        yield InstanceTable(id="t")


async def test_update_rows_repaints_a_changed_cell_through_the_private_caches():
    app = _One()
    async with app.run_test(size=(120, 10)) as pilot:
        table = app.query_one(InstanceTable)
        for name in ("_data", "_cell_render_cache", "_row_render_cache",
                     "_row_renderable_cache", "_line_cache", "_row_locations",
                     "_require_update_dimensions"):
            assert hasattr(table, name), (
                f"DataTable.{name} is gone in this Textual: InstanceTable._update_rows / "
                f"on_resize rely on it")
        cells = [SortCell(key, key) for key, _, _ in COLUMNS]
        table.add_row(*cells, key="r1")
        table.add_row(*[SortCell("other", "other") for _ in COLUMNS], key="r2")
        await pilot.pause()
        assert "cpu" in _screen(app)
        table._update_rows({"r1": {"cpu": SortCell("93%", 93)}}, repaint=True)
        await pilot.pause()
        after = _screen(app)
        assert "93%" in after and "cpu" not in after, (
            "a cell put in with _update_rows did not reach the screen: DataTable's caches "
            "changed shape")
        assert str(table.get_row("r1")[list(dict.fromkeys(k for k, _, _ in COLUMNS)).index(
            "cpu")]) == "93%"
        assert "other" in after
        assert isinstance(table.get_row("r2")[0], Text) and isinstance(table, DataTable)
