"""Changes on an LXD/Incus remote: the ``/1.0/events`` websocket (lifecycle and operation
events), reconnected with a backoff, the drops said in words. See ``docs/protocols.md``,
section "Events"."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import AsyncIterator
from urllib.parse import urlencode

from websockets.exceptions import (
    ConnectionClosedError,
    InvalidHandshake,
    InvalidStatus,
    WebSocketException,
)

from ..base import Backend
from ..errors import AuthError
from ..models import BackendEvent, EventKind, InstanceStatus
from ..retry import Backoff
from . import convert
from .known import Known
from .rest import Rest
from .sockets import Sockets

log = logging.getLogger(__name__)


class Events(Backend):
    """``watch`` of :class:`~backends.lxd.backend.LXDBackend`."""

    rest: Rest
    known: Known
    sockets: Sockets
    _all_projects: bool = False
    """The stream is asked for every project (``all-projects=true``)."""

    async def watch(self) -> AsyncIterator[BackendEvent]:
        backoff = Backoff()
        name = self.remote.name
        # Subscribe once the connection knows whether this is a cluster (its members'
        # log lines say when one stops answering).
        await self.known.ready.wait()
        # One stream for every project (the projects view hears of projects created or
        # deleted anywhere); what belongs to another project than the one shown is dropped
        # here. A daemon that refuses that (HTTP 400/403) is asked for the remote's project.
        self._all_projects = "projects" in self.known.extensions
        while True:
            hook = self.known.cluster_hook
            try:
                # pings find a daemon that stopped answering (SIGSTOP, a hung host) within
                # seconds; the TCP connection alone would look fine for ever
                async with self.sockets.websocket(self._events_path(), ping_interval=5) as ws:
                    backoff.reset()
                    yield BackendEvent(EventKind.CONNECTION, name, action="connected")
                    async for frame in ws:
                        try:
                            data = json.loads(frame)
                            event = convert.to_event(data, name)
                        except Exception as e:  # skip it, keep the stream
                            log.warning("%s: skipped a malformed event (%s: %s): %.200r",
                                        name, type(e).__name__, e, frame)
                            continue
                        if hook is not None and (member := hook(data)) is not None:
                            yield member
                        if event is not None and self._elsewhere(data, event):
                            continue
                        if event is not None:
                            if event.ref is not None and event.action in (
                                    "instance-started", "instance-restarted"):
                                self.known.pending.pop(event.ref, None)
                                self.known.status[event.ref] = InstanceStatus.RUNNING
                            yield event
                message = f"event stream of '{name}' closed"
                action = "disconnected"
            except InvalidStatus as e:
                if self._all_projects and e.response.status_code in (400, 403):
                    log.info("%s: no events of all projects (HTTP %s); this project's only",
                             name, e.response.status_code)
                    self._all_projects = False
                    continue
                action, message = "disconnected", self._event_error(e)
            except (OSError, WebSocketException, InvalidHandshake, asyncio.TimeoutError,
                    TimeoutError, AuthError) as e:
                action = "not-responding" if self._silent(e) else "disconnected"
                message = (str(e) if isinstance(e, AuthError) else
                           f"'{name}' is not responding" if action == "not-responding"
                           else self._event_error(e))
            yield BackendEvent(EventKind.CONNECTION, name, action=action, message=message)
            if hook is not None:
                return  # a cluster: reconnect through a member that answers
            await asyncio.sleep(backoff.next())

    def _events_path(self) -> str:
        params = {"type": "lifecycle,operation" + (",logging" if self.known.cluster_hook else "")}
        if self._all_projects:
            params["all-projects"] = "true"
        elif self.remote.project != "default":
            params["project"] = self.remote.project
        return "/1.0/events?" + urlencode(params)

    def _elsewhere(self, data: dict, event: BackendEvent) -> bool:
        """An event of another project than the one shown, which the remote's rows and
        views do not show (the daemon's own rule: an event without a project is for
        all). Projects themselves are listed from every project."""
        project = data.get("project")
        if not project or not isinstance(project, str) or project == self.remote.project:
            return False
        return not (event.kind is EventKind.LIFECYCLE and event.action.startswith("project-"))

    @staticmethod
    def _silent(e: BaseException) -> bool:
        """The daemon took the connection but does not answer (a ping or the handshake
        timed out): stopped (SIGSTOP) or hung, not gone."""
        if isinstance(e, (asyncio.TimeoutError, TimeoutError)):
            return True
        return isinstance(e, ConnectionClosedError) and "keepalive ping timeout" in str(e)

    def _event_error(self, e: BaseException) -> str:
        name = self.remote.name
        if isinstance(e, InvalidStatus):
            return f"event stream refused by '{name}' (HTTP {e.response.status_code})"
        if isinstance(e, (asyncio.TimeoutError, TimeoutError)):
            return f"'{name}' is not responding"
        if isinstance(e, FileNotFoundError):
            return f"no {self.rest.product} socket at {self.remote.socket_path}"
        if isinstance(e, ConnectionRefusedError):
            return f"'{name}' refused the connection (daemon down?)"
        if isinstance(e, OSError) and "CERTIFICATE_VERIFY_FAILED" in str(e):
            return f"server certificate of '{name}' does not match the pinned one"
        return f"lost connection to '{name}'"
