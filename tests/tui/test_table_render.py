"""The instance table's own cell rendering gives what DataTable's Rich path gives, cell for
cell: text and style of every character, on the cursor row, hovered, dimmed and in both
themes (and the Textual internals it relies on still exist)."""

from __future__ import annotations

import pytest
from rich.segment import Segment
from textual.widgets import DataTable

from backends.fake import FakeBackend
from backends.models import InstanceStatus, InstanceType
from tui.app import make_app
from tui.views.pane import ResourcePane
from tui.views.rows import Row
from tui.widgets.instance_table import InstanceTable

NAMES = ["web1", "a" * 60, "日本語の名前がとても長いコンテナ", "[bold]x[/]", "tab\tname", "vm-🦀", "x"]


def chars(lines: list[list[Segment]]) -> list[tuple[str, object]]:
    out = []
    for line in lines:
        for seg in line:
            for ch in seg.text:
                out.append((ch, seg.style))
    return out


def compare_cells(table) -> int:
    """Every body cell of ``table`` rendered our way and DataTable's way (plain, under the
    cursor, hovered) gives the same characters; returns how many were compared."""
    base = table.rich_style
    compared = 0
    for row in range(table.row_count):
        for col, column in enumerate(table.ordered_columns):
            width = column.get_render_width(table)
            for cursor, hover in ((False, False), (True, False), (False, True)):
                table._cell_render_cache.clear()
                ours = table._render_cell(row, col, base, width, cursor, hover)
                table._cell_render_cache.clear()
                theirs = DataTable._render_cell(table, row, col, base, width, cursor, hover)
                assert chars(ours) == chars(theirs), (row, col, cursor, hover)
                compared += 1
    return compared


@pytest.mark.parametrize("theme", ["corral-dark", "corral-light"])
async def test_fast_cells_equal_datatables_own(tmp_path, hermetic_env, theme):
    specs = [(n, InstanceType.VM if i % 2 else InstanceType.CONTAINER,
              InstanceStatus.RUNNING if i % 3 else InstanceStatus.STOPPED)
             for i, n in enumerate(NAMES)]
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[ui]\ntheme = "{theme}"\nmetrics_interval = 600\n[lxc]\nenabled = false\n'
                   '[qemu]\nenabled = false\n[[remote]]\nname = "alpha"\nkind = "lxd"\n'
                   'address = "/nonexistent/a.sock"\n')
    app = make_app(cfg, env=hermetic_env,
                   factory=lambda remote, timeout: FakeBackend(remote, instances=specs))
    async with app.run_test(size=(120, 30)) as pilot:
        for _ in range(10):
            await pilot.pause(0.02)
        table = app.main_screen.query_one(InstanceTable)
        assert table.row_count == len(NAMES)
        table.move_cursor(row=2)
        base = table.rich_style
        compared = compare_cells(table)
        assert compared == table.row_count * len(table.ordered_columns) * 3
        # the header still goes DataTable's way
        assert chars(table._render_cell(-1, 0, base, 10)) == \
            chars(DataTable._render_cell(table, -1, 0, base, 10))


async def test_resource_view_cells_equal_datatables_own(tmp_path, hermetic_env):
    """The resource views' table renders its cells the same way (marks, read-only rows)."""
    cfg = tmp_path / "config.toml"
    cfg.write_text('[ui]\nmetrics_interval = 600\n[lxc]\nenabled = false\n'
                   '[qemu]\nenabled = false\n[[remote]]\nname = "alpha"\nkind = "lxd"\n'
                   'address = "/nonexistent/a.sock"\n')
    app = make_app(cfg, env=hermetic_env,
                   factory=lambda remote, timeout: FakeBackend(remote, instances=[]))
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause(0.1)
        app.main_screen.views.show("remotes")
        await pilot.pause(0.1)
        pane = app.main_screen.query_one(ResourcePane)
        pane.reload = lambda remote: None  # the rows below stay as they are
        table = pane.table
        rows = [Row(f"k{i}", "alpha", n, (("kind", "lxd"), ("message", n * 2)),
                    read_only=bool(i % 2)) for i, n in enumerate(NAMES)]
        table.set_rows(None, rows)
        table.marked = {"k1", "k2"}
        table.render_rows()
        await pilot.pause(0.1)
        table.move_cursor(row=1)
        compared = compare_cells(table)
        assert compared == len(NAMES) * len(table.ordered_columns) * 3


