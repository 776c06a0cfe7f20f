"""The views (profiles, networks, storage…) are read ahead in the background only a moment
(``PREFETCH_AFTER``) after no remote is still connecting: read beside the remotes that
connect last, they held those up (each remote's views are several reads and conversions,
on a loop that is connecting the others), and keys typed then waited behind them."""

from __future__ import annotations

import asyncio

from backends.fake import FakeBackend
from backends.models import Capability, ConnectionState, Remote, Resource, ResourceKind
from tui.app import make_app

from .test_fake_app import fake_env, settle  # noqa: F401


class Counting(FakeBackend):
    capabilities = FakeBackend.capabilities | {Capability.PROFILES}

    def __init__(self, remote: Remote, hold: asyncio.Event | None, **kw) -> None:
        super().__init__(remote, **kw)
        self.hold = hold
        self.profile_reads = 0

    async def connect(self):
        if self.hold is not None:
            await self.hold.wait()  # a remote slow to connect
        return await super().connect()

    async def list_profiles(self):
        self.profile_reads += 1
        return [Resource(ResourceKind.PROFILE, self.remote.name, "default")]


async def test_views_are_read_ahead_once_no_remote_is_connecting(fake_env):  # noqa: F811
    cfg, env, _, _ = fake_env
    beta_connects = asyncio.Event()
    made: dict[str, Counting] = {}

    def factory(remote, timeout):
        hold = beta_connects if remote.name == "beta" else None
        made[remote.name] = Counting(remote, hold, timeout=timeout)
        return made[remote.name]

    app = make_app(cfg, env=env, factory=factory)
    async with app.run_test(size=(140, 40)) as pilot:
        inv = app.inventory
        for _ in range(100):
            await pilot.pause(0.02)
            if inv.statuses["alpha"].listed \
                    and inv.statuses["alpha"].state is ConnectionState.CONNECTED:
                break
        await settle(pilot, app)
        assert inv.statuses["alpha"].state is ConnectionState.CONNECTED
        assert inv.statuses["beta"].state is ConnectionState.CONNECTING
        assert made["alpha"].profile_reads == 0  # not while beta connects

        beta_connects.set()
        for _ in range(200):
            await pilot.pause(0.02)
            if made["alpha"].profile_reads and made.get("beta") \
                    and made["beta"].profile_reads:
                break
        # both read ahead, once, without the user opening a view
        assert (made["alpha"].profile_reads, made["beta"].profile_reads) == (1, 1)
