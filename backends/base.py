"""The one interface ``tui/`` drives, whatever the backend: the contract.

A backend object serves one :class:`~backends.models.Remote`. Every method is a coroutine;
blocking work (pylxd, subprocesses) stays inside the backend.

Every verb the UI can offer is declared here. The core (connect, list, lifecycle) is
abstract; every optional verb has a default that raises :class:`~backends.errors.Unsupported`.
A backend says what it offers in ``capabilities`` and nowhere else: the UI asks the
capabilities (``Backend.capabilities`` for the remote, ``instance_capabilities`` for one
instance right now), never ``hasattr``, signatures or remote names.
``CAPABILITY_METHODS`` ties each ability to the methods that provide it, and
:func:`contract_problems` (run by the contract tests) finds a backend that declares an
ability it does not implement, or implements one it does not declare.
"""

from __future__ import annotations

import abc
from datetime import datetime
from typing import AsyncIterator, Callable, ClassVar, Protocol, runtime_checkable

from .cluster_verbs import ClusterVerbs
from .create_preview import PreviewVerbs
from .deletion import DELETION_METHODS, DeletionVerbs
from .portable import PortableVerbs, portable_problems
from .errors import Unsupported
from .read_only import READ_ONLY_CAPABILITIES, guard, guarded_verbs
from .resources import RESOURCE_CAPABILITY_METHODS, RESOURCE_CAPABILITY_REQUIRES, ResourceVerbs
from .screen import ScreenSession
from .transfer_verbs import TransferVerbs

from .models import (
    BackendEvent,
    Capability,
    FileEntry,
    ImageInfo,
    Instance,
    InstanceRef,
    InstanceState,
    InstanceStatus,
    LimitField,
    Operation,
    Remote,
    ServerInfo,
    Snapshot,
)
from .create_models import CreateOptions, CreateRequest, CreateSource


