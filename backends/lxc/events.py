"""Changes of an lxcpath (``watch``): state changes come from ``lxc-monitor`` (a stream of
"changed state" lines); containers created or destroyed outside corral are noticed when
an entry of the lxcpath comes or goes (inotify: :mod:`backends.dirwatch`), which triggers
one listing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import AsyncIterator

from ..base import Backend
from ..dirwatch import DirWatch
from ..models import BackendEvent, EventKind
from . import parse
from .tools import LXCTools

_ACTIONS = {
    "RUNNING": "instance-started",
    "STOPPED": "instance-stopped",
    "FROZEN": "instance-paused",
    "THAWED": "instance-resumed",
}
"""lxc-monitor states -> the lifecycle actions LXD uses, so the inventory treats both alike."""


class Events(Backend):
    """``watch`` of :class:`~backends.lxc.backend.LXCBackend`."""

    lxc: LXCTools

    async def watch(self) -> AsyncIterator[BackendEvent]:
        name = self.remote.name
        queue: asyncio.Queue[BackendEvent] = asyncio.Queue()
        watcher = asyncio.ensure_future(self._watch_dir(queue))
        try:
            while True:
                try:
                    proc = await asyncio.create_subprocess_exec(
                        "lxc-monitor", "-P", self.lxc.path, "-n", ".*",
                        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                        stderr=asyncio.subprocess.DEVNULL)
                except FileNotFoundError:
                    yield BackendEvent(EventKind.CONNECTION, name, action="disconnected",
                                       message="lxc-monitor is not installed")
                    await asyncio.sleep(10)
                    continue
                yield BackendEvent(EventKind.CONNECTION, name, action="connected")
                reader = asyncio.ensure_future(self._read_monitor(proc, queue))
                try:
                    while not reader.done() or not queue.empty():
                        getter = asyncio.ensure_future(queue.get())
                        try:
                            done, _ = await asyncio.wait({getter, reader},
                                                         return_when=asyncio.FIRST_COMPLETED)
                        finally:
                            if not getter.done():
                                getter.cancel()
                        if getter in done:
                            yield getter.result()
                finally:
                    reader.cancel()
                    if proc.returncode is None:
                        proc.kill()
                        await proc.wait()
                yield BackendEvent(EventKind.CONNECTION, name, action="disconnected",
                                   message="lxc-monitor stopped")
                await asyncio.sleep(2)
        finally:
            watcher.cancel()

    async def _read_monitor(self, proc: asyncio.subprocess.Process,
                            queue: asyncio.Queue[BackendEvent]) -> None:
        assert proc.stdout is not None
        while line := await proc.stdout.readline():
            parsed = parse.monitor_line(line.decode(errors="replace"))
            if parsed is None:
                continue
            cname, state = parsed
            queue.put_nowait(BackendEvent(
                EventKind.LIFECYCLE, self.remote.name,
                action=_ACTIONS.get(state, "instance-updated"), ref=self.lxc.ref(cname),
                message=state))

    async def _watch_dir(self, queue: asyncio.Queue[BackendEvent]) -> None:
        """Containers created/destroyed outside corral: an entry of the lxcpath comes or
        goes (told by the kernel: :mod:`backends.dirwatch`)."""
        dirs = DirWatch()
        dirs.add(Path(self.lxc.path), even_missing=True)
        try:
            while True:
                await dirs.changed()
                queue.put_nowait(BackendEvent(EventKind.LIFECYCLE, self.remote.name,
                                              action="remote-changed"))
        finally:
            dirs.close()
