"""What a container archive (written by ``export_instance``) may hold, read by the one
archive reader (:mod:`backends.archive`: canonical names, each member checked and then
extracted from the same stream, links only strictly inside a root file system).

Its members: ``config``, ``rootfs/`` and ``snaps/<x>/`` holding ``config``, ``rootfs/``,
``ts`` and ``comment``. Inside a root file system (``rootfs/``, ``snaps/<x>/rootfs/``)
everything is the container's own (owners, setuid bits, links pointing inside it, FIFOs,
and the character devices LXC's common settings let a container use); nothing else may be
a link or a device. The configs are kept in memory, never written by the reader: the
import writes them itself, from the very bytes that were checked.

Its configs may carry only the settings of :func:`config_problems`' allow-list: an
archive is someone else's container, and settings such as hooks, includes, host mounts,
capabilities, AppArmor/seccomp overrides, devices or autostart would run code on this host
or expose it when the container starts. A config without the distribution's common
include gets corral's baseline (:func:`with_baseline`): LXC's common capability drops,
device cgroup and seccomp policy.

An LXD-style unified image (:class:`UnifiedImage`), which a container is created from,
is read by the same reader: its ``rootfs/`` by the same rules as a container's."""

from __future__ import annotations

import grp
import pwd
import re
import tarfile

from ..archive import ArchiveRefused, Policy, read_archive
from ..work import Worker
from . import parse
from .limits import LIMITS


class SettingsRefused(ArchiveRefused):
    """A config of the archive has settings outside the allow-list (named in words)."""


# The allow-list of an imported container's config (see config_problems). The values of
# corral's own containers (the busybox template, images made with 'lxc-create -t none' from
# the archive reader's rootfs, corral's limits) all pass.
_FREE = re.compile(
    r"lxc\.(arch|uts\.name|rootfs\.path|signal\.(halt|reboot|stop)|autodev|"
    r"autodev\.tmpfs\.size|tty\.max|tty\.dir|pty\.max|console\.size|console\.rotate|"
    r"cap\.drop|no_new_privs|init\.(cmd|uid|gid|cwd)|execute\.cmd|ephemeral|"
    r"log\.level|prlimit\.\w+|start\.(delay|order)|time\.offset\.\w+|"
    r"net\.\d+\.(link|flags|hwaddr|name|mtu|ipv4\.address|ipv4\.gateway|ipv6\.address|"
    r"ipv6\.gateway|veth\.pair))")
_CGROUP = {f"lxc.cgroup.{key}" for limit in LIMITS for key in limit.v1} | \
    {f"lxc.cgroup2.{limit.v2}" for limit in LIMITS}
_EXACT = {
    "lxc.apparmor.profile": {"generated"},
    "lxc.apparmor.allow_nesting": {"0", "1"},
    "lxc.start.auto": {"0"},
    "lxc.net.0.type": {"empty", "veth"},
}
# not a bare "cgroup": LXC reads it as cgroup:rw when the container keeps CAP_SYS_ADMIN
_MOUNT_AUTO = {"proc", "proc:mixed", "sys", "sys:ro", "sys:mixed", "cgroup:mixed",
               "cgroup:ro"}
_FS_MOUNTS = {"tmpfs", "mqueue", "devpts"}  # kernel file systems, no host data
_RO_BINDS = {"/lib", "/usr/lib", "/lib64", "/usr/lib64", "/sys/kernel/security"}
_INCLUDE = re.compile(r"/usr/share/lxc/config/(\w+\.)?(common|userns)\.conf")
_COMMON = re.compile(r"/usr/share/lxc/config/(\w+\.)?common\.conf")
_USERNS = re.compile(r"/usr/share/lxc/config/(\w+\.)?userns\.conf")
_LXC_COMMON = "/usr/share/lxc/config/common.conf"
# An id map's host ids lie above the 16-bit id space where the system's users, groups
# and nobody live (LXC's and LXD's subordinate ids start at 100000).
FIRST_MAPPED_ID = 65536

# corral's baseline for a config without the common include: what LXC's common.conf
# restricts (capabilities, the device cgroup for cgroup v1 and v2, its seccomp policy).
_ALLOWED_DEVICES = ["c *:* m", "b *:* m", "c 1:3 rwm", "c 1:5 rwm", "c 1:7 rwm", "c 5:0 rwm",
                    "c 5:1 rwm", "c 5:2 rwm", "c 1:8 rwm", "c 1:9 rwm", "c 136:* rwm",
                    "c 10:229 rwm"]
