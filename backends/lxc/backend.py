"""Local LXC containers (no daemon) through the ``lxc-*`` tools, run as asyncio subprocesses.

One backend per lxcpath. State changes come from ``lxc-monitor`` (a stream of "changed state"
lines); containers created or destroyed outside corral are noticed from the lxcpath's
directory mtime, checked every few seconds (one ``stat``), which triggers one listing.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import hashlib
import json
import lzma
import os
import re
import shutil
import signal
import tarfile
import tempfile
import threading
import time
import zlib
from datetime import datetime, timezone
from pathlib import Path
from typing import AsyncIterator, Callable

from ..base import Backend
from ..errors import (
    BackendError,
    Conflict,
    InvalidInput,
    NotFound,
    NotResponding,
    OperationFailed,
    StopTimedOut,
    Unreachable,
    Unsupported,
)
from ..models import (
    BackendEvent,
    Capability,
    CreateOptions,
    CreateRequest,
    CreateSource,
    EventKind,
    Instance,
    InstanceRef,
    InstanceState,
    InstanceStatus,
    InstanceType,
    LimitField,
    Remote,
    ServerInfo,
    Snapshot,
)
from ..console import WebSocketSession, attach_local
from ..console.client import console_dir
from . import parse
from .limits import BY_KEY, LIMITS, cgroup_version, host_supports

_TOOL_PREFIX = re.compile(r"^lxc-[\w-]+: (?:[^:]+: )?[^:]*\.c: \w+: \d+ ")

# lxc-monitor states -> the lifecycle actions LXD uses, so the inventory treats both alike
_ACTIONS = {
    "RUNNING": "instance-started",
    "STOPPED": "instance-stopped",
    "FROZEN": "instance-paused",
    "THAWED": "instance-resumed",
}


def default_lxcpath() -> str:
    """The lxc tools' default: the system path for root, the user path otherwise."""
    if os.geteuid() == 0:
        return "/var/lib/lxc"
    data = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return os.path.join(data, "lxc")


def lxc_remotes(paths: list[str] | tuple[str, ...] = ()) -> list[Remote]:
    """One remote per lxcpath: ``lxc`` for the first, ``lxc-<dir name>`` for others.

    Without configured paths, the default lxcpath is used when the lxc tools are installed.
    """
    if not paths:
        if shutil.which("lxc-ls") is None:
            return []
        paths = [default_lxcpath()]
    remotes = []
    for i, path in enumerate(paths):
        path = os.path.abspath(os.path.expanduser(path))
        name = "lxc" if i == 0 else f"lxc-{Path(path).name}"
        remotes.append(Remote(name=name, kind="lxc", address=path, source="lxc tools",
                              addresses=(path,)))
    return remotes


