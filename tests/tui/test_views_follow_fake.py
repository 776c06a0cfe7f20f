"""A view follows its remote's events even when a read that began before a change ends
after the read the change's event asked for (a slow daemon at start-up): the older
answer must not undo what the newer one showed."""

from __future__ import annotations

import asyncio

from backends.fake import FakeBackend
from backends.models import BackendEvent, Capability, EventKind, Remote, Resource, ResourceKind
from tui.app import make_app
from tui.views.pane import ResourcePane

from .test_fake_app import fake_env, settle  # noqa: F401


class SlowProfiles(FakeBackend):
    capabilities = FakeBackend.capabilities | {Capability.PROFILES}

    def __init__(self, remote: Remote, **kw) -> None:
        super().__init__(remote, **kw)
        self.profiles = ["default"]
        self.hold: asyncio.Event | None = None
        """While set up, the next read answers what it saw at once but returns only when
        the event is set (a daemon slow to answer)."""

    async def list_profiles(self):
        seen = list(self.profiles)
        hold, self.hold = self.hold, None
        if hold is not None:
            await hold.wait()
        return [Resource(ResourceKind.PROFILE, self.remote.name, n) for n in seen]

    def outside(self, action: str) -> None:
        self.queue.put_nowait(BackendEvent(EventKind.LIFECYCLE, self.remote.name,
                                           action=action))


def names(app, remote):
    pane = app.main_screen.query_one(ResourcePane)
    return {r.name for r in pane.table.items.values() if r.remote == remote}


async def test_a_slow_read_from_before_a_change_does_not_undo_it(fake_env):  # noqa: F811
    cfg, env, _, _ = fake_env
    made: dict[str, SlowProfiles] = {}

    def factory(remote, timeout):
        made[remote.name] = SlowProfiles(remote, timeout=timeout)
        return made[remote.name]

    app = make_app(cfg, env=env, factory=factory)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        alpha = made["alpha"]
        hold = alpha.hold = asyncio.Event()
        await pilot.press("colon", *"profiles", "enter")
        await settle(pilot, app)  # the view's read of alpha is under way (held)
        alpha.profiles.append("made-outside")
        alpha.outside("profile-created")
        for _ in range(40):
            await pilot.pause(0.05)
            if "made-outside" in names(app, "alpha"):
                break
        assert names(app, "alpha") == {"default", "made-outside"}
        assert names(app, "beta") == {"default"}  # not held back by alpha's slow read
        hold.set()  # the read from before the change ends now
        await settle(pilot, app)
        assert names(app, "alpha") == {"default", "made-outside"}
        alpha.profiles.remove("made-outside")
        alpha.outside("profile-deleted")
        for _ in range(40):
            await pilot.pause(0.05)
            if "made-outside" not in names(app, "alpha"):
                break
        assert names(app, "alpha") == {"default"}
