"""The add-remote dialog says what its CLI step does (corral trusts the CLI's certificate
over its own pinned connection and writes the CLI's config; nothing goes "through that
CLI"), and all of it fits an 80-column terminal."""

from __future__ import annotations

from pathlib import Path

from textual.app import App
from textual.widgets import Checkbox

from tui.screens.add_remote import AddRemoteDialog

THEME = Path(__file__).resolve().parents[2] / "themes" / "app.tcss"


class _Host(App):
    CSS_PATH = str(THEME)

    def on_mount(self) -> None:
        self.push_screen(AddRemoteDialog(set()))


def _inside(inner, outer) -> bool:
    return (outer.x <= inner.x and inner.right <= outer.right
            and outer.y <= inner.y and inner.bottom <= outer.bottom)


async def test_the_cli_step_is_described_as_it_is_done():
    app = _Host()
    async with app.run_test(size=(80, 40)) as pilot:
        await pilot.pause()
        dialog = app.screen
        box = dialog.query_one("#remote-cli", Checkbox)
        label = str(box.label)
        assert "through that CLI" not in label
        assert label == "Also add it to the lxc / incus CLI"
        hint = str(dialog.query_one("#remote-cli-hint").render())
        assert "certificate" in hint and "pinned connection" in hint and "config" in hint
        frame = dialog.query_one("#dialog").content_region
        assert _inside(box.region, frame)
        assert _inside(dialog.query_one("#remote-cli-hint").region, frame)
