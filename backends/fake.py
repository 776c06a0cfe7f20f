"""An in-memory backend for fast, deterministic UI tests (Pilot, snapshots) only.

It is never the proof that a backend works: tests/backends/ runs the real ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import replace
from typing import AsyncIterator, Callable

from .base import Backend
from .deletion import StorageOffer
from .errors import (
    AcceleratorUnusable,
    Conflict,
    InvalidInput,
    NotFound,
    NotResponding,
    StopTimedOut,
)
from .models import (
    BackendEvent,
    Capability,
    EventKind,
    Instance,
    InstanceRef,
    InstanceState,
    InstanceStatus,
    InstanceType,
    LimitField,
    Remote,
    ServerInfo,
)
from .create_models import CreateOptions, CreateRequest, CreateSource


class FakeBackend(Backend):
    kind = "fake"
    capabilities = frozenset({
        Capability.START, Capability.STOP, Capability.FORCE_STOP, Capability.RESTART,
        Capability.FREEZE, Capability.UNFREEZE, Capability.DELETE, Capability.EVENTS,
        Capability.METRICS, Capability.CREATE, Capability.RESOURCES,
        Capability.DELETE_STORAGE,
    })

    def __init__(self, remote: Remote, *, timeout: float = 10.0,
                 instances: Iterable[tuple[str, InstanceType, InstanceStatus]] = (),
                 hang_on_stop: Iterable[str] = (),
                 kvm_broken: Iterable[str] = ()) -> None:
        super().__init__(remote, timeout=timeout)
        self.data: dict[str, Instance] = {}
        for name, itype, status in instances:
            ref = InstanceRef(remote.name, name)
            self.data[name] = Instance(ref=ref, type=itype, status=status, image="busybox 1")
        self.queue: asyncio.Queue[BackendEvent] = asyncio.Queue()
        self.hang_on_stop = set(hang_on_stop)
        self.kvm_broken = set(kvm_broken)
        """VMs whose first start fails as under broken KVM (the next one 'uses TCG')."""
        self.calls: list[tuple[str, str, dict]] = []
        self.fail_lists = 0
        """Fail this many listings (a remote that stumbles)."""
        self.connects = 0
        self.state_calls = 0
        self.slow_create = 0.0
        """Seconds a creation takes (to test progress and cancelling)."""
        self.storage: dict[str, list[str]] = {}
        """What ``delete`` keeps of an instance (``owned_storage``), by name."""
        self.kept_storage: dict[str, list[tuple[str, str]]] = {}
        """Storage of an instance never offered, with why (``storage_offer``), by name."""

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
        if ref.name in self.kvm_broken:
            self.kvm_broken.discard(ref.name)
            raise AcceleratorUnusable(f"QEMU could not start {ref} with KVM: KVM does not "
                                      f"work on this host.", retry_slower=True)
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

    async def owned_storage(self, ref: InstanceRef) -> list[str]:
        if ref.name not in self.data:
            raise NotFound(f"{ref} not found")
        return list(self.storage.get(ref.name, ()))

    async def storage_offer(self, ref: InstanceRef) -> StorageOffer:
        return StorageOffer(tuple(await self.owned_storage(ref)),
                            tuple(self.kept_storage.get(ref.name, ())))

    async def delete_with_storage(self, ref: InstanceRef, storage: list[str], *,
                                  force: bool = False) -> None:
        strangers = [p for p in storage if p not in self.storage.get(ref.name, ())]
        if strangers:
            raise Conflict(f"{', '.join(strangers)}: not {ref}'s own; nothing was deleted.")
        await self.delete(ref, force=force)
        self.calls.append(("delete_storage", ref.name, {"storage": list(storage)}))
        self.storage.pop(ref.name, None)

    # Creation and limits (for the wizard's and editor's UI tests) ------------------------

    async def create_sources(self) -> list[CreateSource]:
        return [CreateSource("image", "busybox", "fp-busybox", InstanceType.CONTAINER,
                             "Busybox 1.36 · x86_64 · 1.2MiB"),
                CreateSource("image", "debian/12", "fp-debian", InstanceType.VM,
                             "Debian bookworm · x86_64 · 310MiB"),
                CreateSource("empty-vm", "Empty VM (network boot / ISO)", "",
                             InstanceType.VM)]

    async def create_options(self) -> CreateOptions:
        return CreateOptions(profiles=("default", "web"), default_profiles=("default",),
                             storage_pools=("default", "fast"), networks=("lxdbr0",),
                             max_cpus=8, user_data=True, can_cancel=True,
                             defaults={"cpus": "1", "memory": "512MiB", "disk": ""})

    def check_name(self, name: str) -> str | None:
        if not name.replace("-", "").isalnum() or name[0].isdigit():
            return f"'{name}' is not a valid instance name."
        if name in self.data:
            return f"An instance named '{name}' already exists."
        return None

    async def create_instance(self, request: CreateRequest, progress=None) -> Instance:
        problem = self.check_name(request.name)
        if problem:
            raise InvalidInput(problem)
        self.calls.append(("create", request.name, {"request": request}))
        if self.slow_create:
            if progress:
                progress("unpacking image 10%")
            try:
                await asyncio.sleep(self.slow_create)
            except asyncio.CancelledError:
                self.calls.append(("create-cancelled", request.name, {}))
                raise
        ref = InstanceRef(self.remote.name, request.name)
        inst = Instance(ref=ref, type=request.source.type, image=request.source.label,
                        status=InstanceStatus.RUNNING if request.start
                        else InstanceStatus.STOPPED)
        self.data[request.name] = inst
        self.queue.put_nowait(BackendEvent(EventKind.LIFECYCLE, self.remote.name,
                                           action="instance-created", ref=ref))
        return inst

    async def get_limits(self, ref: InstanceRef) -> list[LimitField]:
        running = self.data[ref.name].status is InstanceStatus.RUNNING
        live = "live" if running else "restart"
        return [
            LimitField("cpus", "CPUs", "2", live, "number of CPUs"),
            LimitField("memory", "Memory", "1GiB", live, "e.g. 512MiB, 2GiB",
                       pending="2GiB" if running else ""),
            LimitField("disk", "Root disk", "10GiB", "restart", "grow only"),
            LimitField("net_egress", "Network egress", "", "unsupported",
                       "this host has no traffic shaping"),
        ]

    async def set_limits(self, ref: InstanceRef, changes: dict[str, str]) -> dict[str, str]:
        self.calls.append(("set_limits", ref.name, dict(changes)))
        fields = {f.key: f for f in await self.get_limits(ref)}
        return {k: fields[k].applies for k in changes}


class RecordingSession:
    """An in-memory console session that keeps what it is sent: ``sent`` once it has
    started, ``too_early`` before (a real session would drop those). ``start_delay``
    plays a daemon's handshake."""

    special_keys: tuple[str, ...] = ()
    on_event: Callable[[str], None] | None = None

    def __init__(self, start_delay: float = 0.0) -> None:
        self.start_delay = start_delay
        self.started = False
        self.sent = bytearray()
        self.too_early = bytearray()
        self.sink = None

    async def start(self, sink) -> None:
        if self.start_delay:
            await asyncio.sleep(self.start_delay)
        self.sink = sink
        self.started = True

    async def send_bytes(self, data: bytes) -> None:
        (self.sent if self.started else self.too_early).extend(data)

    async def send_special(self, name: str) -> None:
        pass

    async def resize(self, width: int, height: int) -> None:
        pass

    async def close(self) -> None:
        pass

    async def history(self) -> bytes:
        return b""
