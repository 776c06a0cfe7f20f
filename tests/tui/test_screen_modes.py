"""GraphicView's drawing modes and mouse mapping, on an in-memory screen session (fast UI
tests; the real path is tests/tui/test_screen_app.py against QEMU)."""

from __future__ import annotations

import pytest
from PIL import Image
from textual import events
from textual.app import App

from tui.widgets.graphic_console import GraphicView


class MemorySession:
    """A screen of 640x480 in one colour, recording pointer events."""

    title = "memory screen"
    special_keys = ()
    vnc_path = ""

    def __init__(self) -> None:
        self.image = None
        self.pointer_events: list[tuple[int, int, int]] = []
        self.key_events: list[tuple[int, bool]] = []

    async def start(self, sink) -> None:
        self.image = Image.new("RGB", (640, 480), (200, 10, 10))
        sink.frame(0, 0, 640, 480)

    async def keys(self, events) -> None:
        self.key_events += events

    async def pointer(self, x: int, y: int, buttons: int = 0) -> None:
        self.pointer_events.append((x, y, buttons))

    async def close(self) -> None:
        pass


def app_for(session, mode):
    class One(App):
        def compose(self):
            yield GraphicView(session, "t", mode=mode)

    return One()


@pytest.mark.parametrize("mode", ["kitty", "sixel"])
async def test_graphics_protocols_get_the_picture_sized_to_fit(mode, capfd):
    session = MemorySession()
    app = app_for(session, mode)
    async with app.run_test(size=(100, 40)) as pilot:
        view = app.query_one(GraphicView)
        await pilot.pause(0.5)
        assert view.paints >= 1 and view._image_widget is not None
        cw, ch = view.fit.cells
        assert (cw, ch) == (view._image_widget.size.width, view._image_widget.size.height)
        assert view._image_widget.image.size == view.fit.size  # pre-scaled, aspect kept
        assert abs(view.fit.size[0] / view.fit.size[1] - 640 / 480) < 0.02


async def test_half_blocks_click_drag_and_wheel_reach_guest_pixels():
    session = MemorySession()
    app = app_for(session, "halfblock")
    async with app.run_test(size=(82, 42)) as pilot:  # 80x40 inside the border
        view = app.query_one(GraphicView)
        await pilot.pause(0.3)
        assert view.fit.cells == (80, 30) and view.fit.offset == (0, 5)
        strip = view.render_line(10)
        assert strip.text == "▀" * 80
        await pilot.click(GraphicView, offset=(1 + 40, 1 + 20))
        x, y, _ = session.pointer_events[0]
        assert (x, y) == view.fit.to_guest(40, 20) == (324, 248)
        assert [b for _, _, b in session.pointer_events[:2]] == [1, 0]  # down, up
        session.pointer_events.clear()
        await pilot.click(GraphicView, offset=(1 + 40, 1 + 2))  # the bar above: nothing
        assert session.pointer_events == []
        await pilot.hover(GraphicView, offset=(1 + 10, 1 + 10))
        # Pilot has no wheel of its own: its private helper posts the event like a terminal
        await pilot._post_mouse_events([events.MouseScrollDown], GraphicView,
                                       offset=(1 + 10, 1 + 10))
        await pilot.pause(0.1)
        assert (1 << 4) in [b for _, _, b in session.pointer_events]  # wheel down
        await pilot.press("ctrl+alt+delete")
        assert session.key_events[:3] == [(0xFFE3, True), (0xFFE9, True), (0xFFFF, True)]