async def test_a_filter_that_drops_most_rows_keeps_order_cursor_and_cells(
        tmp_path, hermetic_env, monkeypatch):
    """Past a few rows, the rows a filter drops go at once (the table is rebuilt from those
    that stay: DataTable removes a row in time proportional to the table, so dropping most of
    thousands one by one took seconds). Rows, order, cells, the cursor on the selected
    instance and the marks are what they would be row by row; clearing the filter brings
    every row back, sorted."""
    from textual.widgets import Input

    import tui.widgets.instance_table as table_module

    names = [f"n{i:03d}" for i in range(120)]
    specs = [(n, InstanceType.CONTAINER, InstanceStatus.RUNNING if i % 2 else
              InstanceStatus.STOPPED) for i, n in enumerate(names)]
    cfg = tmp_path / "config.toml"
    cfg.write_text('[ui]\nmetrics_interval = 600\n[lxc]\nenabled = false\n'
                   '[qemu]\nenabled = false\n[[remote]]\nname = "alpha"\nkind = "lxd"\n'
                   'address = "/nonexistent/a.sock"\n')
    app = make_app(cfg, env=hermetic_env,
                   factory=lambda remote, timeout: FakeBackend(remote, instances=specs))

    usage = {"IPv4", "CPU", "Memory", "Disk"}  # sampled when rows come into view: not compared

    def shown(table):
        keep = [i for i, c in enumerate(table.ordered_columns)
                if str(c.label).strip() not in usage]
        return [[str(c) for i, c in enumerate(table.get_row(row.key)) if i in keep]
                for row in table.ordered_rows]

    removed = []
    remove_row = InstanceTable.remove_row

    def counting(self, key):
        removed.append(key)
        return remove_row(self, key)

    monkeypatch.setattr(InstanceTable, "remove_row", counting)
    async def until(pilot, done) -> None:
        for _ in range(250):
            if done():
                return
            await pilot.pause(0.02)

    async with app.run_test(size=(120, 30)) as pilot:
        table = app.main_screen.query_one(InstanceTable)
        await until(pilot, lambda: table.row_count == 120)
        assert table.row_count == 120
        assert {str(c.label).strip() for c in table.ordered_columns} >= usage
        table.move_cursor(row=next(i for i, row in enumerate(table.ordered_rows)
                                   if table.refs[row.key.value].name == "n057"))
        await pilot.press("space")  # marked (and the cursor goes on to the next row)
        await pilot.pause()
        full = shown(table)
        selected = table.selected_ref.name
        assert selected == "n058"
        box = app.main_screen.query_one("#filter", Input)
        box.value = "n05"  # 110 rows go, 10 stay
        await until(pilot, lambda: table.row_count == 10)
        assert removed == []  # not one by one
        assert shown(table) == [r for r in full if r[0].lstrip("● ").startswith("n05")]
        assert table.selected_ref.name == selected
        assert {r.name for r in table.marked} == {"n057"}
        box.value = "n057"  # a few go: row by row
        await until(pilot, lambda: table.row_count == 1)
        assert len(removed) == 9 and table.row_count == 1
        box.value = ""
        await until(pilot, lambda: table.row_count == 120)
        assert [r[0].lstrip("● ") for r in shown(table)] == names
        assert table.selected_ref.name == "n057"  # where the cursor was left
    assert table_module.BULK_REMOVE < 110
