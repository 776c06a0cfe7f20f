"""What the concerns of an LXD/Incus backend remember between calls: the server's facts,
the instance names and run states last seen, usage samples, limits waiting for a restart,
what the host refused, and the cluster's hook into the events stream."""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from ..errors import Conflict, InvalidInput
from ..models import Instance, InstanceRef, InstanceState, InstanceStatus, ServerInfo
from . import convert
from .rest import Rest


class Known:
    """One remote's remembered facts (no I/O but :meth:`names_now`, through ``rest``)."""

    def __init__(self, rest: Rest) -> None:
        self.rest = rest
        self.info: ServerInfo | None = None
        self.host: dict[str, Any] = {}
        """The answer to ``GET /1.0`` when it connected."""
        self.names: set[str] = set()
        """Instance names of the last listing (for ``check_name``)."""
        self.listing: tuple[bytes, tuple[Instance, ...]] | None = None
        """The last listing: the digest of the daemon's answer and its instances (an
        answer with the same digest is not parsed again)."""
        self.status: dict[InstanceRef, InstanceStatus] = {}
        self.previous: dict[InstanceRef, InstanceState] = {}
        """The last usage sample of each running instance (CPU % needs two)."""
        self.pending: dict[InstanceRef, dict[str, tuple[str, str]]] = {}
        """Limits changed on a running instance that apply at its next start:
        ``{ref: {key: (value in effect, saved value)}}``."""
        self.config_live: dict[str, bool] | None | bool = False
        """``liveupdate`` per instance key from /1.0/metadata/configuration; None when the
        server has no such endpoint; False until asked."""
        self.pool_drivers: dict[str, str] = {}
        self.host_unsupported: dict[str, str] = {}
        """Limits this host refused for every instance (key -> the daemon's words)."""
        self.ready = asyncio.Event()
        """Set once ``connect`` has finished (the events stream subscribes accordingly)."""
        self.cluster_hook: Callable[[dict[str, Any]], Any] | None = None
        """Set on a cluster remote: turns event frames about members into events, and
        makes the events stream end when it drops (to reconnect through another member)."""

    @property
    def extensions(self) -> frozenset[str]:
        return self.info.api_extensions if self.info else frozenset()

    def ref_of(self, name: str) -> InstanceRef:
        r = self.rest.remote
        return InstanceRef(r.name, name, r.project)

    def saw_status(self, ref: InstanceRef, status: InstanceStatus) -> None:
        """Track run states: a start seen between two reads ends pending limits."""
        before = self.status.get(ref)
        self.status[ref] = status
        if status is InstanceStatus.RUNNING and before is not None \
                and before is not InstanceStatus.RUNNING and before is not InstanceStatus.FROZEN:
            self.pending.pop(ref, None)

    def forget(self, ref: InstanceRef) -> None:
        """``ref`` is gone (deleted or renamed): drop what is remembered of it."""
        for table in (self.previous, self.pending, self.status):
            table.pop(ref, None)
        self.names.discard(ref.name)

    async def names_now(self) -> set[str]:
        """The instance names on the server now (and remembered for ``check_name``)."""
        client = self.rest.client
        urls = await self.rest.call(lambda: client.api.instances.get().json()["metadata"] or [])
        self.names = {convert.url_name(u) for u in urls}
        return set(self.names)

    async def check_free(self, name: str) -> None:
        """Raise unless ``name`` is a valid instance name that is not taken."""
        problem = convert.name_problem(name)
        if problem:
            raise InvalidInput(f"Instance name '{name}': {problem}")
        if name in await self.names_now():
            raise Conflict(f"'{name}' is already taken on '{self.rest.remote.name}'.")
