"""What changes on the QEMU remote, as events: those of the VMs' QMP connections (pumped by
:class:`~backends.qemu.monitor.Monitor`) and of the backend's own verbs, and VMs defined
or removed outside corral (an entry of their directory comes or goes) and VMs started by
another corral (a new pid file in a runtime directory), both told by the kernel
(:mod:`backends.dirwatch`), not looked for every few seconds."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import AsyncIterator

from ..base import Backend
from ..dirwatch import DirWatch
from ..models import BackendEvent, EventKind
from .machines import Machines, runtime_root
from .monitor import Monitor


class Events(Backend):
    """``watch``."""

    vms: Machines
    monitor: Monitor

    async def watch(self) -> AsyncIterator[BackendEvent]:
        root, run = self.vms.root, runtime_root()
        dirs = DirWatch()
        dirs.add(root, even_missing=True)  # VMs defined or removed outside corral
        dirs.add(run)  # a VM's runtime directory, where another corral starts it
        for entry in _subdirs(run):
            dirs.add(entry)  # its qemu.pid
        changes = asyncio.ensure_future(dirs.changed())
        later: list[asyncio.Future[None]] = []
        try:
            # (once the directories are watched: the listing this asks for sees all
            # that came before, the watch all that comes after)
            yield BackendEvent(EventKind.CONNECTION, self.remote.name, action="connected")
            while True:
                getter = asyncio.ensure_future(self.vms.events.get())
                try:
                    await asyncio.wait({getter, changes}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    if not getter.done():
                        getter.cancel()
                if getter.done() and not getter.cancelled():
                    yield getter.result()
                if not changes.done():
                    continue
                paths = changes.result()
                changes = asyncio.ensure_future(dirs.changed())
                if any(p == root or p.parent == root for p in paths):
                    yield BackendEvent(EventKind.LIFECYCLE, self.remote.name,
                                       action="remote-changed")
                for path in paths:
                    if path.parent == run and path.is_dir() and not path.is_symlink():
                        dirs.add(path)
                await self.monitor.notice_outside_starts()
                if any(p.name == "qemu.pid" for p in paths):
                    # made before QEMU writes its pid in it (and QEMU keeps it open: no
                    # event says when it has): look again a little later
                    later.append(asyncio.ensure_future(self._notice_later()))
                    later[:] = [t for t in later if not t.done()]
        finally:
            changes.cancel()
            for task in later:
                task.cancel()
            dirs.close()

    async def _notice_later(self) -> None:
        for delay in (0.2, 1.0, 4.0):
            await asyncio.sleep(delay)
            await self.monitor.notice_outside_starts()


def _subdirs(path: Path) -> list[Path]:
    try:
        return [p for p in path.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return []
