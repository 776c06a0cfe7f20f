"""The plumbing every concern of the LXC backend shares: the lxcpath and its containers'
directories, the ``lxc-*`` tools run as asyncio subprocesses (``-P lxcpath``), container
configs read and rewritten, and the state the concerns keep between calls.

How the tools behave (what their output and exit codes mean) is in ``docs/protocols.md``,
section "LXC tools".
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import stat
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from ..errors import Conflict, InvalidInput, NotFound, NotResponding, OperationFailed, Unreachable
from ..models import Instance, InstanceRef, InstanceState, InstanceStatus, InstanceType, Remote
from . import parse

_TOOL_PREFIX = re.compile(r"^lxc-[\w-]+: (?:[^:]+: )?[^:]*\.c: \w+: \d+ ")


def words(stderr: str) -> str:
    """The tools' messages without their source-file prefixes."""
    lines = [_TOOL_PREFIX.sub("", line).strip() for line in stderr.splitlines()]
    return "; ".join(line for line in lines if line)


class LXCTools:
    """One lxcpath: its tools, its containers' directories and configs."""

    def __init__(self, remote: Remote, timeout: float) -> None:
        self.remote = remote
        self.path = remote.address
        self.timeout = timeout
        self.previous: dict[InstanceRef, InstanceState] = {}
        """The last usage sample of each running container (for CPU percentages)."""

    # Running the tools -------------------------------------------------------------

    async def run(self, *args: str, timeout: float | None = None,
                  check: bool = False) -> tuple[int, str, str]:
        """Run an lxc tool with ``-P lxcpath``; return (rc, stdout, stderr)."""
        cmd = [args[0], "-P", self.path, *args[1:]]
        try:
            proc = await asyncio.create_subprocess_exec(
                *cmd, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE)
        except FileNotFoundError:
            raise Unreachable(f"{args[0]} is not installed (package 'lxc').") from None
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout or self.timeout * 3)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            raise NotResponding(f"{args[0]} did not finish in time.") from None
        except asyncio.CancelledError:
            if proc.returncode is None:
                proc.kill()
            raise
        rc = proc.returncode or 0
        stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
        if check and rc != 0:
            raise OperationFailed(words(stderr) or f"{args[0]} failed (exit {rc}).")
        return rc, stdout, stderr

    async def run_long(self, *argv: str, what: str) -> None:
        """A long-running tool (lxc-copy, cp, tar) in its own process group, so that a
        cancellation kills its children too (lxc-copy runs rsync) before cleanup starts.
        ``argv`` is the whole command line (no ``-P`` is added).

        Raises:
            OperationFailed: it failed (``what`` failed: its message).
        """
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE, start_new_session=True)
        except FileNotFoundError:
            raise Unreachable(f"{argv[0]} is not installed.") from None
        try:
            assert proc.stderr is not None
            err = await proc.stderr.read()
            await proc.wait()
        except asyncio.CancelledError:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await asyncio.shield(proc.wait())
            raise
        if proc.returncode != 0:
            raise OperationFailed(f"{what} failed: "
                                  f"{words(err.decode(errors='replace')) or 'exit ' + str(proc.returncode)}")

    # Containers and their directories --------------------------------------------

    def ref(self, name: str) -> InstanceRef:
        return InstanceRef(self.remote.name, name)

    def dir(self, name: str) -> Path:
        return Path(self.path) / name

    def exists(self, name: str) -> bool:
        return (self.dir(name) / "config").is_file()

    def require(self, ref: InstanceRef) -> None:
        if not self.exists(ref.name):
            raise NotFound(f"No LXC container '{ref.name}' in {self.path}.")

    def name_problem(self, name: str) -> str | None:
        """Why ``name`` cannot be a new container here (bad characters or length, taken)."""
        if not parse.NAME_RE.match(name):
            return (f"'{name}' is not a valid container name: use letters, digits, '-', '_' "
                    f"or '.', starting with a letter or digit, at most 63 characters.")
        if self.dir(name).exists():
            return f"A container named '{name}' already exists in {self.path}."
        return None

    def check_new_name(self, name: str) -> None:
        """Raises Conflict (taken) or InvalidInput (malformed) for a name that cannot be used."""
        problem = self.name_problem(name)
        if problem:
            raise (Conflict if self.dir(name).exists() else InvalidInput)(problem)

    def snapshot_count(self, name: str) -> int:
        snaps = self.dir(name) / "snaps"
        return sum(1 for p in snaps.iterdir() if p.is_dir()) if snaps.is_dir() else 0

    def snapshot_dirs(self, name: str) -> list[Path]:
        """The snapshot directories of ``name`` holding a config (never through a link)."""
        snaps = self.dir(name) / "snaps"
        if not is_real(snaps, stat.S_ISDIR):
            return []
        return sorted(p for p in snaps.iterdir()
                      if is_real(p, stat.S_ISDIR) and is_real(p / "config", stat.S_ISREG))

    def clones_of(self, name: str) -> list[str]:
        """Containers LXC recorded as snapshot (overlay) clones of ``name``
        (``lxc_snapshots``: lxcpath and name, one per line, in pairs)."""
        try:
            lines = (self.dir(name) / "lxc_snapshots").read_text().split("\n")
        except OSError:
            return []
        lines = [line for line in lines if line]
        return [lines[i + 1] for i in range(0, len(lines) - 1, 2)]

    # Configs -----------------------------------------------------------------------

    def config(self, name: str) -> str:
        """The text of the container's config (raises OSError)."""
        return (self.dir(name) / "config").read_text()

    def write_config(self, name: str, lines: list[str]) -> None:
        """Replace the container's config with ``lines`` (written beside it, renamed)."""
        replace_file(self.dir(name) / "config", "\n".join(lines) + "\n")

    async def read_instance(self, name: str, status: InstanceStatus) -> Instance:
        """:meth:`instance` in a thread: it reads the container's files, which the event
        loop does not wait for."""
        return await asyncio.to_thread(self.instance, name, status)

    def instance(self, name: str, status: InstanceStatus) -> Instance:
        """The container ``name`` as its directory and config describe it (blocking)."""
        try:
            config = self.config(name)
        except OSError:
            config = ""
        template = parse.template_of(config)
        memory = parse.config_value(config, "lxc.cgroup2.memory.max") or parse.config_value(
            config, "lxc.cgroup.memory.limit_in_bytes")
        cpus = parse.config_value(config, "lxc.cgroup2.cpuset.cpus") or parse.config_value(
            config, "lxc.cgroup.cpuset.cpus")
        created = None
        try:
            created = time.localtime((self.dir(name) / "config").stat().st_mtime)
        except OSError:
            pass
        return Instance(
            ref=self.ref(name),
            type=InstanceType.CONTAINER,
            status=status,
            image=f"{template} (template)" if template else "",
            snapshot_count=self.snapshot_count(name),
            cpu_limit=cpus or "",
            memory_limit=int(memory) if memory and memory.isdigit() else None,
            created_at=datetime.fromtimestamp(time.mktime(created), timezone.utc)
            if created else None,
            description=parse.description_of(config),
            extra={"autostart": parse.config_value(config, "lxc.start.auto") == "1"},
        )


def is_real(path: Path, kind: Callable[[int], bool]) -> bool:
    """``path`` exists as that kind of file itself (not through a symbolic link)."""
    try:
        return kind(os.lstat(path).st_mode)
    except OSError:
        return False


def read_file(path: Path) -> str:
    """A config's text, never read through a symbolic link (OSError)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, encoding="utf-8", errors="replace") as f:
        return f.read()


def replace_file(path: Path, text: str) -> None:
    """Replace ``path`` (a config) with ``text``: written to a new file beside it, never
    through a symbolic link, then renamed over it (the rename replaces a link, it does not
    follow it)."""
    tmp = path.with_name(path.name + ".corral-tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
