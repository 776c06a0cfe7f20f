"""Loud failures when Textual changes the private parts corral relies on.

Every use of them is in ``tui/_textual_compat.py`` (``tests/unit/test_seams.py`` keeps it so):
``InstanceTable._update_rows`` writes into DataTable's private row data and drops only the
changed rows' render caches (see its docstring); ``on_resize`` asks for the dimensions again;
the main screen waits for the end of Textual's start-up batch to render and skips a resize to
its own size; the footer, the key gate, the help screen and the driver read private state.
pyproject.toml pins Textual exactly; this test says what to look at when the pin moves.
"""

from __future__ import annotations

import time
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
        f"tui/_textual_compat.py against the new release before moving the pin.")


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
                f"DataTable.{name} is gone in this Textual: tui/_textual_compat.py's table "
                f"functions rely on it")
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


async def test_the_main_screen_is_not_rendered_inside_the_start_up_batch(setup):
    """MainScreen.compositor_refresh waits for the end of Textual's start-up batch (a
    frame rendered inside it is dropped), and MainScreen.on_resize skips a size it is laid
    out at (Textual hands the same size over again at start). The first relies on private
    parts (``App._batch_count``, ``Screen._repaint_required``, ``Screen._compositor_refresh``:
    ``tui/_textual_compat.py``)."""
    from textual import events
    from textual._compositor import Compositor

    from backends.fake import FakeBackend
    from backends.models import InstanceStatus, InstanceType
    from tui.app import make_app

    cfg, env = setup
    app = make_app(cfg, env=env, factory=lambda remote, timeout: FakeBackend(
        remote, instances=[("web1", InstanceType.CONTAINER, InstanceStatus.RUNNING)]))
    in_batch, renders = [], []
    original = Compositor.render_update

    def render_update(self, *args, **kwargs):
        renders.append(1)
        if app._batch_count:
            in_batch.append(1)
        return original(self, *args, **kwargs)

    Compositor.render_update = render_update
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            screen = app.main_screen
            # wait for the first frame of the laid-out main screen, however busy the host
            # (a fixed 0.1 s failed on a loaded one); the deadline only stops a hang
            deadline = time.monotonic() + 60
            while not (renders and screen._laid_out_at == app.size):
                assert time.monotonic() < deadline, (len(renders), screen._laid_out_at)
                await pilot.pause(0.01)
            assert renders and not in_batch
            assert screen._laid_out_at == app.size
            layouts = []
            relayout = screen._refresh_layout

            def counted(*a, **k):
                layouts.append(a)
                return relayout(*a, **k)

            screen._refresh_layout = counted
            # until start-up has settled: a whole pause without any layout (the rows and
            # the start-up screen's end lay it out again, later on a busy host)
            while True:
                layouts.clear()
                await pilot.pause()
                if not layouts:
                    break
                assert time.monotonic() < deadline, "the main screen never stopped laying out"
            screen.post_message(events.Resize(app.size, app.size))
            await pilot.pause()
            assert layouts == []  # the same size again: no new layout
    finally:
        Compositor.render_update = original


async def test_footer_keys_are_made_with_the_footers_compact_value(monkeypatch):
    """QuietFooter.compose gives each bound key the footer's ``compact`` before it mounts
    (``is_data_bound`` relies on ``DOMNode._reactive_connect`` naming what ``data_bind``
    bound): no key is restyled from Textual's compact default to the footer's, and they
    look the same."""
    from textual.binding import Binding
    from textual.widgets._footer import FooterKey

    from tui.widgets.footer import FittingFooter

    class _Keys(App[None]):
        BINDINGS = [Binding("s", "x", "Start"), Binding("d", "y", "Delete")]

        def compose(self) -> ComposeResult:
            yield FittingFooter()

    changed: list[str] = []
    original = FooterKey._watch_compact
    monkeypatch.setattr(FooterKey, "_watch_compact", lambda self, compact: (
        changed.append(self.key) if self.has_class("-compact") != compact else None,
        original(self, compact)))
    app = _Keys()
    async with app.run_test(size=(80, 5)) as pilot:
        await pilot.pause(0.1)
        keys = {k.key: k for k in app.query(FooterKey)}
        assert not keys["s"].compact and not keys["s"].has_class("-compact")
        assert keys["ctrl+p"].compact and keys["ctrl+p"].has_class("-compact")
        assert "s" not in changed and "d" not in changed


