"""Frozen data models that cross the backend boundary.

Everything a backend returns is one of these: hashable where it is used as a key, free of
library objects (no pylxd models, no QMP dicts), and cheap to compare, so the UI can diff.
Raw backend data lives in ``extra`` fields, which are excluded from equality.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping

from .members import ClusterMember


class InstanceStatus(str, enum.Enum):
    """Normalised run state across backends."""

    RUNNING = "running"
    STOPPED = "stopped"
    FROZEN = "frozen"
    STARTING = "starting"
    STOPPING = "stopping"
    ERROR = "error"
    UNKNOWN = "unknown"


class InstanceType(str, enum.Enum):
    """Containers and virtual machines use the same verbs."""

    CONTAINER = "container"
    VM = "vm"


class ConnectionState(str, enum.Enum):
    """Connection state of one remote, as shown in the remotes pane."""

    CONNECTING = "connecting"
    CONNECTED = "connected"
    DISCONNECTED = "disconnected"
    NOT_RESPONDING = "not responding"
    UNTRUSTED = "not trusted"
    ERROR = "error"


class Capability(str, enum.Enum):
    """What a backend (or one instance right now) can do. The UI offers only these.

    Each ability maps to the :class:`~backends.base.Backend` methods that provide it
    (``backends.base.CAPABILITY_METHODS``); a backend declares an ability exactly when it
    implements those methods, which the contract tests check."""

    START = "start"
    STOP = "stop"
    FORCE_STOP = "force-stop"
    RESTART = "restart"
    FREEZE = "freeze"
    UNFREEZE = "unfreeze"
    DELETE = "delete"
    DELETE_STORAGE = "delete-storage"
    """Deleting can also remove the storage ``delete`` keeps, once listed to the user
    (``owned_storage``, ``delete_with_storage``: ``backends.deletion``)."""
    EVENTS = "events"
    METRICS = "metrics"
    SNAPSHOTS = "snapshots"
    CONSOLE = "console"
    VGA = "vga"
    EXEC = "exec"
    CREATE = "create"
    RESOURCES = "resources"
    SPICE = "spice"
    """The VM's graphical screen can be handed to an external SPICE viewer."""
    DISPLAY = "display"
    """The VM's graphical screen, drawn in the terminal (``open_display``) and offered to
    an external viewer (``display_viewer_argv``)."""
    SNAPSHOT_STATEFUL = "snapshot-stateful"
    """Snapshots of a running instance may keep its memory (``stateful=True``)."""
    SNAPSHOT_EXPIRY = "snapshot-expiry"
    """Snapshots may carry an expiry date (``expires_at=``)."""
    SNAPSHOT_RENAME = "snapshot-rename"
    SNAPSHOT_SCHEDULE = "snapshot-schedule"
    """Automatic snapshots: schedule, expiry and name pattern settings."""
    EXPORT = "export"
    IMPORT = "import"
    CLONE = "clone"
    LINKED_CLONE = "linked-clone"
    """``clone_instance(..., linked=True)``: a copy sharing the source's disk."""
    COPY_MOVE = "copy-move"
    """Copy or move an instance to another remote of a compatible kind."""
    PORTABLE = "portable"
    """A stopped VM can be handed to another backend (``portable_vm``: its own description
    and its disk files; ``backends.portable``), e.g. to become a local QEMU VM."""
    PUBLISH = "publish"
    IMAGES = "images"
    PASSWORD = "password"
    NICS = "nics"
    RENAME = "rename"
    DESCRIPTION = "description"
    OPERATIONS = "operations"
    """The remote's own list of background operations, with cancel."""
    PROFILES = "profiles"
    """List, create (empty or from another's settings), rename and delete profiles, and
    set an instance's profiles (in order)."""
    NETWORKS = "networks"
    """List networks (possibly read-only: the host's bridges)."""
    NETWORK_MANAGE = "network-manage"
    """Create and delete bridges; DHCP leases of managed networks."""
    STORAGE = "storage"
    """Storage pools and their custom volumes: create, resize, delete, attach, detach,
    copy."""
    PROJECTS = "projects"
    """List, create and delete projects (the remote can be shown in any of them)."""
    IMAGE_ALIASES = "image-aliases"
    """Add and remove image aliases, copy images to another remote of the same kind."""
    YAML_EDIT = "yaml-edit"
    """Objects can be read and written back as YAML, guarded by their ETag."""
    FILES = "files"
    """Browse the instance's files, pull and push them (``list_files``, ``read_file``,
    ``write_file``); symlinks are listed, never followed out of the instance."""
    CLUSTER = "cluster"
    """The remote is a cluster: members, placement at launch, moves between members,
    evacuate/restore (``backends.members``). Narrowed away on a remote that is not
    clustered."""