class LXCBackend(Backend):
    """Containers of one lxcpath."""

    kind = "lxc"
    capabilities = frozenset({
        Capability.START, Capability.STOP, Capability.FORCE_STOP, Capability.RESTART,
        Capability.FREEZE, Capability.UNFREEZE, Capability.DELETE, Capability.EVENTS,
        Capability.METRICS, Capability.SNAPSHOTS, Capability.CREATE, Capability.RESOURCES,
        Capability.CONSOLE, Capability.EXEC,
    })

    def __init__(self, remote: Remote, *, timeout: float = 10.0) -> None:
        super().__init__(remote, timeout=timeout)
        self.path = remote.address
        self._previous: dict[InstanceRef, InstanceState] = {}

    # Plumbing ------------------------------------------------------------------------

    async def _run(self, *args: str, timeout: float | None = None,
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
            raise OperationFailed(self._words(stderr) or f"{args[0]} failed (exit {rc}).")
        return rc, stdout, stderr

    @staticmethod
    def _words(stderr: str) -> str:
        """The tools' messages without their source-file prefixes."""
        lines = [_TOOL_PREFIX.sub("", line).strip() for line in stderr.splitlines()]
        return "; ".join(line for line in lines if line)

    def _ref(self, name: str) -> InstanceRef:
        return InstanceRef(self.remote.name, name)

    def _dir(self, name: str) -> Path:
        return Path(self.path) / name

    def _exists(self, name: str) -> bool:
        return (self._dir(name) / "config").is_file()

    def _require(self, ref: InstanceRef) -> None:
        if not self._exists(ref.name):
            raise NotFound(f"No LXC container '{ref.name}' in {self.path}.")

    # Connection ------------------------------------------------------------------------

    async def connect(self) -> ServerInfo:
        if shutil.which("lxc-ls") is None:
            raise Unreachable("The LXC tools are not installed (no lxc-ls; package 'lxc').")
        if not os.path.isdir(self.path):
            raise Unreachable(f"The lxcpath {self.path} does not exist.")
        _, out, _ = await self._run("lxc-ls", "--version")
        return ServerInfo(server="lxc", version=out.strip(), auth="local")

    async def close(self) -> None:
        return None

    # Listing ---------------------------------------------------------------------------

    def _instance(self, name: str, status: InstanceStatus) -> Instance:
        try:
            config = (self._dir(name) / "config").read_text()
        except OSError:
            config = ""
        template = parse.template_of(config)
        memory = parse.config_value(config, "lxc.cgroup2.memory.max") or parse.config_value(
            config, "lxc.cgroup.memory.limit_in_bytes")
        cpus = parse.config_value(config, "lxc.cgroup2.cpuset.cpus") or parse.config_value(
            config, "lxc.cgroup.cpuset.cpus")
        snaps = self._dir(name) / "snaps"
        count = sum(1 for p in snaps.iterdir() if p.is_dir()) if snaps.is_dir() else 0
        created = None
        try:
            created = time.localtime((self._dir(name) / "config").stat().st_mtime)
        except OSError:
            pass
        return Instance(
            ref=self._ref(name),
            type=InstanceType.CONTAINER,
            status=status,
            image=f"{template} (template)" if template else "",
            snapshot_count=count,
            cpu_limit=cpus or "",
            memory_limit=int(memory) if memory and memory.isdigit() else None,
            created_at=datetime.fromtimestamp(time.mktime(created), timezone.utc)
            if created else None,
            description=_description_of(config),
            extra={"autostart": parse.config_value(config, "lxc.start.auto") == "1"},
        )

    async def list_instances(self) -> list[Instance]:
        if not os.path.isdir(self.path):
            return []
        _, out, err = await self._run("lxc-ls", "--fancy", "-F", "NAME,STATE", check=True)
        return [self._instance(row["NAME"], parse.status_of(row["STATE"]))
                for row in parse.fancy_table(out) if row.get("NAME")]

    async def get_instance(self, ref: InstanceRef) -> Instance:
        self._require(ref)
        rc, out, err = await self._run("lxc-info", "-n", ref.name, "-s")
        if rc != 0:
            raise NotFound(self._words(err) or f"No LXC container '{ref.name}'.")
        return self._instance(ref.name, parse.status_of(parse.info(out).get("State", "")))

    async def get_states(self, refs: list[InstanceRef]) -> dict[InstanceRef, InstanceState]:
        async def one(ref: InstanceRef) -> tuple[InstanceRef, dict[str, str] | None]:
            rc, out, _ = await self._run("lxc-info", "-n", ref.name, "-H")
            return ref, parse.info(out) if rc == 0 else None

        results = await asyncio.gather(*(one(r) for r in refs), return_exceptions=True)
        now = time.monotonic()
        states: dict[InstanceRef, InstanceState] = {}
        for item in results:
            if isinstance(item, BaseException) or item[1] is None:
                continue
            ref, data = item
            if parse.status_of(data.get("State", "")) is not InstanceStatus.RUNNING:
                self._previous.pop(ref, None)
                continue
            cpu = int(data.get("CPU use") or 0)
            prev = self._previous.get(ref)
            percent = None
            if prev is not None and now > prev.sampled_at and cpu >= prev.cpu_usage_ns:
                percent = (cpu - prev.cpu_usage_ns) / ((now - prev.sampled_at) * 1e9) * 100
            ips = parse.addresses(data.get("IP", ""))
            state = InstanceState(
                cpu_usage_ns=cpu, cpu_percent=percent,
                memory_usage=int(data.get("Memory use") or 0),
                ipv4=tuple(a for a in ips if ":" not in a),
                ipv6=tuple(a for a in ips if ":" in a),
                pid=int(data["PID"]) if data.get("PID", "").isdigit() else None,
                rx_bytes=int(data.get("RX bytes") or 0), tx_bytes=int(data.get("TX bytes") or 0),
                sampled_at=now,
            )
            self._previous[ref] = state
            states[ref] = state
        return states

    # Events ----------------------------------------------------------------------------

    async def watch(self) -> AsyncIterator[BackendEvent]:
        name = self.remote.name
        queue: asyncio.Queue[BackendEvent] = asyncio.Queue()
        watcher = asyncio.ensure_future(self._watch_dir(queue))
        try:
            while True:
                try:
                    proc = await asyncio.create_subprocess_exec(
                        "lxc-monitor", "-P", self.path, "-n", ".*",
                        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                        stderr=asyncio.subprocess.DEVNULL)
                except FileNotFoundError:
                    yield BackendEvent(EventKind.CONNECTION, name, action="disconnected",
                                       message="lxc-monitor is not installed")
                    await asyncio.sleep(10)
                    continue
                yield BackendEvent(EventKind.CONNECTION, name, action="connected")
                reader = asyncio.ensure_future(self._read_monitor(proc, queue))
                try:
                    while not reader.done() or not queue.empty():
                        getter = asyncio.ensure_future(queue.get())
                        try:
                            done, _ = await asyncio.wait({getter, reader},
                                                         return_when=asyncio.FIRST_COMPLETED)
                        finally:
                            if not getter.done():
                                getter.cancel()
                        if getter in done:
                            yield getter.result()
                finally:
                    reader.cancel()
                    if proc.returncode is None:
                        proc.kill()
                        await proc.wait()
                yield BackendEvent(EventKind.CONNECTION, name, action="disconnected",
                                   message="lxc-monitor stopped")
                await asyncio.sleep(2)
        finally:
            watcher.cancel()

    async def _read_monitor(self, proc: asyncio.subprocess.Process,
                            queue: asyncio.Queue[BackendEvent]) -> None:
        assert proc.stdout is not None
        while line := await proc.stdout.readline():
            parsed = parse.monitor_line(line.decode(errors="replace"))
            if parsed is None:
                continue
            cname, state = parsed
            queue.put_nowait(BackendEvent(
                EventKind.LIFECYCLE, self.remote.name,
                action=_ACTIONS.get(state, "instance-updated"), ref=self._ref(cname),
                message=state))

    async def _watch_dir(self, queue: asyncio.Queue[BackendEvent], every: float = 2.0) -> None:
        """Containers created/destroyed outside corral change the lxcpath's mtime."""
        last = None
        while True:
            try:
                mtime = os.stat(self.path).st_mtime_ns
            except OSError:
                mtime = None
            if last is not None and mtime != last:
                queue.put_nowait(BackendEvent(EventKind.LIFECYCLE, self.remote.name,
                                              action="remote-changed"))
            last = mtime
            await asyncio.sleep(every)

    # Lifecycle -------------------------------------------------------------------------

    async def start(self, ref: InstanceRef) -> None:
        self._require(ref)
        rc, _, err = await self._run("lxc-start", "-n", ref.name, timeout=60)
        if rc != 0:
            raise OperationFailed(f"{ref} did not start: {self._words(err) or 'lxc-start failed'}."
                                  " Its log: lxc-start -F -n " + ref.name + " shows why.")

    async def stop(self, ref: InstanceRef, *, force: bool = False, timeout: int = 30) -> None:
        self._require(ref)
        if force:
            await self._run("lxc-stop", "-n", ref.name, "-k", timeout=60, check=True)
            return
        rc, _, err = await self._run("lxc-stop", "-n", ref.name, "--nokill", "-t", str(timeout),
                                     timeout=timeout + 30)
        if rc != 0:
            current = await self.get_instance(ref)
            if current.status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN):
                raise StopTimedOut(
                    f"{ref} did not shut down within {timeout} s. It can be force-stopped.")
            if current.status is not InstanceStatus.STOPPED:
                raise OperationFailed(self._words(err) or f"lxc-stop failed for {ref}.")

    async def restart(self, ref: InstanceRef, *, force: bool = False, timeout: int = 30) -> None:
        current = await self.get_instance(ref)
        if current.status is not InstanceStatus.STOPPED:
            await self.stop(ref, force=force, timeout=timeout)
        await self.start(ref)

    async def freeze(self, ref: InstanceRef) -> None:
        self._require(ref)
        await self._run("lxc-freeze", "-n", ref.name, check=True)

    async def unfreeze(self, ref: InstanceRef) -> None:
        self._require(ref)
        await self._run("lxc-unfreeze", "-n", ref.name, check=True)

    async def delete(self, ref: InstanceRef, *, force: bool = False) -> None:
        """Destroy a container (``force``: stop it first). One with linked (overlay) clones
        is refused, naming them: LXC will not destroy it ("has clones")."""
        current = await self.get_instance(ref)
        clones = self._clones_of(ref.name)
        if clones:
            raise Conflict(f"{ref} is the base of the linked clone(s) {', '.join(clones)}: "
                           f"delete those first.")
        if current.status is not InstanceStatus.STOPPED:
            if not force:
                raise Conflict(f"{ref} is {current.status.value}. Stop it first, or delete it "
                               f"with force.")
            await self.stop(ref, force=True)
        await self._run("lxc-destroy", "-n", ref.name, "-s", timeout=120, check=True)
        self._previous.pop(ref, None)

    # Create ----------------------------------------------------------------------------

    async def create(self, name: str, *, template: str = "busybox", bridge: str | None = None,
                     template_args: list[str] | None = None) -> Instance:
        """Create a container from an offline template.

        Args:
            name: letters, digits, ``-``, ``_``, ``.``; starts with a letter or digit.
            template: ``busybox``, or ``local`` with ``template_args`` such as
                ``["-m", "meta.tar.xz", "-f", "rootfs.tar.xz"]``.
            bridge: an existing bridge for a veth NIC; ``None`` for no network.

        Raises:
            InvalidInput: bad name, name taken, unknown template or missing bridge.
            OperationFailed: the template failed (nothing is left behind).
        """
        if not parse.NAME_RE.match(name):
            raise InvalidInput(
                f"'{name}' is not a valid container name: use letters, digits, '-', '_' or "
                f"'.', starting with a letter or digit, at most 63 characters.")
        if self._dir(name).exists():
            raise InvalidInput(f"A container named '{name}' already exists in {self.path}.")
        if bridge is not None and not os.path.isdir(f"/sys/class/net/{bridge}/bridge"):
            raise InvalidInput(f"There is no bridge named '{bridge}' on this host.")
        if not os.path.exists(f"/usr/share/lxc/templates/lxc-{template}"):
            known = sorted(p.name[4:] for p in Path("/usr/share/lxc/templates").glob("lxc-*"))
            raise InvalidInput(f"No LXC template '{template}' (available: {', '.join(known)}).")
        os.makedirs(self.path, exist_ok=True)
        try:
            rc, _, err = await self._run("lxc-create", "-n", name, "-t", template,
                                         *(["--", *template_args] if template_args else []),
                                         timeout=600)
            if rc != 0:
                raise OperationFailed(f"Creating {name} failed: {self._words(err)}")
            self._set_network(name, bridge)
        except BaseException:
            if self._dir(name).exists():
                await asyncio.shield(self._run("lxc-destroy", "-n", name, timeout=120))
            if self._dir(name).exists():
                shutil.rmtree(self._dir(name), ignore_errors=True)
            raise
        return self._instance(name, InstanceStatus.STOPPED)

    async def create_from_image(self, name: str, image: str, *,
                                bridge: str | None = None) -> Instance:
        """Create a container from an LXD-style unified image tarball (``metadata.yaml`` and
        ``rootfs/``, gzip or xz), through the ``local`` template, offline.

        Raises:
            InvalidInput: the file is missing or is not such an image (nothing is created).
        """
        if not os.path.isfile(image):
            raise InvalidInput(f"The image {image} does not exist.")
        with tempfile.TemporaryDirectory(prefix="corral-lxc-") as tmp:
            try:
                meta, fstree = await asyncio.to_thread(_split_unified_image, image, Path(tmp))
            except (OSError, tarfile.TarError, ValueError) as e:
                raise InvalidInput(f"{image} is not an LXD-style image tarball: {e}") from e
            return await self.create(name, template="local", bridge=bridge,
                                     template_args=["-m", str(meta), "-f", str(fstree)])

    # The launch wizard (SupportsCreate) ----------------------------------------------

    _TEMPLATES = Path("/usr/share/lxc/templates")
    _TEMPLATE_DETAIL = {
        "busybox": "a minimal busybox system, offline",
        "download": "needs the network and template_args such as "
                    "'-d debian -r bookworm -a amd64'",
        "oci": "needs skopeo/umoci and template_args such as '--url docker://alpine'",
    }

    @staticmethod
    def _bridges() -> list[str]:
        try:
            return sorted(e.name for e in os.scandir("/sys/class/net")
                          if os.path.isdir(f"/sys/class/net/{e.name}/bridge"))
        except OSError:
            return []

    async def create_sources(self) -> list[CreateSource]:
        """Each installed template (busybox first; ``local`` is offered as ``tarball``),
        and an LXD-style image tarball."""
        try:
            names = sorted(p.name[4:] for p in self._TEMPLATES.glob("lxc-*") if p.is_file())
        except OSError:
            names = []
        names = sorted((n for n in names if n != "local"), key=lambda n: (n != "busybox", n))
        sources = [CreateSource("template", n, value=n,
                                detail=self._TEMPLATE_DETAIL.get(n, f"the lxc-{n} template"))
                   for n in names]
        if "local" in {p.name[4:] for p in self._TEMPLATES.glob("lxc-*")}:
            sources.append(CreateSource(
                "tarball", "LXD-style image tarball", needs_path=True,
                detail="metadata.yaml + rootfs/ (gzip or xz), through the local template"))
        return sources

    async def create_options(self) -> CreateOptions:
        """Networks: the host's bridges (a veth NIC on one) and ``none``; "" in a request
        means lxcbr0 when that bridge exists, else no NIC. No disk size (a directory)."""
        return CreateOptions(networks=(*self._bridges(), "none"),
                             max_cpus=os.cpu_count() or 1, user_data=False, can_cancel=False,
                             defaults={"cpus": "1", "memory": "512MiB"})

    def check_name(self, name: str) -> str | None:
        if not parse.NAME_RE.match(name):
            return (f"'{name}' is not a valid container name: use letters, digits, '-', '_' "
                    f"or '.', starting with a letter or digit, at most 63 characters.")
        if self._dir(name).exists():
            return f"A container named '{name}' already exists in {self.path}."
        return None

    def _create_limits(self, request: CreateRequest) -> dict[str, str]:
        """The wizard's CPUs and memory as limits of :mod:`.limits`, validated (raises
        InvalidInput before anything is made)."""
        version = cgroup_version()
        wanted: dict[str, str] = {}
        if request.memory is not None:
            wanted["memory"] = str(request.memory)
        if request.cpus is not None:
            ncpu = os.cpu_count() or 1
            if not 1 <= request.cpus <= ncpu:
                raise InvalidInput(f"CPUs must be from 1 to {ncpu} (this host's count).")
            if host_supports("cpu_quota", version):
                wanted["cpu_quota"] = str(request.cpus * 100)
            else:
                wanted["cpuset"] = f"0-{request.cpus - 1}" if request.cpus > 1 else "0"
        for key, value in wanted.items():
            limit = BY_KEY[key]
            if not host_supports(key, version):
                raise InvalidInput(f"{limit.label} cannot be limited on this host "
                                   f"(cgroup v{version} lacks it).")
            limit.to_v1(value) if version == 1 else limit.to_v2(value)
        return wanted

    async def create_instance(self, request: CreateRequest,
                              progress: Callable[[str], None] | None = None) -> Instance:
        """Create a container from a template (``kind="template"``, name in ``value``,
        option ``template_args``: a shell-quoted string) or an LXD-style image tarball
        (``kind="tarball"``, path in ``value``), then apply limits and start it when
        ``request.start``.

        Limits go into the container's config through :meth:`set_limits`: memory → the
        ``memory`` limit (``memory.limit_in_bytes`` / ``memory.max``); CPUs → the CPU quota
        (``cpu_quota`` = CPUs x 100 %, i.e. ``cpu.cfs_quota_us`` / ``cpu.max``: that much CPU
        time on any of the host's CPUs), or, on a host without the cpu controller, a
        cpuset of the first N CPUs.

        Everything made is destroyed when creating or limiting fails. A container that was
        made but does not start stays (so its log can be read), and
        :class:`OperationFailed` says "created, but could not start: …".

        Raises:
            InvalidInput: a value refused (nothing created).
            Conflict: the name is taken.
            OperationFailed: the template failed (nothing left), or the start failed.
        """
        import shlex

        say = progress or (lambda _text: None)
        name = request.name
        problem = self.check_name(name)
        if problem:
            raise (Conflict if self._dir(name).exists() else InvalidInput)(problem)
        source = request.source
        options = dict(request.options)
        unknown = sorted(set(options) - {"template_args"})
        if unknown:
            raise InvalidInput(f"Unknown option(s) for an LXC container: {', '.join(unknown)}.")
        if request.disk is not None:
            raise InvalidInput("LXC containers here live in a directory: there is no disk "
                               "size to set.")
        if request.profiles:
            raise InvalidInput("LXC containers have no profiles.")
        if request.storage_pool:
            raise InvalidInput("LXC containers have no storage pools here.")
        if request.user_data:
            raise InvalidInput("LXC containers here take no cloud-init user-data.")
        network = request.network
        if network == "":
            bridge = "lxcbr0" if os.path.isdir("/sys/class/net/lxcbr0/bridge") else None
        elif network == "none":
            bridge = None
        else:
            bridge = network
            if not os.path.isdir(f"/sys/class/net/{bridge}/bridge"):
                raise InvalidInput(f"There is no bridge named '{bridge}' on this host.")
        limits = self._create_limits(request)
        try:
            template_args = shlex.split(options.get("template_args", ""))
        except ValueError as e:
            raise InvalidInput(f"template_args: {e}") from e
        if source.kind == "template":
            say(f"running the {source.value} template…")
            await self.create(name, template=source.value or "busybox", bridge=bridge,
                              template_args=template_args or None)
        elif source.kind == "tarball":
            if template_args:
                raise InvalidInput("template_args go with a template source only.")
            path = os.path.expanduser(source.value.strip())
            if not path:
                raise InvalidInput("Give the path of an image tarball.")
            say("unpacking image…")
            await self.create_from_image(name, path, bridge=bridge)
        else:
            raise InvalidInput(f"An LXC container cannot be made from a '{source.kind}' "
                               f"source.")
        ref = self._ref(name)
        try:
            if limits:
                say("setting limits…")
                await self.set_limits(ref, limits)
        except BaseException:
            await self._run("lxc-destroy", "-n", name, "-s", timeout=120)
            shutil.rmtree(self._dir(name), ignore_errors=True)
            raise
        if request.start:
            say("starting…")
            try:
                await self.start(ref)
            except BackendError as e:
                raise OperationFailed(f"{ref} was created, but could not start: "
                                      f"{e.message}") from e
            return await self.get_instance(ref)
        return self._instance(name, InstanceStatus.STOPPED)

    def _set_network(self, name: str, bridge: str | None) -> None:
        """Replace the template's network with no NIC or a veth on ``bridge``."""
        path = self._dir(name) / "config"
        lines = [line for line in path.read_text().splitlines()
                 if not line.strip().startswith("lxc.net.")]
        if bridge is None:
            lines.append("lxc.net.0.type = empty")
        else:
            lines += ["lxc.net.0.type = veth", f"lxc.net.0.link = {bridge}",
                      "lxc.net.0.flags = up"]
        tmp = path.with_suffix(".corral-tmp")
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, path)

    # Consoles --------------------------------------------------------------------------

    async def _require_running(self, ref: InstanceRef) -> None:
        current = await self.get_instance(ref)
        if current.status is not InstanceStatus.RUNNING:
            raise Conflict(f"{ref} is {current.status.value}: start it to use its console.")

    def _console_dir(self, ref: InstanceRef) -> Path:
        tag = hashlib.sha256(self.path.encode()).hexdigest()[:12]
        name = ref.name
        if len(name) > 24:  # keep socket paths under AF_UNIX's 107 bytes
            name = name[:12] + "-" + hashlib.sha256(name.encode()).hexdigest()[:10]
        return console_dir("lxc", tag, name)

    async def open_console(self, ref: InstanceRef, *, width: int = 80, height: int = 24,
                           kind: str = "console") -> WebSocketSession:
        """The container's /dev/console (tty 0) through ``lxc-console`` on a pty, held by
        corral's console server so it outlives corral and keeps what was printed.

        lxc-console's escape (Ctrl+a) is doubled on input, so it reaches the container like
        any other key; corral's console detaches with its own key.
        """
        if kind != "console":
            raise Unsupported("Containers have no VGA screen; use the console.")
        await self._require_running(ref)
        return await attach_local(
            f"{ref} console", str(self._console_dir(ref) / "console.ws"),
            ["--escape", "01", "--pty", "--",
             "lxc-console", "-P", self.path, "-n", ref.name, "-t", "0"],
            width=width, height=height)

    async def open_shell(self, ref: InstanceRef, command: list[str] | None = None, *,
                         width: int = 80, height: int = 24) -> WebSocketSession:
        """A shell (or ``command``) inside the container through ``lxc-attach`` on a pty:
        bash when the container has it, else sh. The shell is held by a console server:
        detaching leaves it running, and the next attach (from this corral or a new one)
        finds it again; it ends when the shell exits."""
        await self._require_running(ref)
        argv = command or ["/bin/sh", "-c",
                           "if command -v bash >/dev/null 2>&1; then exec bash -l; "
                           "else exec sh -l; fi"]
        tag = "shell" if command is None else "shell-" + hashlib.sha256(
            "\0".join(command).encode()).hexdigest()[:10]
        return await attach_local(
            f"{ref} shell", str(self._console_dir(ref) / f"{tag}.ws"),
            ["--pty", "--", "lxc-attach", "-P", self.path, "-n", ref.name,
             "--set-var", "TERM=xterm-256color", "--", *argv],
            width=width, height=height)

    # Limits ----------------------------------------------------------------------------

    def _config_prefix(self, version: int) -> str:
        return "lxc.cgroup." if version == 1 else "lxc.cgroup2."

    async def get_limits(self, ref: InstanceRef) -> list[LimitField]:
        """Limits of a stopped container come from its config (``restart``); of a running
        one from its cgroup (``live``), with ``pending`` when the config says otherwise
        (edited meanwhile, or a cleared CPU set, which only a restart undoes)."""
        inst = await self.get_instance(ref)
        running = inst.status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN)
        version = cgroup_version()
        config = (self._dir(ref.name) / "config").read_text()
        prefix = self._config_prefix(version)
        fields = []
        for limit in LIMITS:
            keys = limit.v1 if version == 1 else (limit.v2,)
            if not host_supports(limit.key, version):
                fields.append(LimitField(limit.key, limit.label, "", "unsupported",
                                         f"this host's cgroup v{version} has no {keys[0]}"))
                continue
            saved = [parse.config_value(config, prefix + k) or "" for k in keys]
            if running:
                live = []
                for key in keys:
                    rc, out, _ = await self._run("lxc-cgroup", "-n", ref.name, key)
                    live.append(out.strip() if rc == 0 else "")
                value = self._limit_value(limit, version, live)
                pending = ""
                if saved[0]:
                    # keys the config lacks (cpu.cfs_period_us) keep their running value
                    merged = [s or v for s, v in zip(saved, live)]
                    at_start = self._limit_value(limit, version, merged)
                    if not self._same(limit.key, at_start, value):
                        pending = at_start or "unlimited"
                elif limit.key == "cpuset" and value and not self._same(
                        "cpuset", self._all_cpus(), value):
                    pending = self._all_cpus()  # cleared while running: all CPUs at start
            else:
                value = self._limit_value(limit, version, saved)
                pending = ""
            fields.append(LimitField(limit.key, limit.label, value,
                                     "live" if running else "restart", limit.hint,
                                     pending=pending))
        return fields

    @staticmethod
    def _limit_value(limit, version: int, values: list[str]) -> str:
        try:
            return limit.from_v1(tuple(values)) if version == 1 else limit.from_v2(values[0])
        except (ValueError, IndexError, ZeroDivisionError):
            return ""

    @staticmethod
    def _same(key: str, saved: str, live: str) -> bool:
        """Whether a saved value is what the kernel shows (it rounds memory to pages and
        rewrites CPU lists: ``0,1`` → ``0-1``)."""
        if saved == live:
            return True
        if key == "memory" and saved.isdigit() and live.isdigit():
            return abs(int(saved) - int(live)) < os.sysconf("SC_PAGE_SIZE")
        if key == "cpuset":
            def cpus(text: str) -> set[int]:
                out: set[int] = set()
                for part in filter(None, text.split(",")):
                    low, _, high = part.partition("-")
                    out.update(range(int(low), int(high or low) + 1))
                return out
            try:
                return cpus(saved) == cpus(live)
            except ValueError:
                return False
        return False

    @staticmethod
    def _all_cpus() -> str:
        """The CPUs a container without a CPU set gets (those corral may run on), as a
        list like ``0-3`` or ``0,2-3``."""
        try:
            cpus = sorted(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpus = list(range(os.cpu_count() or 1))
        parts: list[str] = []
        start = prev = cpus[0]
        for c in cpus[1:] + [-2]:
            if c != prev + 1:
                parts.append(str(start) if start == prev else f"{start}-{prev}")
                start = c
            prev = c
        return ",".join(parts)

    async def set_limits(self, ref: InstanceRef, changes: dict[str, str]) -> dict[str, str]:
        """Validate everything first, apply live (running containers), then persist in the
        container's config so the limits survive a restart."""
        inst = await self.get_instance(ref)
        running = inst.status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN)
        version = cgroup_version()
        planned: list[tuple[str, tuple[tuple[str, str], ...]]] = []
        for key, value in changes.items():
            limit = BY_KEY.get(key)
            if limit is None:
                raise InvalidInput(f"Unknown limit '{key}' (known: {', '.join(BY_KEY)}).")
            if not host_supports(key, version):
                raise InvalidInput(f"{limit.label} cannot be limited on this host "
                                   f"(cgroup v{version} lacks it).")
            value = value.strip()
            if version == 1:
                pairs = tuple(zip(limit.v1, limit.to_v1(value)))
            else:
                pairs = ((limit.v2, limit.to_v2(value)),)
            planned.append((key, pairs))
        if running:
            for key, pairs in planned:
                for cg_key, cg_value in pairs:
                    if cg_value == "":
                        continue  # an empty cpuset means "leave as is" live
                    rc, _, err = await self._run("lxc-cgroup", "-n", ref.name, cg_key, cg_value)
                    if rc != 0:
                        raise OperationFailed(f"Setting {cg_key} = {cg_value} on {ref} failed: "
                                              f"{self._words(err)}")
        self._persist(ref.name, version, [pair for _, pairs in planned for pair in pairs])
        # a cleared CPU set is not applied live (see above): it takes effect at next start
        return {key: "live" if running and not (key == "cpuset" and not pairs[0][1])
                else "restart" for key, pairs in planned}

    def _persist(self, name: str, version: int, pairs: list[tuple[str, str]]) -> None:
        prefix = self._config_prefix(version)
        path = self._dir(name) / "config"
        keys = {prefix + k for k, _ in pairs}
        lines = [line for line in path.read_text().splitlines()
                 if line.partition("=")[0].strip() not in keys]
        lines += [f"{prefix}{k} = {v}" for k, v in pairs if v not in ("", "-1", "max")]
        tmp = path.with_suffix(".corral-tmp")
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, path)

    # Snapshots -------------------------------------------------------------------------

    async def list_snapshots(self, ref: InstanceRef) -> list[Snapshot]:
        self._require(ref)
        _, out, _ = await self._run("lxc-snapshot", "-n", ref.name, "-L", "-C", check=True)
        return [Snapshot(ref=ref, name=n, created_at=when, comment=comment)
                for n, when, comment in parse.snapshots(out)]

    async def _require_stopped_for_snapshot(self, ref: InstanceRef, what: str) -> None:
        current = await self.get_instance(ref)
        if current.status is not InstanceStatus.STOPPED:
            raise Conflict(f"LXC can only {what} a stopped container on a 'dir' backing store; "
                           f"{ref} is {current.status.value}. Stop it first.")

    async def create_snapshot(self, ref: InstanceRef, name: str = "", *,
                              stateful: bool = False, comment: str = "") -> Snapshot:
        """LXC names snapshots itself (snap0, snap1, …): ``name`` becomes the snapshot's
        comment (unless a comment is given), so what the user typed is kept beside it."""
        comment = comment or name
        if stateful:
            raise InvalidInput("LXC snapshots cannot include the running state.")
        await self._require_stopped_for_snapshot(ref, "snapshot")
        before = {s.name for s in await self.list_snapshots(ref)}
        args = ["lxc-snapshot", "-n", ref.name]
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
            if comment:
                f.write(comment)
                f.flush()
                args += ["-c", f.name]
            await self._run(*args, timeout=600, check=True)
        after = await self.list_snapshots(ref)
        new = [s for s in after if s.name not in before]
        return new[-1] if new else after[-1]

    async def restore_snapshot(self, snapshot: Snapshot) -> None:
        await self._require_stopped_for_snapshot(snapshot.ref, "restore a snapshot of")
        await self._run("lxc-snapshot", "-n", snapshot.ref.name, "-r", snapshot.name,
                        "-N", snapshot.ref.name, timeout=600, check=True)

    async def delete_snapshot(self, snapshot: Snapshot) -> None:
        await self._run("lxc-snapshot", "-n", snapshot.ref.name, "-d", snapshot.name,
                        timeout=300, check=True)

    async def snapshot_counts(self, refs: list[InstanceRef]) -> dict[InstanceRef, int]:
        out = {}
        for ref in refs:
            snaps = self._dir(ref.name) / "snaps"
            out[ref] = sum(1 for p in snaps.iterdir() if p.is_dir()) if snaps.is_dir() else 0
        return out

    # Clone, rename, description, export, import -------------------------------------

    async def _run_long(self, *argv: str, what: str) -> None:
        """A long-running tool (lxc-copy, cp, tar) in its own process group, so that a
        cancellation kills its children too (lxc-copy runs rsync) before cleanup starts.

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
                                  f"{self._words(err.decode(errors='replace')) or 'exit ' + str(proc.returncode)}")

    async def _require_stopped(self, ref: InstanceRef, what: str) -> str:
        """The config text of a stopped container (else Conflict)."""
        current = await self.get_instance(ref)
        if current.status is not InstanceStatus.STOPPED:
            raise Conflict(f"{ref} is {current.status.value}: stop it first to {what} it.")
        return (self._dir(ref.name) / "config").read_text()

    def _check_new_name(self, name: str) -> None:
        problem = self.check_name(name)
        if problem:
            raise (Conflict if self._dir(name).exists() else InvalidInput)(problem)

    def _clones_of(self, name: str) -> list[str]:
        """Containers LXC recorded as snapshot (overlay) clones of ``name``
        (``lxc_snapshots``: lxcpath and name, one per line, in pairs)."""
        try:
            lines = (self._dir(name) / "lxc_snapshots").read_text().split("\n")
        except OSError:
            return []
        lines = [line for line in lines if line]
        return [lines[i + 1] for i in range(0, len(lines) - 1, 2)]

    def _snapshot_dirs(self, name: str) -> list[Path]:
        snaps = self._dir(name) / "snaps"
        return sorted(p for p in snaps.iterdir() if (p / "config").is_file()) \
            if snaps.is_dir() else []

    def _move_snapshot_configs(self, name: str, old_dir: str) -> None:
        """After a container's snapshots were copied or moved to ``name``'s directory: point
        their configs at their new rootfs and name."""
        new_dir = str(self._dir(name))
        for snap in self._snapshot_dirs(name):
            cfg = snap / "config"
            cfg.write_text(_rewrite_config(cfg.read_text(), old_dir, new_dir, name,
                                           str(snap / "rootfs")))

    async def _destroy_partial(self, name: str) -> None:
        """Remove a half-made container (lxc-destroy first: it also drops the name from a
        source's list of clones), shielded from cancellation."""
        async def destroy() -> None:
            if (self._dir(name) / "config").is_file():
                with contextlib.suppress(BackendError):
                    await self._run("lxc-destroy", "-n", name, "-s", timeout=300)
            if self._dir(name).exists():
                await asyncio.to_thread(shutil.rmtree, self._dir(name), True)
        await asyncio.shield(destroy())

    async def clone_instance(self, ref: InstanceRef, new_name: str, *, linked: bool = False,
                             with_snapshots: bool = True,
                             progress: Callable[[str], None] | None = None) -> Instance:
        """Copy a stopped container with ``lxc-copy`` (a new MAC for each NIC with a fixed
        one, the new name as host name; the description comment goes along).

        ``linked=True``: ``lxc-copy -s``, a snapshot clone. On a ``dir`` backing store LXC
        makes it an ``overlay`` clone (the source's rootfs as lower layer, the clone's own
        delta above); the host kernel must offer overlayfs. LXC then refuses to destroy or
        rename the source while the clone exists ("has clones"); :meth:`delete` and
        :meth:`rename_instance` say so, naming the clones. ``with_snapshots`` does not apply
        (the snapshots stay with the source).

        Full clone: ``lxc-copy`` (rsync; ``-B dir`` flattens an overlay clone into a plain
        directory). lxc-copy does not copy snapshots: with ``with_snapshots``, corral copies
        ``snaps/`` itself (``cp -a``) and points their configs at the clone.

        No percentage is available from lxc-copy: progress says what is being done. On
        failure or cancellation the clone is destroyed.

        Raises:
            Conflict: the container is not stopped, or ``new_name`` is taken.
            InvalidInput: bad name.
            OperationFailed: lxc-copy failed (its message).
        """
        say = progress or (lambda _text: None)
        config = await self._require_stopped(ref, "clone")
        self._check_new_name(new_name)
        kind, _ = _rootfs(config)
        argv = ["lxc-copy", "-P", self.path, "-n", ref.name, "-N", new_name]
        if linked:
            argv.append("-s")
        elif kind == "overlay":
            argv += ["-B", "dir"]
        snapshots = self._snapshot_dirs(ref.name) if with_snapshots and not linked else []
        try:
            say("creating an overlay clone…" if linked else "copying the root file system…")
            await self._run_long(*argv, what=f"lxc-copy of {ref} to {new_name}")
            if snapshots:
                say(f"copying {len(snapshots)} snapshot(s)…")
                await self._run_long("cp", "-a", "--reflink=auto", "--",
                                     str(self._dir(ref.name) / "snaps"),
                                     str(self._dir(new_name) / "snaps"),
                                     what=f"copying the snapshots of {ref}")
                self._move_snapshot_configs(new_name, str(self._dir(ref.name)))
        except BaseException:
            await self._destroy_partial(new_name)
            raise
        say("cloned")
        return self._instance(new_name, InstanceStatus.STOPPED)

    async def rename_instance(self, ref: InstanceRef, new_name: str) -> Instance:
        """Rename a stopped container with ``lxc-copy -R`` (directory, rootfs path and host
        name follow). lxc-copy refuses containers with snapshots; corral moves ``snaps/``
        aside for the rename and back after it, pointing their configs at the new name.

        Not possible, said in words: a container that has linked (overlay) clones (LXC
        tracks them by name: :class:`Conflict` naming them), and an overlay clone itself
        (:class:`Unsupported`: LXC's overlay driver only makes snapshots).

        Raises:
            Conflict: not stopped, name taken, or it has linked clones.
            InvalidInput: bad name.
            Unsupported: an overlay clone.
            OperationFailed: lxc-copy failed (everything is put back).
        """
        config = await self._require_stopped(ref, "rename")
        self._check_new_name(new_name)
        clones = self._clones_of(ref.name)
        if clones:
            raise Conflict(f"{ref} has linked clone(s) ({', '.join(clones)}) that LXC tracks "
                           f"by its name: it cannot be renamed while they exist.")
        if _rootfs(config)[0] == "overlay":
            raise Unsupported(f"{ref} is a linked (overlay) clone: lxc-copy cannot rename "
                              f"one (its overlay driver only makes snapshots). A full clone "
                              f"under the new name, then deleting this one, does it.")
        old_dir, new_dir = self._dir(ref.name), self._dir(new_name)
        snaps, aside = old_dir / "snaps", Path(self.path) / f".corral-snaps-{ref.name}"
        moved = False
        if snaps.is_dir() and any(snaps.iterdir()):
            if aside.exists():
                raise Conflict(f"{aside} exists: an earlier rename of {ref} was interrupted. "
                               f"Move it back to {snaps} first.")
            os.rename(snaps, aside)
            moved = True
        try:
            # lxc-copy -R copies, then destroys the original
            await self._run_long("lxc-copy", "-P", self.path, "-n", ref.name, "-R",
                                 "-N", new_name, what=f"lxc-copy renaming {ref}")
        except BaseException:
            if (old_dir / "config").is_file():  # the original is intact: drop a half copy
                if new_dir.exists():
                    await self._destroy_partial(new_name)
                if moved and not snaps.exists():
                    os.rename(aside, snaps)
            raise
        if moved:
            os.rename(aside, new_dir / "snaps")
            self._move_snapshot_configs(new_name, str(old_dir))
        self._previous.pop(ref, None)
        return await self.get_instance(self._ref(new_name))

    async def set_description(self, ref: InstanceRef, text: str) -> None:
        """Keep ``text`` as a ``# corral.description: "<json>"`` comment line in the
        container's config: LXC has no description, ignores comments, and lxc-copy (clone,
        rename) and lxc-snapshot copy the config text with them. Restoring a snapshot brings
        back the description the snapshot had."""
        self._require(ref)
        path = self._dir(ref.name) / "config"
        lines = [line for line in path.read_text().splitlines()
                 if not line.startswith(_DESCRIPTION)]
        if text:
            lines.append(f"{_DESCRIPTION} {json.dumps(text)}")
        tmp = path.with_suffix(".corral-tmp")
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, path)

    async def export_instance(self, ref: InstanceRef, path: str, *, with_snapshots: bool = True,
                              progress: Callable[[str], None] | None = None) -> int:
        """Write a stopped, ``dir``-backed container to a new tar archive at ``path``
        (gzip when it ends with ``.gz``/``.tgz``): ``config``, ``rootfs/`` and, with
        ``with_snapshots``, ``snaps/``; ``tar --numeric-owner --xattrs`` keeps owners
        (also shifted ones of unprivileged containers), modes, devices and file
        capabilities. Written to ``path + ".part"``, renamed when complete; nothing is
        left on failure or cancellation. Returns the archive's size in bytes.

        Raises:
            Conflict: not stopped.
            Unsupported: not on a ``dir`` backing store (an overlay clone shares its
                source's files: make a full clone first).
            InvalidInput: ``path`` exists, or its directory does not.
            OperationFailed: tar failed.
        """
        say = progress or (lambda _text: None)
        config = await self._require_stopped(ref, "export")
        kind, _ = _rootfs(config)
        if kind != "dir":
            raise Unsupported(
                f"{ref} is on a '{kind or 'unknown'}' backing store; only directory-backed "
                f"containers are exported" + (" (a linked clone shares its source's files: "
                                              "make a full clone and export that)"
                                              if kind == "overlay" else "") + ".")
        path = os.path.abspath(os.path.expanduser(path))
        if os.path.lexists(path):
            raise InvalidInput(f"{path} exists already: choose a new file name.")
        if not os.path.isdir(os.path.dirname(path)):
            raise InvalidInput(f"The directory {os.path.dirname(path)} does not exist.")
        part = path + ".part"
        if os.path.lexists(part):
            raise InvalidInput(f"{part} exists: an earlier export was interrupted, or one is "
                               f"running. Remove it first.")
        members = ["./config", "./rootfs"]
        if with_snapshots and self._snapshot_dirs(ref.name):
            members.append("./snaps")
        argv = ["tar", "--numeric-owner", "--xattrs", "--xattrs-include=*", "-C",
                str(self._dir(ref.name)), "-cpf", part]
        if path.endswith((".gz", ".tgz")):
            argv.append("-z")

        async def report() -> None:
            while True:
                await asyncio.sleep(0.5)
                with contextlib.suppress(OSError):
                    say(f"writing {os.path.basename(path)}: "
                        f"{os.path.getsize(part) >> 20} MiB")

        reporter = asyncio.ensure_future(report())
        try:
            say("writing…")
            await self._run_long(*argv, "--", *members, what=f"tar of {ref}")
            try:
                os.link(part, path)
            except FileExistsError:
                raise InvalidInput(f"{path} appeared during the export; the export was "
                                   f"not kept.") from None
            except OSError:
                os.rename(part, path)
            else:
                os.unlink(part)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(part)
            raise
        finally:
            reporter.cancel()
        say("exported")
        return os.path.getsize(path)

    async def import_instance(self, path: str, name: str, *, storage_pool: str = "",
                              progress: Callable[[str], None] | None = None) -> Instance:
        """Create the container ``name`` from an archive written by :meth:`export_instance`.

        The archive is read once to check it (only ``config``, ``rootfs/``, ``snaps/``; no
        absolute paths, ``..``, or members beyond a symbolic link), then unpacked with
        ``tar --numeric-owner --xattrs`` into the lxcpath; the config is written last with
        its paths rewritten (``lxc.rootfs.path``, ``lxc.uts.name``, other values naming the
        old directory), as are the snapshots' configs. NIC MAC addresses are kept. Nothing
        is left on failure or cancellation.

        Raises:
            InvalidInput: bad name, ``storage_pool`` given, missing file, damaged or foreign
                archive.
            Conflict: the name is taken.
            OperationFailed: tar failed.
        """
        say = progress or (lambda _text: None)
        if storage_pool:
            raise InvalidInput("LXC containers have no storage pools here.")
        self._check_new_name(name)
        path = os.path.abspath(os.path.expanduser(path))
        if not os.path.isfile(path):
            raise InvalidInput(f"{path} does not exist or is not a file.")
        try:
            configs = await _in_thread(_check_container_archive, path, progress=say)
        except ValueError as e:
            raise InvalidInput(f"{path} is not an exported LXC container: {e}.") from None
        config = configs["config"].decode(errors="replace")
        kind, old_rootfs = _rootfs(config)
        if kind != "dir" or not old_rootfs.endswith("/rootfs"):
            raise InvalidInput(f"{path} is not an exported LXC container: its config has no "
                               f"directory rootfs (lxc.rootfs.path = {old_rootfs or 'none'}).")
        old_dir = old_rootfs[: -len("/rootfs")]
        directory = self._dir(name)
        os.makedirs(self.path, exist_ok=True)
        try:
            directory.mkdir(mode=0o770)  # claims the name; listed once config is written
        except FileExistsError:
            raise Conflict(f"A container named '{name}' already exists in "
                           f"{self.path}.") from None
        try:
            say("unpacking…")
            await self._run_long(
                "tar", "--numeric-owner", "--xattrs", "--xattrs-include=*", "--anchored",
                "--exclude=./config", "--exclude=config", "-C", str(directory), "-xpf", path,
                what=f"unpacking {path}")
            if not (directory / "rootfs").is_dir():
                raise InvalidInput(f"{path} is not an exported LXC container: no rootfs/.")
            self._move_snapshot_configs(name, old_dir)
            tmp = directory / ".config.corral-tmp"
            tmp.write_text(_rewrite_config(config, old_dir, str(directory), name,
                                           str(directory / "rootfs")))
            os.replace(tmp, directory / "config")
        except BaseException:
            await asyncio.shield(asyncio.to_thread(shutil.rmtree, directory, True))
            raise
        say("imported")
        return self._instance(name, InstanceStatus.STOPPED)