BASELINE = [
    "lxc.cap.drop = mac_admin mac_override sys_time sys_module sys_rawio",
    *(line for v in ("cgroup", "cgroup2") for line in (
        f"lxc.{v}.devices.deny = a",
        *(f"lxc.{v}.devices.allow = {rule}" for rule in _ALLOWED_DEVICES))),
    "lxc.seccomp.profile = /usr/share/lxc/config/common.seccomp",
]
_EXACT.update({  # the baseline's own values pass the allow-list
    **{f"lxc.{v}.devices.deny": {"a"} for v in ("cgroup", "cgroup2")},
    **{f"lxc.{v}.devices.allow": set(_ALLOWED_DEVICES) for v in ("cgroup", "cgroup2")},
    "lxc.seccomp.profile": {"/usr/share/lxc/config/common.seccomp"},
})


def _mount_entry_ok(value: str) -> bool:
    fields = value.split()
    if len(fields) < 4:
        return False
    source, target, fstype, options = fields[:4]
    if target.startswith("/") or ".." in target.split("/"):
        return False
    opts = options.split(",")
    if "bind" in opts or "rbind" in opts:  # the busybox template's read-only system binds
        return source in _RO_BINDS and "ro" in opts
    return fstype in _FS_MOUNTS and not source.startswith("/")


def _known_ids() -> tuple[set[int], set[int]]:
    """The uids and gids of this host's users and groups (as NSS lists them)."""
    users = pwd.getpwall()
    return ({u.pw_uid for u in users},
            {u.pw_gid for u in users} | {g.gr_gid for g in grp.getgrall()})


def _idmap(value: str) -> tuple[str, int, int, int] | None:
    fields = value.split()
    if len(fields) != 4 or fields[0] not in ("u", "g") or \
            not all(f.isdigit() for f in fields[1:]):
        return None
    kind, (inside, host, count) = fields[0], (int(f) for f in fields[1:])
    return (kind, inside, host, count) if count > 0 else None


def _idmap_ok(value: str, known: tuple[set[int], set[int]]) -> bool:
    """Whether an ``lxc.idmap`` maps the container's ids onto host ids nobody on this
    host has: a map onto root or a local user's (or group's) id would give that user
    the container's root, its directory and its setuid files on the host."""
    idmap = _idmap(value)
    if idmap is None:
        return False
    kind, _, host, count = idmap
    ids = known[0] if kind == "u" else known[1]
    return FIRST_MAPPED_ID <= host and host + count <= 1 << 32 and \
        not any(host <= i < host + count for i in ids)


def _maps_root(settings: list[tuple[str, str]]) -> bool:
    """Whether the container's root user and group are both mapped (a user namespace)."""
    kinds = set()
    for key, value in settings:
        idmap = _idmap(value) if key == "lxc.idmap" else None
        if idmap and idmap[1] <= 0 < idmap[1] + idmap[3]:
            kinds.add(idmap[0])
    return kinds == {"u", "g"}


def config_problems(text: str) -> list[str]:
    """The settings of an imported container's config that are not allowed, each as
    ``key = value`` (empty: acceptable). Allowed: what a container needs to run and what
    corral itself writes (architecture, name, rootfs, signals, ttys, NICs of type empty or
    veth, corral's cgroup limits, dropped capabilities, the generated AppArmor profile, the
    distribution's common include, its userns include only for a container whose root
    user and group are mapped (it clears the capability drops and the device cgroup), id
    maps only onto host ids above 65535 that no user or group of this host has, mounts of tmpfs/mqueue/devpts, the busybox
    template's read-only binds of system libraries, and the exact lines of corral's
    :data:`BASELINE`). Everything else is refused: hooks and net scripts, other
    includes, host mounts and fstabs, kept capabilities, AppArmor, SELinux and seccomp
    overrides, devices, namespaces shared with the host, sysctls, host log/console files
    and autostart."""
    problems = []
    settings = _settings(text)
    known = _known_ids() if any(key == "lxc.idmap" for key, _ in settings) else (set(), set())
    userns = _maps_root(settings)
    for line in text.splitlines():
        key, eq, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key or key.startswith("#"):
            if key and not key.startswith("#"):
                problems.append(key)
            continue
        net_type = re.fullmatch(r"lxc\.net\.\d+\.type", key)
        allowed = _EXACT.get("lxc.net.0.type" if net_type else key)
        if allowed is not None:
            ok = " ".join(value.split()) in allowed
        elif key == "lxc.mount.auto":
            ok = all(token in _MOUNT_AUTO for token in value.split())
        elif key == "lxc.mount.entry":
            ok = _mount_entry_ok(value)
        elif key == "lxc.include":  # userns.conf clears the drops and the device cgroup
            ok = bool(_INCLUDE.fullmatch(value)) and (userns or not _USERNS.fullmatch(value))
        elif key == "lxc.idmap":
            ok = _idmap_ok(value, known)
        elif key == "lxc.cap.drop":  # empty would clear the drops of the includes
            ok = bool(value)
        else:
            ok = key in _CGROUP or bool(_FREE.fullmatch(key))
        if not ok:
            problems.append(f"{key} = {value}")
    return problems