@dataclass(frozen=True, slots=True)
class Remote:
    """One configured place that holds instances: an LXD/Incus endpoint, a QEMU state
    directory or an LXC lxcpath."""

    name: str
    """Name shown to the user and used in ``remote:instance`` references."""
    kind: str
    """Backend kind: ``lxd``, ``incus``, ``qemu`` or ``lxc``."""
    address: str
    """``unix:///path/unix.socket`` or ``https://host:port`` (first of ``addresses``)."""
    project: str = "default"
    client_cert: str | None = None
    """Path of the TLS client certificate (HTTPS remotes)."""
    client_key: str | None = None
    server_cert: str | None = None
    """Path of the pinned server certificate, when the CLI pinned one."""
    source: str = ""
    """The file this remote came from (for messages)."""
    read_only: bool = False
    addresses: tuple[str, ...] = ()
    """Failover list (Incus allows several comma-separated addresses)."""
    problem: str | None = None
    """Why this remote cannot be used, found while reading the configuration."""

    @property
    def is_unix(self) -> bool:
        return self.address.startswith("unix:")

    @property
    def socket_path(self) -> str:
        return self.address[len("unix://"):] if self.is_unix else ""


@dataclass(frozen=True, slots=True, order=True)
class InstanceRef:
    """Identifies one instance: hashable, so it is a row key and a dict key."""

    remote: str
    name: str
    project: str = "default"

    def __str__(self) -> str:
        return f"{self.remote}:{self.name}"


@dataclass(frozen=True, slots=True)
class InstanceState:
    """Live usage figures of a running instance (fetched after the first paint)."""

    cpu_usage_ns: int = 0
    """Cumulative CPU time; a percentage needs two samples (see ``cpu_percent``)."""
    cpu_percent: float | None = None
    memory_usage: int = 0
    memory_limit: int | None = None
    memory_is_allocation: bool = False
    """``memory_usage`` is what the VM was given (its balloon), not what its guest uses:
    the guest reports no memory statistics."""
    disk_usage: int | None = None
    disk_limit: int | None = None
    ipv4: tuple[str, ...] = ()
    ipv6: tuple[str, ...] = ()
    processes: int | None = None
    pid: int | None = None
    rx_bytes: int = 0
    tx_bytes: int = 0
    sampled_at: float = 0.0
    """``time.monotonic()`` of the sample."""


