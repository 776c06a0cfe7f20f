"""What a container archive (written by ``export_instance``) may hold, checked before
anything is unpacked: only ``config``, ``rootfs/`` and ``snaps/``; no absolute paths, no
``..``, no members (or hard link targets) beyond a symbolic link of the archive, and
symbolic links and device files only inside a root file system (``rootfs/``,
``snaps/<x>/rootfs/``), never as one of the container's own files or directories.

Its configs may carry only the settings of :func:`config_problems`' allow-list: an
archive is someone else's container, and settings such as hooks, includes, host mounts,
capabilities, AppArmor/seccomp overrides, devices or autostart would run code on this host
or expose it when the container starts."""

from __future__ import annotations

import gzip
import lzma
import re
import tarfile
import zlib

from ..work import Worker
from .limits import LIMITS


def archive_problem(name: str, linkname: str | None, links: set[str]) -> str | None:
    """Why a member of a container archive is refused (None: acceptable)."""
    for path in (name,) + ((linkname,) if linkname is not None else ()):
        parts = path.split("/")
        if path.startswith("/") or ".." in parts:
            return f"'{path}' leaves the container's directory"
        if parts[0] not in ("config", "rootfs", "snaps"):
            return f"'{path}' is not part of a container (config, rootfs/, snaps/)"
    for path in (name,) + ((linkname,) if linkname is not None else ()):
        parts = path.split("/")
        for i in range(1, len(parts) + (path != name)):
            if "/".join(parts[:i]) in links:
                return f"'{path}' lies beyond a symbolic link of the archive"
    return None


def in_rootfs(name: str) -> bool:
    """Whether ``name`` lies inside a root file system of the archive (``rootfs/…`` or
    ``snaps/<x>/rootfs/…``), where links and devices are the container's own business."""
    parts = name.split("/")
    return (len(parts) > 1 and parts[0] == "rootfs") or \
        (len(parts) > 3 and parts[0] == "snaps" and parts[2] == "rootfs")


def member_problem(member: tarfile.TarInfo, name: str) -> str | None:
    """Why a member's kind is refused where it lies (None: acceptable)."""
    if in_rootfs(name):
        return None
    if member.issym() or member.islnk():
        return f"'{name}' is a link, where the container's own files and directories lie"
    if not (member.isdir() or member.isreg()):
        return f"'{name}' is a device or special file outside a root file system"
    parts = name.split("/")
    if member.isreg() and (name in ("rootfs", "snaps") or len(parts) == 2
                           or (len(parts) == 3 and parts[2] == "rootfs")):
        return f"'{name}' is a file where a directory belongs"
    return None


# The allow-list of an imported container's config (see config_problems). The values of
# corral's own containers (the busybox and local templates, corral's limits) all pass.
_FREE = re.compile(
    r"lxc\.(arch|uts\.name|rootfs\.path|signal\.(halt|reboot|stop)|autodev|"
    r"autodev\.tmpfs\.size|tty\.max|tty\.dir|pty\.max|console\.size|console\.rotate|"
    r"cap\.drop|no_new_privs|idmap|init\.(cmd|uid|gid|cwd)|execute\.cmd|ephemeral|"
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
_MOUNT_AUTO = {"proc", "proc:mixed", "sys", "sys:ro", "sys:mixed", "cgroup", "cgroup:mixed",
               "cgroup:ro"}
_FS_MOUNTS = {"tmpfs", "mqueue", "devpts"}  # kernel file systems, no host data
_RO_BINDS = {"/lib", "/usr/lib", "/lib64", "/usr/lib64", "/sys/kernel/security"}
_INCLUDE = re.compile(r"/usr/share/lxc/config/(\w+\.)?(common|userns)\.conf")


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


def config_problems(text: str) -> list[str]:
    """The settings of an imported container's config that are not allowed, each as
    ``key = value`` (empty: acceptable). Allowed: what a container needs to run and what
    corral itself writes (architecture, name, rootfs, signals, ttys, NICs of type empty or
    veth, corral's cgroup limits, dropped capabilities, the generated AppArmor profile, the
    distribution's common/userns includes, mounts of tmpfs/mqueue/devpts and the busybox
    template's read-only binds of system libraries). Everything else is refused: hooks and
    net scripts, other includes, host mounts and fstabs, kept capabilities, AppArmor,
    SELinux and seccomp overrides, devices, namespaces shared with the host, sysctls,
    host log/console files and autostart."""
    problems = []
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
            ok = value in allowed
        elif key == "lxc.mount.auto":
            ok = all(token in _MOUNT_AUTO for token in value.split())
        elif key == "lxc.mount.entry":
            ok = _mount_entry_ok(value)
        elif key == "lxc.include":
            ok = bool(_INCLUDE.fullmatch(value))
        elif key == "lxc.cap.drop":  # empty would clear the drops of the includes
            ok = bool(value)
        else:
            ok = key in _CGROUP or bool(_FREE.fullmatch(key))
        if not ok:
            problems.append(f"{key} = {value}")
    return problems


def check_container_archive(worker: Worker, path: str) -> dict[str, bytes]:
    """Read a container archive once (in a thread: :func:`backends.work.in_thread`),
    checking every member; returns the top-level ``config`` and the snapshots' configs
    (``snaps/<x>/config``) by name.

    Raises:
        ValueError: in words, why the archive is refused.
    """
    configs: dict[str, bytes] = {}
    links: set[str] = set()
    has_rootfs = False
    seen = 0
    try:
        with tarfile.open(path, "r|*") as tar:
            for member in tar:
                worker.check()
                seen += member.size
                worker.report(f"checking the archive… {seen >> 20} MiB")
                name = member.name
                while name.startswith("./"):
                    name = name[2:]
                name = name.rstrip("/")
                if name in ("", "."):
                    continue
                linkname = member.linkname if member.islnk() else None
                if linkname is not None:
                    while linkname.startswith("./"):
                        linkname = linkname[2:]
                problem = archive_problem(name, linkname, links) or \
                    member_problem(member, name)
                if problem:
                    raise ValueError(problem)
                if member.issym():
                    links.add(name)
                if name == "rootfs" and member.isdir():
                    has_rootfs = True
                parts = name.split("/")
                if name == "config" or (len(parts) == 3 and parts[0] == "snaps"
                                        and parts[2] == "config"):
                    if not member.isreg() or member.size > 1 << 20:
                        raise ValueError(f"its {name} is not a plain config file")
                    f = tar.extractfile(member)
                    assert f is not None
                    configs[name] = f.read()
    except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, gzip.BadGzipFile) as e:
        raise ValueError(f"it is damaged or not a tar archive ({e or type(e).__name__})") \
            from e
    if "config" not in configs or not has_rootfs:
        raise ValueError("it has no config and rootfs/ at its top")
    return configs
