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


async def test_the_footer_hides_the_keys_that_do_not_fit_before_they_are_laid_out(
        fake_env, monkeypatch):  # noqa: F811
    """At 100 columns some keys are left out. Fitted only after the keys were laid out,
    hiding them laid the whole screen out again; fitted first (from their texts), the
    fit after the refresh finds nothing to change."""
    from textual.widgets import Footer

    from tui.widgets.footer import FittingFooter

    cfg, env, factory, _ = fake_env
    changed_after_layout: list[str] = []
    real = FittingFooter.fit

    def fit(self):
        before = {k: (k.display, k.size.width > 0) for k in self.children}
        real(self)
        changed_after_layout.extend(k.action for k, (shown, laid_out) in before.items()
                                    if laid_out and k.display != shown)

    monkeypatch.setattr(FittingFooter, "fit", fit)
    app = make_app(cfg, env=env, factory=factory)
    async with app.run_test(size=(100, 40)) as pilot:
        await settle(pilot, app)
        for _ in range(20):
            await pilot.pause(0.05)
        footer = app.main_screen.query_one(Footer)
        keys = [k for k in footer.children if not k.has_class("-command-palette")]
        hidden = [k for k in keys if not k.display]
        assert hidden and len(hidden) < len(keys)  # some left out, the rest shown
        assert changed_after_layout == []
        assert sum(k.outer_size.width for k in footer.children if k.display) <= 100