def _settings(text: str) -> list[tuple[str, str]]:
    out = []
    for line in text.splitlines():
        key, eq, value = line.partition("=")
        if eq and not key.strip().startswith("#"):
            out.append((key.strip(), " ".join(value.split())))
    return out


def _includes_common(value: str) -> bool:
    """Whether ``lxc.include = value`` brings LXC's common.conf: that file itself, or a
    ``<dist>.common.conf`` of this host that includes it (not any file of that name:
    ``oci.common.conf`` holds only comments)."""
    if value == _LXC_COMMON:
        return True
    if not _COMMON.fullmatch(value):
        return False
    try:
        with open(value, encoding="utf-8", errors="replace") as f:
            included = _settings(f.read(1 << 20))
    except OSError:
        return False
    return ("lxc.include", _LXC_COMMON) in included


def with_baseline(text: str) -> str:
    """A config that includes LXC's common settings (``lxc.include =
    /usr/share/lxc/config/common.conf``, or a ``<dist>.common.conf`` of this host that
    includes it: :func:`_includes_common`), or already holds
    every line of corral's :data:`BASELINE`, as it is; any other one with the baseline
    added at its end (an archive's config, e.g. of LXC's busybox template, that would
    otherwise run with every capability, no device cgroup and no seccomp filter)."""
    settings = _settings(text)
    if any(key == "lxc.include" and _includes_common(value) for key, value in settings):
        return text
    if set(_settings("\n".join(BASELINE))) <= set(settings):
        return text
    return (text.rstrip("\n") + "\n# corral: LXC's common restrictions, added on import "
            "(the archive's config did not include common.conf)\n"
            + "\n".join(BASELINE) + "\n")


def mapped_root_gid(text: str) -> int | None:
    """The host group of the container's root group by the config's ``lxc.idmap``
    (None: no group map, a privileged container)."""
    for key, value in _settings(text):
        fields = value.split()
        if key == "lxc.idmap" and len(fields) == 4 and fields[0] == "g" and \
                all(f.isdigit() for f in fields[1:]):
            inside, host, count = (int(f) for f in fields[1:])
            if inside <= 0 < inside + count:
                return host - inside
    return None


# The character devices LXC's common.conf lets a container read and write.
_DEVICES = {(1, 3), (1, 5), (1, 7), (1, 8), (1, 9), (5, 0), (5, 1), (5, 2), (10, 229)}
_PTS = 136


class ContainerArchive(Policy):
    """The :class:`~backends.archive.Policy` of an exported LXC container."""

    where = "the container's directory"

    def root_of(self, name: str) -> str | None:
        parts = name.split("/")
        if parts[0] == "rootfs" and len(parts) > 1:
            return "rootfs"
        if parts[0] == "snaps" and len(parts) > 3 and parts[2] == "rootfs":
            return "/".join(parts[:3])
        return None

    def is_root(self, name: str) -> bool:
        parts = name.split("/")
        return name == "rootfs" or (len(parts) == 3 and parts[0] == "snaps"
                                    and parts[2] == "rootfs")

    def check(self, name: str, member: tarfile.TarInfo) -> str | None:
        parts = name.split("/")
        if parts[0] not in ("config", "rootfs", "snaps"):
            return f"'{name}' is not part of a container (config, rootfs/, snaps/)"
        if self.root_of(name):
            return _device_problem(name, member) if member.isdev() else None
        if member.issym() or member.islnk():
            return f"'{name}' is a link, where the container's own files and directories lie"
        if not (member.isdir() or member.isreg()):
            return f"'{name}' is a device or special file outside a root file system"
        directory = self.is_root(name) or name == "snaps" or \
            (len(parts) == 2 and parts[0] == "snaps")
        file = name == "config" or (len(parts) == 3 and parts[0] == "snaps"
                                    and parts[2] in ("config", "ts", "comment"))
        if directory and not member.isdir():
            return f"'{name}' is a file where a directory belongs"
        if file and not member.isreg():
            return f"'{name}' is a directory where a file belongs"
        if not (directory or file):
            return f"'{name}' is not part of a container (config, rootfs/, snaps/)"
        return None

    def keep(self, name: str) -> bool:
        parts = name.split("/")
        return name == "config" or (len(parts) == 3 and parts[0] == "snaps"
                                    and parts[2] == "config")

    def kept(self, name: str, data: bytes) -> None:
        text = data.decode(errors="replace")
        refused = config_problems(text)
        if refused:
            raise SettingsRefused(
                f"its {name} has settings corral does not accept from an archive, because "
                f"they would run commands on this host or expose it when the container "
                f"starts: {'; '.join(refused[:5])}"
                + (f" (and {len(refused) - 5} more)" if len(refused) > 5 else "")
                + ". Remove them from the archive's config to import it")
        kind, rootfs = parse.rootfs(text)
        if name == "config" and (kind != "dir" or not rootfs.endswith("/rootfs")):
            raise ArchiveRefused(f"its config has no directory rootfs (lxc.rootfs.path = "
                                 f"{rootfs or 'none'})")

    def finish(self, seen: dict[str, bytes]) -> None:
        if "config" not in seen or "rootfs" not in seen:
            raise ArchiveRefused("it has no config and rootfs/ at its top")
        snaps = {name.split("/")[1] for name in seen if name.startswith("snaps/")}
        for snap in sorted(snaps):
            if f"snaps/{snap}/config" not in seen or f"snaps/{snap}/rootfs" not in seen:
                raise ArchiveRefused(f"its snapshot '{snap}' has no config or no rootfs/")