async def test_a_footer_key_enabled_or_disabled_changes_in_place():
    """When only whether keys are enabled changes (a remote connected, the cursor moved to
    a row allowing other verbs), QuietFooter restyles the keys it has instead of building
    them all again; ``set_footer_key_enabled`` changes what ``FooterKey(disabled=...)``
    sets (the private ``_disabled``: a click on a disabled key only rings the bell)."""
    from textual.binding import Binding
    from textual.widgets._footer import FooterKey

    from tui.widgets.footer import FittingFooter

    class _Toggle(App[None]):
        BINDINGS = [Binding("s", "start", "Start", tooltip="Start it"),
                    Binding("d", "delete", "Delete")]
        allowed = False

        def compose(self) -> ComposeResult:
            yield FittingFooter()

        def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
            return (True if self.allowed else None) if action == "start" else True  # None: shown, disabled

        def action_start(self) -> None:
            self.started = True

    app = _Toggle()
    app.started = False
    async with app.run_test(size=(80, 5)) as pilot:
        await pilot.pause(0.1)
        before = {k.key: k for k in app.query(FooterKey)}
        assert before["s"].has_class("-disabled")
        await pilot.click(before["s"])
        assert not app.started  # disabled: the bell, not the key
        app.allowed = True
        app.refresh_bindings()
        await pilot.pause(0.1)
        after = {k.key: k for k in app.query(FooterKey)}
        assert after == before  # the same widgets: nothing built again
        assert not after["s"].has_class("-disabled")
        assert after["s"].tooltip == "Start it"
        await pilot.click(after["s"])
        assert app.started


async def test_the_key_gates_private_reads_answer_on_a_running_app():
    """What ``tui/_textual_compat.py`` reads for the key gate (``tui/keyboard.py``), the
    app's ``on_event`` and the help screen: the binding chain from the focused widget up,
    a node's own bindings, the message queues, the keymap, whether the app is quitting."""
    from textual.binding import Binding

    from tui import _textual_compat as internals

    class _Bound(App[None]):
        BINDINGS = [Binding("ctrl+q", "quit", "Quit", priority=True)]

        def compose(self) -> ComposeResult:
            yield InstanceTable(id="t")

    app = _Bound()
    async with app.run_test(size=(80, 10)) as pilot:
        await pilot.pause()
        table = app.query_one(InstanceTable)
        assert app.focused is table
        assert internals.has_screens(app) and not internals.is_closing(app)
        chain = internals.binding_chain(app)
        assert chain[0][0] is table and any(node is app for node, _ in chain)
        assert "o" in chain[0][1].key_to_bindings  # the table's own sort key
        assert "ctrl+q" in internals.bindings_map(app).key_to_bindings
        internals.bind_key(table, "f9", "leave_hint", "Leave")
        assert "f9" in internals.bindings_map(table).key_to_bindings
        assert internals.messages_queued(app) >= 0 and internals.messages_queued(table) >= 0
        assert internals.keymap(app) == {}
        app.set_keymap({"table.sort": "p"})
        assert internals.keymap(app) == {"table.sort": "p"}
        assert internals.search_worker_group(app.screen) is None
        app.action_command_palette()
        await pilot.pause()
        assert internals.search_worker_group(app.screen), (
            "the command palette's search group is gone: tui/keyboard.py waits on it")
    assert internals.is_closing(app)


async def test_add_rows_leaves_the_table_as_add_row_one_by_one_does():
    """``add_rows`` (the instance table's rows at start, and those kept when a filter
    drops many) writes DataTable's private row data at once: the same rows, cells, order,
    cursor and highlight as ``add_row`` for each, and the same refusals."""
    import pytest
    from textual.widgets.data_table import DuplicateKey

    from tui import _textual_compat as internals

    def rows(prefix: str, n: int):
        return [(f"{prefix}{i}", tuple(SortCell(f"{prefix}{i}-{key}", i)
                                       for key, _, _ in COLUMNS), 1) for i in range(n)]

    app_one, app_bulk = _One(), _One()
    async with app_one.run_test(size=(120, 10)) as pilot_one, \
            app_bulk.run_test(size=(120, 10)) as pilot_bulk:
        one, bulk = app_one.query_one(InstanceTable), app_bulk.query_one(InstanceTable)
        for key, cells, height in rows("r", 30):
            one.add_row(*cells, key=key, height=height)
        internals.add_rows(bulk, rows("r", 30))
        await pilot_one.pause()
        await pilot_bulk.pause()
        for table in (one, bulk):
            assert table.row_count == 30
        assert [r.key.value for r in bulk.ordered_rows] == [r.key.value for r in one.ordered_rows]
        assert [str(c) for c in bulk.get_row("r7")] == [str(c) for c in one.get_row("r7")]
        assert bulk.cursor_coordinate == one.cursor_coordinate
        assert bulk.get_row_index("r29") == 29 and bulk.virtual_size == one.virtual_size
        assert _screen(app_bulk) == _screen(app_one)
        internals.add_rows(bulk, rows("s", 2))  # more, after rows already there
        assert bulk.row_count == 32 and bulk.get_row_index("s1") == 31
        with pytest.raises(DuplicateKey):
            internals.add_rows(bulk, rows("s", 1))