class Backend(ResourceVerbs, ClusterVerbs, PreviewVerbs, PortableVerbs, DeletionVerbs,
              TransferVerbs, abc.ABC):
    """Base class of every backend (the verbs on profiles, networks, storage, projects and
    YAML come from :class:`~backends.resources.ResourceVerbs`)."""

    kind: ClassVar[str] = ""
    """Registry key: ``lxd``, ``incus``, ``qemu``, ``lxc``, ``libvirt``."""
    capabilities: ClassVar[frozenset[Capability]] = frozenset()
    """What this backend can do at all (see ``CAPABILITY_METHODS``)."""
    backup_extension: ClassVar[str] = ".tar.gz"
    """File name extension of the backups ``export_instance`` writes."""
    console_kinds: ClassVar[frozenset[str]] = frozenset()
    """Kinds ``open_console`` accepts: ``console`` (serial or /dev/console), ``vga``."""

    def __init__(self, remote: Remote, *, timeout: float = 10.0) -> None:
        self.remote = remote
        self.timeout = timeout
        # a read-only remote refuses every verb that would change it (read_only.py)
        guard(self, Backend, CAPABILITY_METHODS)

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
        """Changes on this remote, forever, reconnecting by itself (``EVENTS``).

        Yields a ``CONNECTION``/``connected`` event after every (re)connect, after which the
        listener must resync, and ``CONNECTION``/``disconnected`` when the stream drops.
        """
        raise self._unsupported("follow events")
        yield  # pragma: no cover - makes this an async generator

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
        """What can be done to this instance right now (a subset of ``capabilities``)."""
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
                Capability.DISPLAY,
                Capability.EXEC,
                Capability.SNAPSHOT_STATEFUL,
            }
        if status is not InstanceStatus.RUNNING:
            caps -= {Capability.PASSWORD, Capability.SNAPSHOT_STATEFUL}
        if self.remote.read_only:
            caps &= READ_ONLY_CAPABILITIES
        return frozenset(caps)

    def _unsupported(self, what: str) -> Unsupported:
        return Unsupported(f"{self.remote.name} ({self.kind}) cannot {what}.")

    def check_name(self, name: str) -> str | None:
        """Why ``name`` cannot be used for a new instance here (bad characters, length,
        taken), or None. Cheap: dialogs call it as the user types. The default knows no
        rules."""
        return None

    # Creating (CREATE) -----------------------------------------------------------------

    async def create_sources(self) -> list[CreateSource]:
        """What can be created here (LXD: local images and aliases; QEMU: the source
        kinds; LXC: templates and image tarballs)."""
        raise self._unsupported("create instances")

    async def create_options(self) -> CreateOptions:
        """Profiles, pools, networks, limits and defaults the launch wizard offers."""
        raise self._unsupported("create instances")

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
        raise self._unsupported("create instances")

    # Resource limits (RESOURCES) -------------------------------------------------------

    async def get_limits(self, ref: InstanceRef) -> list[LimitField]:
        """Every limit with its current value and whether a change applies live."""
        raise self._unsupported("change resource limits")

    async def set_limits(self, ref: InstanceRef, changes: dict[str, str]) -> dict[str, str]:
        """Apply ``{key: value}``; returns ``{key: "live" | "restart"}``.

        Raises:
            InvalidInput: a value is malformed or out of range (nothing is changed).
            Unsupported: a key this instance cannot limit.
        """
        raise self._unsupported("change resource limits")

    # Snapshots (SNAPSHOTS, SNAPSHOT_*) -------------------------------------------------

    async def list_snapshots(self, ref: InstanceRef) -> list[Snapshot]:
        raise self._unsupported("take snapshots")

    async def snapshot_counts(self, refs: list[InstanceRef]) -> dict[InstanceRef, int]:
        """How many snapshots each instance has (for the table); cheap, in one go."""
        raise self._unsupported("take snapshots")

    async def create_snapshot(self, ref: InstanceRef, name: str, *, stateful: bool = False,
                              expires_at: datetime | None = None) -> Snapshot:
        """Take a snapshot. ``stateful`` needs ``SNAPSHOT_STATEFUL`` (and a running
        instance), ``expires_at`` needs ``SNAPSHOT_EXPIRY``.

        Raises:
            Conflict: the name is taken.  InvalidInput: a bad name.
        """
        raise self._unsupported("take snapshots")

    async def restore_snapshot(self, snapshot: Snapshot) -> None:
        raise self._unsupported("take snapshots")

    async def delete_snapshot(self, snapshot: Snapshot) -> None:
        raise self._unsupported("take snapshots")

    async def rename_snapshot(self, snapshot: Snapshot, new_name: str) -> Snapshot:
        raise self._unsupported("rename snapshots")

    async def snapshot_settings(self, ref: InstanceRef) -> dict[str, str]:
        """Automatic snapshot settings: ``snapshots.schedule``, ``snapshots.expiry``,
        ``snapshots.pattern`` (as the daemon names them)."""
        raise self._unsupported("schedule snapshots")

    async def set_snapshot_settings(self, ref: InstanceRef, values: dict[str, str]) -> None:
        raise self._unsupported("schedule snapshots")

    # Consoles (CONSOLE, VGA, EXEC, SPICE) ----------------------------------------------

    async def open_console(self, ref: InstanceRef, *, width: int = 80, height: int = 24,
                           kind: str = "console") -> "ConsoleSession":
        """Attach to the instance's console (``kind="console"``: serial or /dev/console;
        ``kind="vga"``: the VGA text screen; see ``console_kinds``). The session delivers
        the console's history (output made while nobody watched) to its sink first, then
        live output.

        Raises:
            Unsupported: this instance has no such console (e.g. an LXD VM's screen is
                SPICE graphics: see ``SPICE``).
        """
        raise self._unsupported("attach to consoles")

    async def open_shell(self, ref: InstanceRef, command: list[str] | None = None, *,
                         width: int = 80, height: int = 24) -> "ConsoleSession":
        """Run ``command`` (default: a login shell) inside the instance on a terminal."""
        raise self._unsupported("run a shell inside instances")

    def spice_viewer_argv(self, ref: InstanceRef) -> list[str]:
        """The command that shows the VM's graphical (SPICE) screen in an external viewer."""
        raise self._unsupported("show graphical screens")

    async def open_display(self, ref: InstanceRef, *, fps: float = 10.0) -> ScreenSession:
        """The VM's graphical screen (``DISPLAY``), held by corral's console server so it
        survives corral and takes several viewers; frames come when the screen changes,
        at most ``fps`` a second.

        Raises:
            Conflict: the VM is not running.
            Unsupported: this VM has no screen corral can reach (e.g. started by an older
                corral: restart it).
        """
        raise self._unsupported("show graphical screens in the terminal")

    def display_viewer_argv(self, ref: InstanceRef) -> list[str]:
        """The command that shows the VM's graphical screen in an external viewer (a VNC
        viewer on the same socket), for a machine with a graphical desktop."""
        raise self._unsupported("show graphical screens in an external viewer")

    # Backups, copies, names (EXPORT, IMPORT, CLONE, COPY_MOVE, RENAME, DESCRIPTION) -----

    async def export_instance(self, ref: InstanceRef, path: str, *,
                              with_snapshots: bool = True,
                              progress: Callable[[str], None] | None = None) -> int:
        """Write a backup of the instance to ``path``; returns its size in bytes. Written
        beside ``path`` and renamed when complete, so nothing half-written is left."""
        raise self._unsupported("export instances")

    async def import_instance(self, path: str, name: str, *, storage_pool: str = "",
                              progress: Callable[[str], None] | None = None) -> Instance:
        """A new instance ``name`` from a backup file ``export_instance`` wrote."""
        raise self._unsupported("import backups")

    async def clone_instance(self, ref: InstanceRef, new_name: str, *,
                             with_snapshots: bool = True, linked: bool = False,
                             progress: Callable[[str], None] | None = None) -> Instance:
        """A copy on the same remote. ``linked`` (``LINKED_CLONE``) shares the source's
        disk instead of copying it."""
        raise self._unsupported("clone instances")

    async def rename_instance(self, ref: InstanceRef, new_name: str) -> Instance:
        raise self._unsupported("rename instances")

    async def set_description(self, ref: InstanceRef, text: str) -> None:
        raise self._unsupported("keep descriptions")

    # Images (PUBLISH, IMAGES) ----------------------------------------------------------

    async def publish_image(self, ref: InstanceRef, *, snapshot: str = "", alias: str = "",
                            public: bool = False, description: str = "",
                            progress: Callable[[str], None] | None = None) -> str:
        """Make an image of a stopped instance (or of one snapshot); returns its
        fingerprint."""
        raise self._unsupported("publish images")

    async def list_images(self) -> list[ImageInfo]:
        raise self._unsupported("list images")

    async def delete_image(self, fingerprint: str) -> None:
        raise self._unsupported("delete images")

    # Guest settings (PASSWORD, NICS) ---------------------------------------------------

    async def set_password(self, ref: InstanceRef, user: str, password: str) -> None:
        """Set a user's password inside a running instance (the password is not kept)."""
        raise self._unsupported("set passwords")

    async def list_nics(self, ref: InstanceRef) -> dict[str, dict[str, str]]:
        """Network interfaces: ``{device name: {key: value}}`` with an ``inherited``
        marker for those coming from profiles."""
        raise self._unsupported("change network interfaces")

    async def add_nic(self, ref: InstanceRef, name: str, *, network: str = "",
                      nictype: str = "", parent: str = "", ipv4: str = "",
                      ipv6: str = "") -> None:
        raise self._unsupported("change network interfaces")

    async def remove_nic(self, ref: InstanceRef, name: str) -> None:
        raise self._unsupported("change network interfaces")

    async def set_nic_addresses(self, ref: InstanceRef, name: str, ipv4: str = "",
                                ipv6: str = "") -> None:
        """Set (or with "" clear) the static addresses of NIC ``name``."""
        raise self._unsupported("change network interfaces")

    # Operations (OPERATIONS) -----------------------------------------------------------

    async def list_operations(self) -> list[Operation]:
        raise self._unsupported("list operations")

    async def cancel_operation(self, op_id: str) -> None:
        raise self._unsupported("cancel operations")

    # Files (FILES) -------------------------------------------------------------------

    async def list_files(self, ref: InstanceRef, path: str) -> list[FileEntry]:
        """The entries of directory ``path`` inside the instance, symlinks not followed.

        Raises:
            NotFound: no such directory. InvalidInput: not a directory.
            OperationFailed: refused (not running where that is needed, permission).
        """
        raise self._unsupported("browse files")

    async def read_file(self, ref: InstanceRef, entry: FileEntry, local: str,
                        progress: Callable[[int], None] | None = None) -> None:
        """Copy the regular file ``entry`` to the new local file ``local`` (its mode kept);
        ``progress(bytes so far)``. Cancelling stops it and removes ``local``."""
        raise self._unsupported("pull files")

    async def write_file(self, ref: InstanceRef, entry: FileEntry, local: str | None = None,
                         progress: Callable[[int], None] | None = None) -> None:
        """Create or replace ``entry`` inside the instance with its mode, uid and gid: a
        file with the content of ``local``, a directory, or a symlink to ``entry.target``.

        Raises:
            OperationFailed: refused (permission, no space, a directory in the way), in
                words.
        """
        raise self._unsupported("push files")


