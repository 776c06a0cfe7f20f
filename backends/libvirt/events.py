"""``watch`` of a libvirt remote: the domain lifecycle callbacks libvirt calls on corral's
event loop thread (``connection.py``), and the connection's own close callback. Nothing
polls: a daemon that goes away closes the connection (EOF), one that stops answering is
closed by keepalive; either is said as a CONNECTION event, and the connection is opened
again with a backoff until the daemon answers."""

from __future__ import annotations

import asyncio
from typing import AsyncIterator

from ..base import Backend
from ..errors import BackendError, NotResponding
from ..models import BackendEvent, EventKind
from ..retry import Backoff
from .connection import CLOSED, Connection


class Events(Backend):
    lv: Connection

    async def watch(self) -> AsyncIterator[BackendEvent]:
        name = self.remote.name
        backoff = Backoff(cap=5.0)
        while True:
            try:
                await self.lv.live()
            except BackendError as e:
                action = "not-responding" if isinstance(e, NotResponding) else "disconnected"
                yield BackendEvent(EventKind.CONNECTION, name, action=action, message=e.message)
                await asyncio.sleep(backoff.next())
                continue
            queue = self.lv.subscribe()
            try:
                backoff.reset()
                yield BackendEvent(EventKind.CONNECTION, name, action="connected")
                while (item := await queue.get()) is not CLOSED:
                    yield item
            finally:
                self.lv.unsubscribe(queue)
            action, message = self.lv.lost_words()
            yield BackendEvent(EventKind.CONNECTION, name, action=action, message=message)
            await asyncio.sleep(backoff.next())

