"""An in-memory backend for fast, deterministic UI tests (Pilot, snapshots) only.

It is never the proof that a backend works: tests/backends/ runs the real ones.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import AsyncIterator

from .base import Backend
from .errors import Conflict, NotFound, NotResponding, StopTimedOut
from .models import (
    BackendEvent,
    Capability,
    EventKind,
    Instance,
    InstanceRef,
    InstanceState,
    InstanceStatus,
    InstanceType,
    Remote,
    ServerInfo,
)


class FakeBackend(Backend):
    kind = "fake"
    capabilities = frozenset({
        Capability.START, Capability.STOP, Capability.FORCE_STOP, Capability.RESTART,
        Capability.FREEZE, Capability.UNFREEZE, Capability.DELETE, Capability.EVENTS,
        Capability.METRICS,
    })

    def __init__(self, remote: Remote, *, timeout: float = 10.0,
                 instances: list[tuple[str, InstanceType, InstanceStatus]] = (),
                 hang_on_stop: set[str] = frozenset()) -> None:
        super().__init__(remote, timeout=timeout)
        self.data: dict[str, Instance] = {}
        for name, itype, status in instances:
            ref = InstanceRef(remote.name, name)
            self.data[name] = Instance(ref=ref, type=itype, status=status, image="busybox 1")
        self.queue: asyncio.Queue[BackendEvent] = asyncio.Queue()
        self.hang_on_stop = set(hang_on_stop)
        self.calls: list[tuple[str, str, dict]] = []
        self.fail_lists = 0
        """Fail this many listings (a remote that stumbles)."""
        self.connects = 0
        self.state_calls = 0

    async def connect(self) -> ServerInfo:
        self.connects += 1
        return ServerInfo(server="fake", version="1")

    async def close(self) -> None:
        return None

    async def list_instances(self) -> list[Instance]:
        if self.fail_lists > 0:
            self.fail_lists -= 1
            raise NotResponding(f"'{self.remote.name}' is not responding.")
        return list(self.data.values())

    async def get_instance(self, ref: InstanceRef) -> Instance:
        try:
            return self.data[ref.name]
        except KeyError:
            raise NotFound(f"{ref} not found") from None

    async def get_states(self, refs):
        self.state_calls += 1
        return {r: InstanceState(cpu_usage_ns=1, cpu_percent=1.5, memory_usage=4 << 20,
                                 ipv4=("10.0.0.2",), sampled_at=1.0)
                for r in refs if r.name in self.data
                and self.data[r.name].status is InstanceStatus.RUNNING}

    async def watch(self) -> AsyncIterator[BackendEvent]:
        yield BackendEvent(EventKind.CONNECTION, self.remote.name, action="connected")
        while True:
            yield await self.queue.get()

    def set_status(self, name: str, status: InstanceStatus) -> None:
        """Change an instance 'from outside' and emit the lifecycle event."""
        self.data[name] = replace(self.data[name], status=status)
        self.queue.put_nowait(BackendEvent(EventKind.LIFECYCLE, self.remote.name,
                                           action="instance-updated",
                                           ref=self.data[name].ref))

    def _set(self, ref: InstanceRef, status: InstanceStatus) -> None:
        self.set_status(ref.name, status)

    async def start(self, ref):
        self.calls.append(("start", ref.name, {}))
        self._set(ref, InstanceStatus.RUNNING)

    async def stop(self, ref, *, force=False, timeout=30):
        self.calls.append(("stop", ref.name, {"force": force}))
        if ref.name in self.hang_on_stop and not force:
            raise StopTimedOut(f"{ref} did not shut down within {timeout} s.")
        self._set(ref, InstanceStatus.STOPPED)

    async def restart(self, ref, *, force=False, timeout=30):
        self.calls.append(("restart", ref.name, {"force": force}))
        self._set(ref, InstanceStatus.RUNNING)

    async def freeze(self, ref):
        self.calls.append(("freeze", ref.name, {}))
        self._set(ref, InstanceStatus.FROZEN)

    async def unfreeze(self, ref):
        self.calls.append(("unfreeze", ref.name, {}))
        self._set(ref, InstanceStatus.RUNNING)

    async def delete(self, ref, *, force=False):
        self.calls.append(("delete", ref.name, {"force": force}))
        inst = self.data[ref.name]
        if inst.status is InstanceStatus.RUNNING and not force:
            raise Conflict(f"{ref} is running.")
        del self.data[ref.name]
        self.queue.put_nowait(BackendEvent(EventKind.LIFECYCLE, self.remote.name,
                                           action="instance-deleted", ref=ref))