def prepare_class(cls: type[Backend]) -> None:
    """Work out once what every backend of ``cls`` needs (which verbs a read-only remote
    refuses, which take a target backend: a walk over a hundred methods and their
    signatures, ~5 ms per class), so that making one, on the event loop, does not."""
    guarded_verbs(cls, Backend, CAPABILITY_METHODS)


CAPABILITY_METHODS: dict[Capability, tuple[str, ...]] = {
    Capability.EVENTS: ("watch",),
    Capability.CREATE: ("create_sources", "create_options", "create_instance"),
    Capability.RESOURCES: ("get_limits", "set_limits"),
    Capability.SNAPSHOTS: ("list_snapshots", "snapshot_counts", "create_snapshot",
                           "restore_snapshot", "delete_snapshot"),
    Capability.SNAPSHOT_STATEFUL: ("create_snapshot",),
    Capability.SNAPSHOT_EXPIRY: ("create_snapshot",),
    Capability.SNAPSHOT_RENAME: ("rename_snapshot",),
    Capability.SNAPSHOT_SCHEDULE: ("snapshot_settings", "set_snapshot_settings"),
    Capability.CONSOLE: ("open_console",),
    Capability.VGA: ("open_console",),
    Capability.EXEC: ("open_shell",),
    Capability.SPICE: ("spice_viewer_argv",),
    Capability.DISPLAY: ("open_display", "display_viewer_argv"),
    Capability.EXPORT: ("export_instance",),
    Capability.IMPORT: ("import_instance",),
    Capability.CLONE: ("clone_instance",),
    Capability.LINKED_CLONE: ("clone_instance",),
    Capability.COPY_MOVE: ("copy_to",),
    Capability.PORTABLE: ("portable_vm",),
    Capability.PUBLISH: ("publish_image",),
    Capability.IMAGES: ("list_images", "delete_image"),
    Capability.PASSWORD: ("set_password",),
    Capability.NICS: ("list_nics", "add_nic", "remove_nic", "set_nic_addresses"),
    Capability.RENAME: ("rename_instance",),
    Capability.DELETE_STORAGE: DELETION_METHODS,
    Capability.DESCRIPTION: ("set_description",),
    Capability.OPERATIONS: ("list_operations", "cancel_operation"),
    **RESOURCE_CAPABILITY_METHODS,
    Capability.FILES: ("list_files", "read_file", "write_file"),
    Capability.CLUSTER: ("list_members", "placements", "move_to_member", "evacuate_member",
                         "restore_member", "cluster_instances"),
}
"""The methods each optional ability needs. Abilities not listed here (start, stop, …,
metrics) are the abstract core every backend implements."""

