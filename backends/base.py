"""The one interface ``tui/`` drives, whatever the backend.

A backend object serves one :class:`~backends.models.Remote`. Every method is a coroutine;
blocking work (pylxd, subprocesses) stays inside the backend. Optional abilities are
declared twice: in ``capabilities`` (cheap checks for the UI) and as
``runtime_checkable`` protocols for typing.
"""

from __future__ import annotations

import abc
from typing import AsyncIterator, Callable, ClassVar, Protocol, runtime_checkable

from .models import (
    BackendEvent,
    Capability,
    CreateOptions,
    CreateRequest,
    CreateSource,
    Instance,
    InstanceRef,
    InstanceState,
    InstanceStatus,
    LimitField,
    Remote,
    ServerInfo,
    Snapshot,
)


class Backend(abc.ABC):
    """Base class of every backend."""

    kind: ClassVar[str] = ""
    """Registry key: ``lxd``, ``incus``, ``qemu``, ``lxc``."""
    capabilities: ClassVar[frozenset[Capability]] = frozenset()
    """What this backend can do at all."""

    def __init__(self, remote: Remote, *, timeout: float = 10.0) -> None:
        self.remote = remote
        self.timeout = timeout

    @abc.abstractmethod
    async def connect(self) -> ServerInfo:
        """Open the connection and identify the server.

        Raises:
            Unreachable: no socket / refused / daemon gone.
            NotResponding: accepted but no answer within ``timeout``.
            AuthError: certificates missing or not matching.
        """

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections. Safe to call twice."""

    @abc.abstractmethod
    async def list_instances(self) -> list[Instance]:
        """Names, type and status of every instance: the cheap listing for the first paint.

        Raises:
            Unreachable, NotResponding, AuthError.
        """

    @abc.abstractmethod
    async def get_instance(self, ref: InstanceRef) -> Instance:
        """One instance, freshly read.

        Raises:
            NotFound: it does not exist (any more).
        """

    @abc.abstractmethod
    async def get_states(self, refs: list[InstanceRef]) -> dict[InstanceRef, InstanceState]:
        """Usage figures (CPU, memory, disk, addresses) of running instances.

        Instances that vanished or stopped meanwhile are left out of the result.
        """

    async def watch(self) -> AsyncIterator[BackendEvent]:
        """Changes on this remote, forever, reconnecting by itself.

        Yields a ``CONNECTION``/``connected`` event after every (re)connect, after which the
        listener must resync, and ``CONNECTION``/``disconnected`` when the stream drops.
        """
        raise NotImplementedError  # pragma: no cover - only backends without EVENTS
        yield  # pragma: no cover

    # Lifecycle -----------------------------------------------------------------------

    @abc.abstractmethod
    async def start(self, ref: InstanceRef) -> None: ...

    @abc.abstractmethod
    async def stop(self, ref: InstanceRef, *, force: bool = False, timeout: int = 30) -> None:
        """Stop gracefully within ``timeout`` seconds, or at once with ``force``.

        Raises:
            StopTimedOut: the guest did not shut down in time (offer ``force``).
        """

    @abc.abstractmethod
    async def restart(self, ref: InstanceRef, *, force: bool = False, timeout: int = 30) -> None: ...

    @abc.abstractmethod
    async def freeze(self, ref: InstanceRef) -> None: ...

    @abc.abstractmethod
    async def unfreeze(self, ref: InstanceRef) -> None: ...

    @abc.abstractmethod
    async def delete(self, ref: InstanceRef, *, force: bool = False) -> None:
        """Delete an instance. A running one needs ``force`` (it is stopped first).

        Raises:
            Conflict: running and not ``force``.
        """

    def instance_capabilities(self, instance: Instance) -> frozenset[Capability]:
        """What can be done to this instance right now (subset of ``capabilities``)."""
        caps = set(self.capabilities)
        status = instance.status
        if status is InstanceStatus.RUNNING:
            caps -= {Capability.START, Capability.UNFREEZE}
        elif status is InstanceStatus.FROZEN:
            caps -= {Capability.START, Capability.FREEZE, Capability.RESTART, Capability.EXEC}
        elif status is InstanceStatus.STOPPED:
            caps -= {
                Capability.STOP,
                Capability.FORCE_STOP,
                Capability.RESTART,
                Capability.FREEZE,
                Capability.UNFREEZE,
                Capability.CONSOLE,
                Capability.VGA,
                Capability.EXEC,
            }
        if self.remote.read_only:
            caps &= {Capability.EVENTS, Capability.METRICS, Capability.CONSOLE, Capability.VGA}
        return frozenset(caps)


@runtime_checkable
@runtime_checkable
class SupportsCreate(Protocol):
    """Backends the launch wizard can create instances on."""

    async def create_sources(self) -> list[CreateSource]:
        """What can be created here (LXD: local images and aliases; QEMU: the source
        kinds; LXC: templates and image tarballs)."""
        ...

    async def create_options(self) -> CreateOptions: ...

    def check_name(self, name: str) -> str | None:
        """Why ``name`` cannot be used (bad characters, length, taken), or None. Cheap:
        the wizard calls it as the user types."""
        ...

    async def create_instance(
        self, request: CreateRequest, progress: Callable[[str], None] | None = None
    ) -> Instance:
        """Create (and with ``request.start``, start) an instance. ``progress`` receives
        short texts ("unpacking image 45%"). On failure nothing is left behind.

        Raises:
            InvalidInput: a value the backend refuses (nothing created).
            Conflict: the name is taken.
            OperationFailed: the daemon/tool failed; what was made is removed.
        """
        ...


@runtime_checkable
class SupportsLifecycle(Protocol):
    """Hosting-panel verbs (issue: full lifecycle). The UI offers each one a backend has
    (checked with ``hasattr``); all take ``progress`` (short texts) where they are long,
    refuse in words (Conflict for running/taken, InvalidInput for bad values) and leave
    nothing half-made, also when cancelled.

    Every backend: ``export_instance(ref, path, *, with_snapshots, progress) -> int``,
    ``import_instance(path, name, *, storage_pool, progress) -> Instance``,
    ``clone_instance(ref, new_name, *, with_snapshots, progress[, linked]) -> Instance``,
    ``rename_instance(ref, new_name) -> Instance``, ``set_description(ref, text)``.
    LXD/Incus also: ``copy_to(ref, target, new_name, *, move, with_snapshots, progress)``,
    ``list_images()``, ``publish_image(ref, *, snapshot, alias, public, progress)``,
    ``delete_image(fingerprint)``, ``set_password(ref, user, password)``,
    ``list_nics(ref)``, ``add_nic(ref, name, *, network, nictype, parent, ipv4, ipv6)``,
    ``remove_nic(ref, name)``, ``set_nic_addresses(ref, name, ipv4, ipv6)``,
    ``list_operations()``, ``cancel_operation(op_id)``.
    """

    async def export_instance(self, ref: InstanceRef, path: str, *,
                              with_snapshots: bool = True,
                              progress: Callable[[str], None] | None = None) -> int: ...

    async def import_instance(self, path: str, name: str, *, storage_pool: str = "",
                              progress: Callable[[str], None] | None = None) -> Instance: ...

    async def clone_instance(self, ref: InstanceRef, new_name: str, *,
                             with_snapshots: bool = True,
                             progress: Callable[[str], None] | None = None) -> Instance: ...

    async def rename_instance(self, ref: InstanceRef, new_name: str) -> Instance: ...

    async def set_description(self, ref: InstanceRef, text: str) -> None: ...


@runtime_checkable
class SupportsSnapshots(Protocol):
    """Backends that list, take, restore and delete snapshots."""

    async def list_snapshots(self, ref: InstanceRef) -> list[Snapshot]: ...

    async def create_snapshot(
        self, ref: InstanceRef, name: str, *, stateful: bool = False
    ) -> Snapshot: ...

    async def restore_snapshot(self, snapshot: Snapshot) -> None: ...

    # Optional (checked with hasattr): rename_snapshot(snapshot, new_name) -> Snapshot,
    # snapshot_settings(ref) -> dict[str, str] and set_snapshot_settings(ref, dict)
    # (LXD: snapshots.schedule, snapshots.expiry, snapshots.pattern), and
    # create_snapshot(..., expires_at=datetime) where expiry is supported.

    async def delete_snapshot(self, snapshot: Snapshot) -> None: ...


@runtime_checkable
class SupportsLimits(Protocol):
    """Backends whose resource limits can be read and changed (live where possible)."""

    async def get_limits(self, ref: InstanceRef) -> list[LimitField]:
        """Every limit with its current value and whether a change applies live."""
        ...

    async def set_limits(self, ref: InstanceRef, changes: dict[str, str]) -> dict[str, str]:
        """Apply ``{key: value}``; returns ``{key: "live" | "restart"}``.

        Raises:
            InvalidInput: a value is malformed or out of range (nothing is changed).
            Unsupported: a key this instance cannot limit.
        """
        ...


class ConsoleSink(Protocol):
    """Where a console session delivers output."""

    def feed(self, data: bytes) -> None: ...

    def closed(self, reason: str) -> None: ...


@runtime_checkable
class ConsoleSession(Protocol):
    """One attached console or shell: open with a size, bytes both ways, resize, close."""

    async def start(self, sink: ConsoleSink) -> None: ...

    async def send_bytes(self, data: bytes) -> None: ...

    async def resize(self, width: int, height: int) -> None: ...

    async def close(self) -> None: ...

    async def history(self) -> bytes: ...


@runtime_checkable
class SupportsConsole(Protocol):
    """Backends with a serial/console attach and an exec shell."""

    async def open_console(
        self, ref: InstanceRef, *, width: int, height: int, kind: str = "console"
    ) -> ConsoleSession:
        """Attach to the instance's console (``kind="console"``: serial or /dev/console;
        ``kind="vga"``: the VGA text screen where the backend has one). The session
        delivers the console's history (output made while nobody watched) to its sink
        first, then live output."""

    async def open_shell(
        self, ref: InstanceRef, command: list[str] | None, *, width: int, height: int
    ) -> ConsoleSession: ...