def _split_unified_image(image: str, workdir: Path) -> tuple[Path, Path]:
    """LXD unified tarball -> the ``local`` template's metadata and rootfs tarballs."""
    meta = workdir / "meta.tar.xz"
    fstree = workdir / "rootfs.tar.xz"
    found = False
    with tarfile.open(image) as src, tarfile.open(fstree, "w:xz") as dst:
        for member in src:
            path = member.name.lstrip("./")
            if path == "rootfs" or not path.startswith("rootfs/"):
                continue
            found = True
            member.name = "./" + path[len("rootfs/"):]
            if member.islnk() and member.linkname.lstrip("./").startswith("rootfs/"):
                member.linkname = "./" + member.linkname.lstrip("./")[len("rootfs/"):]
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
    if not found:
        raise ValueError("it has no rootfs/ directory")
    config = workdir / "config"
    config.write_text("lxc.include = /usr/share/lxc/config/common.conf\n"
                      f"lxc.arch = {os.uname().machine}\n")
    with tarfile.open(meta, "w:xz") as dst:
        dst.add(config, arcname="config")
    return meta, fstree


_DESCRIPTION = "# corral.description:"


def _description_of(config: str) -> str:
    """The description corral keeps as a comment line in the config (LXC has no field for
    one; lxc-copy, renames and snapshots copy the config text, comments included)."""
    for line in reversed(config.splitlines()):
        if line.startswith(_DESCRIPTION):
            try:
                value = json.loads(line[len(_DESCRIPTION):].strip())
            except ValueError:
                return ""
            return value if isinstance(value, str) else ""
    return ""