CAPABILITY_REQUIRES: dict[Capability, Capability] = {
    Capability.SNAPSHOT_STATEFUL: Capability.SNAPSHOTS,
    Capability.SNAPSHOT_EXPIRY: Capability.SNAPSHOTS,
    Capability.SNAPSHOT_RENAME: Capability.SNAPSHOTS,
    Capability.SNAPSHOT_SCHEDULE: Capability.SNAPSHOTS,
    Capability.LINKED_CLONE: Capability.CLONE,
    Capability.VGA: Capability.CONSOLE,
    **RESOURCE_CAPABILITY_REQUIRES,
}
"""Abilities that only make sense on top of another one."""


def implemented_methods(cls: type[Backend]) -> set[str]:
    """The optional methods ``cls`` overrides (its own implementation, not the default)."""
    names = {m for methods in CAPABILITY_METHODS.values() for m in methods}
    return {m for m in names if getattr(cls, m) is not getattr(Backend, m)}


def contract_problems(cls: type[Backend]) -> list[str]:
    """How ``cls`` breaks the contract (empty: it keeps it): a declared ability whose
    methods are missing, an implemented method no declared ability needs, or an ability
    declared without the one it builds on."""
    problems = []
    done = implemented_methods(cls)
    declared = set(cls.capabilities)
    for cap, methods in CAPABILITY_METHODS.items():
        missing = [m for m in methods if m not in done]
        if cap in declared and missing:
            problems.append(f"declares {cap.value} but does not implement {', '.join(missing)}")
    for method in sorted(done):
        if not any(method in CAPABILITY_METHODS[c] for c in declared if c in CAPABILITY_METHODS):
            problems.append(f"implements {method} but declares no ability that needs it")
    for cap, base in CAPABILITY_REQUIRES.items():
        if cap in declared and base not in declared:
            problems.append(f"declares {cap.value} without {base.value}")
    if Capability.VGA in declared and "vga" not in cls.console_kinds:
        problems.append("declares vga but 'vga' is not in console_kinds")
    if Capability.CONSOLE in declared and "console" not in cls.console_kinds:
        problems.append("declares console but 'console' is not in console_kinds")
    return problems + portable_problems(cls)


class ConsoleSink(Protocol):
    """Where a console session delivers output."""

    def feed(self, data: bytes) -> None: ...

    def closed(self, reason: str) -> None: ...


@runtime_checkable
class ConsoleSession(Protocol):
    """One attached console or shell: open with a size, bytes both ways, resize, close.

    ``special_keys`` names keys the session can send itself (e.g. ``ctrl+alt+delete`` on
    a VGA screen, sent with ``send_special``); empty for plain byte streams."""

    special_keys: tuple[str, ...]
    on_event: Callable[[str], None] | None
    """Set by the UI to hear what the session says besides its output (``graphics``: a VGA
    guest left text mode); a session with nothing to say never calls it."""

    async def start(self, sink: ConsoleSink) -> None: ...

    async def send_bytes(self, data: bytes) -> None: ...

    async def send_special(self, name: str) -> None: ...

    async def resize(self, width: int, height: int) -> None: ...

    async def close(self) -> None: ...

    async def history(self) -> bytes: ...

