"""What changes on the QEMU remote, as events: those of the VMs' QMP connections (pumped by
:class:`~backends.qemu.monitor.Monitor`) and of the backend's own verbs, and VMs defined
or removed outside corral (the directory changes) and VMs started by another corral (a
new pid file)."""

from __future__ import annotations

import asyncio
from typing import AsyncIterator

from ..base import Backend
from ..models import BackendEvent, EventKind
from .machines import Machines
from .monitor import Monitor


class Events(Backend):
    """``watch``."""

    vms: Machines
    monitor: Monitor

    async def watch(self) -> AsyncIterator[BackendEvent]:
        yield BackendEvent(EventKind.CONNECTION, self.remote.name, action="connected")
        last = None
        while True:
            try:
                # not wait_for: on 3.11 it returns an event that arrives together with a
                # cancellation and swallows the cancellation (watch() then never ends)
                async with asyncio.timeout(2.0):
                    event = await self.vms.events.get()
            except TimeoutError:
                # VMs defined or removed outside corral change the directory (one stat)
                try:
                    mtime = self.vms.root.stat().st_mtime_ns
                except OSError:
                    mtime = None
                if last is not None and mtime != last:
                    yield BackendEvent(EventKind.LIFECYCLE, self.remote.name,
                                       action="remote-changed")
                last = mtime
                await self.monitor.notice_outside_starts()
                continue
            yield event