def _rootfs(config: str) -> tuple[str, str]:
    """(backing store, path) of ``lxc.rootfs.path``: ``dir`` for ``dir:/x`` and ``/x``;
    ``overlay`` (path: ``lower:upper``), ``btrfs``, ``lvm``, ... otherwise."""
    value = (parse.config_value(config, "lxc.rootfs.path") or "").strip()
    if value.startswith("/"):
        return "dir", value
    kind, _, path = value.partition(":")
    return (kind, path) if path else ("", value)


def _rewrite_config(text: str, old_dir: str, new_dir: str, new_name: str,
                    rootfs: str) -> str:
    """A container's (or one of its snapshots') config moved from ``old_dir`` to
    ``new_dir``: ``lxc.rootfs.path`` becomes ``dir:<rootfs>``, ``lxc.uts.name`` the new
    name, and other values naming the old directory (fstab, log file) name the new one."""
    old = re.compile(re.escape(old_dir.rstrip("/")) + r"(?=/|\s|$)")
    out = []
    seen_uts = False
    for line in text.splitlines():
        key, eq, value = line.partition("=")
        key = key.strip()
        if eq and not key.startswith("#"):
            if key == "lxc.rootfs.path":
                line = f"lxc.rootfs.path = dir:{rootfs}"
            elif key == "lxc.uts.name":
                line, seen_uts = f"lxc.uts.name = {new_name}", True
            elif old_dir and old.search(value):
                line = f"{key} = {old.sub(new_dir, value.strip())}"
        out.append(line)
    if not seen_uts:
        out.append(f"lxc.uts.name = {new_name}")
    return "\n".join(out) + "\n"


