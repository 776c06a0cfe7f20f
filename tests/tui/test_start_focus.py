"""At start the instance table has the focus from the first frame, and the footer builds
its keys once: with Textual's default focus (the first widget that takes it, the remotes
list) the focus moved to the table just after the first frame, and the footer built the
remotes list's keys, then the table's, each a dozen widgets and a layout of the screen."""

from __future__ import annotations

from tui.app import make_app
from tui.widgets.footer import QuietFooter
from tui.widgets.instance_table import InstanceTable

from .test_fake_app import fake_env, settle  # noqa: F401


async def test_the_table_has_the_focus_at_once_and_the_footer_is_built_once(
        fake_env, monkeypatch):  # noqa: F811
    cfg, env, factory, _ = fake_env
    builds: list[str] = []
    real = QuietFooter.recompose

    async def recompose(self):
        builds.append(type(self.screen.focused).__name__)
        await real(self)

    monkeypatch.setattr(QuietFooter, "recompose", recompose)
    focused_at_first_frame = []
    app = make_app(cfg, env=env, factory=factory)
    async with app.run_test(size=(140, 40)) as pilot:
        await app.inventory.first_frame.wait()
        focused_at_first_frame.append(app.main_screen.focused)
        await settle(pilot, app)
        for _ in range(20):  # every remote connected, its verbs in the footer
            await pilot.pause(0.05)
        assert isinstance(focused_at_first_frame[0], InstanceTable)
        assert builds == ["InstanceTable"]