def _device_problem(name: str, member: tarfile.TarInfo) -> str | None:
    """Why a device node inside a root file system is refused (None: a FIFO, or a
    character device the container may use under LXC's common device cgroup)."""
    if member.isfifo():
        return None
    device = (member.devmajor, member.devminor)
    if member.ischr() and (device in _DEVICES or member.devmajor == _PTS):
        return None
    kind = "block" if member.isblk() else "character"
    return (f"'{name}' is a {kind} device node ({device[0]}:{device[1]}) that a container "
            f"may not use: only FIFOs and the character devices of LXC's common settings "
            f"(null, zero, full, random, urandom, tty, console, ptmx, ptys, fuse) are "
            f"accepted")


class UnifiedImage(Policy):
    """The :class:`~backends.archive.Policy` of an LXD-style unified image: a
    ``metadata.yaml`` (kept in memory, never written), ``templates/`` (directories and
    plain files, LXD's own, not used by LXC) and ``rootfs/``, a root file system with the
    same rules as a container's (links strictly inside, FIFOs and the character devices of
    LXC's common settings). Nothing else, and nothing outside ``rootfs/`` is a link or a
    device; ``rootfs`` itself is a directory."""

    where = "the image"

    def root_of(self, name: str) -> str | None:
        return "rootfs" if name.startswith("rootfs/") else None

    def is_root(self, name: str) -> bool:
        return name == "rootfs"

    def check(self, name: str, member: tarfile.TarInfo) -> str | None:
        top = name.split("/")[0]
        if top not in ("metadata.yaml", "templates", "rootfs"):
            return (f"'{name}' is not part of an LXD-style image (metadata.yaml, "
                    f"templates/, rootfs/)")
        if self.root_of(name):
            return _device_problem(name, member) if member.isdev() else None
        if name == "metadata.yaml" and not member.isreg():
            return "'metadata.yaml' is not a plain file"
        if member.issym() or member.islnk():
            return f"'{name}' is a link, outside the image's root file system"
        if not (member.isdir() or member.isreg()):
            return f"'{name}' is a device or special file outside the root file system"
        if name in ("rootfs", "templates") and not member.isdir():
            return f"'{name}' is a file where a directory belongs"
        return None

    def keep(self, name: str) -> bool:
        return name == "metadata.yaml"

    def finish(self, seen: dict[str, bytes]) -> None:
        if "metadata.yaml" not in seen or "rootfs" not in seen:
            raise ArchiveRefused("it has no metadata.yaml and rootfs/ at its top")


def read_container_archive(worker: Worker, path: str, into) -> dict[str, bytes]:
    """Check and unpack a container archive into the private directory ``into`` (in a
    thread: :func:`backends.work.in_thread`); returns the configs (``config``,
    ``snaps/<x>/config``) by name, never written.

    Raises:
        SettingsRefused: a config has settings outside the allow-list (in words).
        ArchiveRefused: otherwise refused (in words).
        OSError: writing failed.
    """
    worker.report("checking the archive…", force=True)
    return read_archive(worker, path, into, ContainerArchive())