@dataclass(frozen=True, slots=True)
class Instance:
    """One container or VM, as listed."""

    ref: InstanceRef
    type: InstanceType
    status: InstanceStatus
    image: str = ""
    description: str = ""
    architecture: str = ""
    created_at: datetime | None = None
    snapshot_count: int | None = None
    """``None`` until counted (listings do not include snapshots; counts come lazily)."""
    profiles: tuple[str, ...] = ()
    location: str = ""
    cpu_limit: str = ""
    """Configured CPU limit as the backend spells it (``2``, ``0-3``), empty when none."""
    memory_limit: int | None = None
    config: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    devices: Mapping[str, Mapping[str, str]] = field(default_factory=dict, compare=False, hash=False)
    """Its devices by name, each as its settings (LXD/Incus: expanded, with its profiles')."""
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def name(self) -> str:
        return self.ref.name

    @property
    def remote(self) -> str:
        return self.ref.remote


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A snapshot of one instance."""

    ref: InstanceRef
    name: str
    created_at: datetime | None = None
    stateful: bool = False
    expires_at: datetime | None = None
    size: int | None = None
    comment: str = ""


@dataclass(frozen=True, slots=True)
class Operation:
    """A background operation on a remote (LXD operations, QEMU jobs)."""

    id: str
    remote: str
    description: str
    status: str
    """``Pending``, ``Running``, ``Success``, ``Failure``, ``Cancelled``."""
    progress: str = ""
    may_cancel: bool = False
    error: str = ""
    instances: tuple[str, ...] = ()
    created_at: datetime | None = None
    interactive: bool = False
    """A console or exec session (LXD's websocket class), not work in progress."""

    @property
    def done(self) -> bool:
        return self.status in ("Success", "Failure", "Cancelled")


class EventKind(str, enum.Enum):
    LIFECYCLE = "lifecycle"
    OPERATION = "operation"
    CONNECTION = "connection"
    CLUSTER = "cluster"
    """A member of a cluster remote changed (``action`` ``member-changed``, ``message``
    the member's name, or empty for "re-read them all")."""


@dataclass(frozen=True, slots=True)
class BackendEvent:
    """Something changed on a remote.

    ``LIFECYCLE`` events name an instance (``ref``) and an action such as
    ``instance-stopped``; ``OPERATION`` events carry the operation; ``CONNECTION`` events
    say the event stream went up (``connected``: the listener must resync) or down
    (``disconnected``, with ``message``; ``not-responding`` when the remote accepts
    connections but does not answer, such as a daemon stopped with SIGSTOP).
    """

    kind: EventKind
    remote: str
    action: str = ""
    ref: InstanceRef | None = None
    operation: Operation | None = None
    message: str = ""
    timestamp: datetime | None = None


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What a remote told us about itself when we connected."""

    server: str
    """``lxd`` or ``incus`` (from ``environment.server``), ``qemu``, ``lxc``."""
    version: str = ""
    api_extensions: frozenset[str] = frozenset()
    auth: str = ""
    """``trusted`` / ``untrusted``."""
    server_name: str = ""
    note: str = ""
    """Something the user should know about this connection (a cluster remote reached
    through another member than the configured one, and why)."""


@dataclass(frozen=True, slots=True)
class FirstListing:
    """A remote's instances read before its backend exists (:func:`backends.first_listing`):
    what the first screen shows while the backend is imported and connected."""

    remote: Remote
    """The remote as it was asked (a listing of another project or address is not its)."""
    info: ServerInfo
    instances: tuple[Instance, ...]
    members: tuple[ClusterMember, ...] = ()
    """A cluster's members, read in the same round trips (its rows and its Location
    column come with them)."""


@dataclass(frozen=True, slots=True)
class LimitField:
    """One resource limit of an instance, as the resource editor shows it."""

    key: str
    """``memory``, ``cpu_weight``, ``cpu_quota``, ``cpuset``, ``io_weight``, ``pids``, …"""
    label: str
    value: str
    """Current value in the units of ``hint`` (empty: unlimited / default)."""
    applies: str
    """``live`` (takes effect now), ``restart`` (saved, takes effect at next start) or
    ``unsupported`` (this host/instance cannot do it; ``hint`` says why)."""
    hint: str = ""
    pending: str = ""
    """A value saved but not in effect until the next start (empty: none)."""


@dataclass(frozen=True, slots=True)
class ImageInfo:
    """One image of a remote's image store."""

    fingerprint: str
    aliases: tuple[str, ...] = ()
    description: str = ""
    size: int | None = None
    public: bool = False
    type: str = "container"
    """``container`` or ``virtual-machine``."""
    architecture: str = ""
    created_at: datetime | None = None
    uploaded_at: datetime | None = None
    cached: bool = False
    """Copied in automatically from another server (and removed when unused)."""
    last_used_at: datetime | None = None


class ResourceKind(str, enum.Enum):
    """The kinds of objects besides instances a remote may hold."""

    PROFILE = "profile"
    NETWORK = "network"
    POOL = "storage-pool"
    VOLUME = "storage-volume"
    PROJECT = "project"
    IMAGE = "image"
    INSTANCE = "instance"
    """Only as the kind of a YAML edit (``get_yaml``/``put_yaml``)."""


@dataclass(frozen=True, slots=True)
class Resource:
    """One profile, network, storage pool or volume, or project of a remote.

    ``fields`` are the columns the views show, as ``(key, text)`` pairs in the backend's
    words; ``used_by`` names what uses it (``instance web1``, ``profile default``)."""

    kind: ResourceKind
    remote: str
    name: str
    project: str = "default"
    parent: str = ""
    """The pool a volume lives in; empty otherwise."""
    description: str = ""
    used_by: tuple[str, ...] = ()
    fields: tuple[tuple[str, str], ...] = ()
    read_only: bool = False
    """Listed for information only (an unmanaged network, the host's bridge)."""
    config: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    devices: Mapping[str, Mapping[str, str]] = field(default_factory=dict, compare=False, hash=False)
    """A profile's devices by name, each as its settings; empty for other kinds."""
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def get(self, key: str, default: str = "") -> str:
        """The text of field ``key``."""
        for k, v in self.fields:
            if k == key:
                return v
        return default

    @property
    def key(self) -> str:
        """Unique per remote: kind, project, pool and name."""
        return f"{self.remote}\x1f{self.project}\x1f{self.parent}\x1f{self.name}"



@dataclass(frozen=True, slots=True)
class FileEntry:
    """One entry of an instance's file system, as the instance sees it (its uid/gid)."""

    path: str
    """Absolute path inside the instance."""
    kind: str
    """``file``, ``directory``, ``symlink`` or ``other`` (devices, sockets: not copied)."""
    size: int = 0
    mode: int = 0o644
    """Permission bits (``0o7777`` at most)."""
    uid: int = 0
    gid: int = 0
    target: str = ""
    """A symlink's target, as stored (never resolved)."""

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1] or "/"