class _Worker:
    """What the archive check gets in its thread: a cancel flag and a thread-safe
    ``report`` (a small twin of ``backends.qemu.transfer.Worker``, kept here so LXC does
    not import the QEMU package and its QMP library)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, say: Callable[[str], None]) -> None:
        self.cancel = threading.Event()
        self._loop, self._say, self._last = loop, say, ""

    def check(self) -> None:
        if self.cancel.is_set():
            raise InterruptedError("cancelled")

    def report(self, text: str) -> None:
        if text != self._last:
            self._last = text
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._say, text)


async def _in_thread(fn: Callable[..., dict[str, bytes]], *args: object,
                     progress: Callable[[str], None]) -> dict[str, bytes]:
    """``fn(worker, *args)`` in a thread; on cancellation the thread is told to stop and
    waited for before the cancellation goes on."""
    worker = _Worker(asyncio.get_running_loop(), progress)
    future = asyncio.ensure_future(asyncio.to_thread(fn, worker, *args))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        worker.cancel.set()
        while not future.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({future})
        if not future.cancelled():
            future.exception()
        raise


def _archive_problem(name: str, linkname: str | None, links: set[str]) -> str | None:
    """Why a member of a container archive is refused (None: acceptable)."""
    for path in (name,) + ((linkname,) if linkname is not None else ()):
        parts = path.split("/")
        if path.startswith("/") or ".." in parts:
            return f"'{path}' leaves the container's directory"
        if parts[0] not in ("config", "rootfs", "snaps"):
            return f"'{path}' is not part of a container (config, rootfs/, snaps/)"
    parts = name.split("/")
    for i in range(1, len(parts)):
        if "/".join(parts[:i]) in links:
            return f"'{name}' lies beyond a symbolic link of the archive"
    return None


def _check_container_archive(worker: _Worker, path: str) -> dict[str, bytes]:
    """Read a container archive once (in a thread), checking every member; returns the
    top-level ``config`` and the snapshots' configs (``snaps/<x>/config``) by name.

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
                problem = _archive_problem(name, linkname, links)
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
