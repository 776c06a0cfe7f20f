"""The file panel answers at once: the path and a sign of work show before the daemon has
answered, the names as soon as one round trip brings them, their details after."""

from __future__ import annotations

import asyncio

from backends.fake import FakeBackend
from backends.models import Capability, FileEntry
from tui.app import make_app
from tui.screens.files import FilesScreen

from .test_fake_app import fake_env, select, settle  # noqa: F401


class SlowFiles(FakeBackend):
    capabilities = FakeBackend.capabilities | {Capability.FILES}

    def __init__(self, remote, **kw) -> None:
        super().__init__(remote, **kw)
        self.names_in = asyncio.Event()
        self.details_in = asyncio.Event()

    async def list_names(self, ref, path):
        await self.names_in.wait()
        return ["bin", "etc"]

    async def stat_files(self, ref, path, names):
        await self.details_in.wait()
        return [FileEntry(f"/{n}", "directory", 0, 0o755, 0, 0) for n in names]

    async def list_files(self, ref, path):
        return await self.stat_files(ref, path, await self.list_names(ref, path))


def text(screen, selector):
    return str(screen.query_one(selector).render())


def cells(screen):
    table = screen.query_one("#files-table")
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def test_path_and_loading_show_before_the_daemon_answers(fake_env):  # noqa: F811
    cfg, env, _, _ = fake_env
    made = {}

    def factory(remote, timeout):
        made[remote.name] = SlowFiles(remote, timeout=timeout,
                                      instances=[("web1", *_running())])
        return made[remote.name]

    app = make_app(cfg, env=env, factory=factory)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        select(app, "alpha:web1")
        await pilot.press("f")
        await pilot.pause(0.1)
        screen = app.screen
        assert isinstance(screen, FilesScreen)
        assert "alpha:web1: /" in text(screen, "#files-title")  # the path, at once
        assert "Listing /" in text(screen, "#files-status")  # and work under way
        made["alpha"].names_in.set()
        await settle(pilot, app)
        assert [row[0] for row in cells(screen)] == ["bin", "etc"]  # names first
        assert all(row[2] == "…" for row in cells(screen))
        assert "reading their details" in text(screen, "#files-status")
        made["alpha"].details_in.set()
        await settle(pilot, app)
        assert cells(screen)[0][:3] == ["bin/", "", "drwxr-xr-x"]
        assert "2 entries" in text(screen, "#files-status")


def _running():
    from backends.models import InstanceStatus, InstanceType
    return InstanceType.CONTAINER, InstanceStatus.RUNNING
