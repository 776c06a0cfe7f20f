"""The live subjects of the contract tests (tests/backends/test_contract.py): one connected
backend per kind, how to make its instances, and how to see what it did without it (the
real CLIs, the host's view of an LXC rootfs, ``qemu-io`` on a QEMU disk)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

import qemu_guest  # tests/ is on sys.path (tests/conftest.py)
from backends import get_backend
from backends.base import Backend
from backends.errors import NotFound
from backends.fake import FakeBackend
from backends.models import (
    BackendEvent,
    EventKind,
    FileEntry,
    Instance,
    InstanceRef,
    InstanceStatus,
    Remote,
    ServerInfo,
)
from backends.create_models import CreateRequest, CreateSource

MiB = 1024**2


class EventLog:
    """Everything ``watch()`` yields, collected by a task; tests wait for what they expect."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.events: list[BackendEvent] = []
        self._new = asyncio.Event()
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._pump())
        await self.wait_for(lambda e: e.kind is EventKind.CONNECTION
                            and e.action == "connected", since=0, timeout=20)

    async def _pump(self) -> None:
        async for event in self.backend.watch():
            self.events.append(event)
            self._new.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    def mark(self) -> int:
        return len(self.events)

    async def wait_for(self, wanted: Callable[[BackendEvent], bool], *, since: int,
                       timeout: float = 30) -> BackendEvent:
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events[since:]:
                if wanted(event):
                    return event
            if self._task is not None and self._task.done():
                raise AssertionError(f"watch() ended: {self._task}")
            left = deadline - time.monotonic()
            if left <= 0:
                seen = [(e.kind.value, e.action, str(e.ref)) for e in self.events[since:]]
                raise AssertionError(f"no such event within {timeout} s; seen: {seen}")
            self._new.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._new.wait(), left)

    async def lifecycle(self, ref: InstanceRef, actions: set[str], *, since: int) -> BackendEvent:
        return await self.wait_for(lambda e: e.kind is EventKind.LIFECYCLE and e.ref == ref
                                   and e.action in actions, since=since)


async def _no_op(_thing: Any) -> None:
    return None


@dataclass
class Subject:
    """One connected backend and how to drive it in these tests."""

    kind: str
    backend: Backend
    info: ServerInfo
    request: Callable[[str], Awaitable[CreateRequest]]
    """A CreateRequest for a new (stopped) instance with this name."""
    make_stubborn: Callable[[Instance], Awaitable[None]] = _no_op
    """Make a stopped instance ignore a graceful shutdown request."""
    booted: Callable[[InstanceRef], Awaitable[None]] = _no_op
    """Wait until a started instance runs its init (so it could answer a shutdown)."""
    graceful_stop: bool = True
    """A plain instance shuts down when asked (QEMU's test guest never does)."""
    one_instance: bool = False
    """Use one instance for everything (QEMU: booting is slow)."""
    events: EventLog | None = None
    made: dict[str, Instance] = field(default_factory=dict)
    define: Callable[[str], Awaitable[Instance]] | None = None
    """Make a (stopped) instance without ``create_instance`` (a backend that cannot create)."""
    write_marker: Callable[[InstanceRef, str], Awaitable[None]] | None = None
    """Leave a short text on the stopped instance's disk (where SNAPSHOTS is declared: what
    a restore must take back)."""
    read_marker: Callable[[InstanceRef], Awaitable[str | None]] | None = None
    """That text as the disk holds it, read without the backend (None: there is none)."""

    async def instance(self, role: str) -> Instance:
        if role not in self.made:
            name = f"ct-{role}-{uuid.uuid4().hex[:6]}"
            inst = (await self.define(name) if self.define else
                    await self.backend.create_instance(await self.request(name)))
            assert inst.name == name and inst.status is InstanceStatus.STOPPED, inst
            self.made[role] = inst
        return self.made[role]

    async def status(self, ref: InstanceRef) -> InstanceStatus:
        return (await self.backend.get_instance(ref)).status

    async def ensure_stopped(self, ref: InstanceRef) -> None:
        if await self.status(ref) is not InstanceStatus.STOPPED:
            await self.backend.stop(ref, force=True)
        assert await self.status(ref) is InstanceStatus.STOPPED

    async def ensure_running(self, ref: InstanceRef) -> None:
        if await self.status(ref) is not InstanceStatus.RUNNING:
            await self.backend.start(ref)
            await self.booted(ref)
        assert await self.status(ref) is InstanceStatus.RUNNING

    async def remove_all(self) -> None:
        for inst in self.made.values():
            with contextlib.suppress(NotFound):
                await self.backend.delete(inst.ref, force=True)


MARKER = "/root/corral-marker"


def _file_marker(backend: Backend, scratch: Path) -> Callable[[InstanceRef, str],
                                                               Awaitable[None]]:
    """``write_marker`` through the backend's own file verbs (FILES)."""
    async def write(ref: InstanceRef, text: str) -> None:
        local = scratch / "marker"
        local.write_text(text)
        await backend.write_file(ref, FileEntry(MARKER, "file"), str(local))
    return write


async def _source(backend: Backend, kind: str, label: str = "") -> CreateSource:
    sources = await backend.create_sources()
    found = [s for s in sources if s.kind == kind and label in s.label]
    assert found, f"no '{kind}' source {label!r} in {sources}"
    return found[0]


async def _lxd_subject(request, stack: contextlib.AsyncExitStack, kind: str) -> Subject:
    from backends.remotes import discover

    lab = request.getfixturevalue("lab")
    daemon, remote = {"lxd": (lab.lxd1, "local"), "incus": (lab.incus1, "inc1")}[kind]
    remotes = {r.name: r for r in discover(lab.env()).remotes}
    backend = get_backend(remotes[remote], timeout=10)
    stack.push_async_callback(backend.close)
    info = await backend.connect()

    async def request_for(name: str) -> CreateRequest:
        return CreateRequest(name=name, source=await _source(backend, "image", "busybox"))

    async def stubborn(inst: Instance) -> None:
        # busybox init halts on SIGPWR; LXD sends the halt signal raw.lxc names
        await asyncio.to_thread(daemon.cli, "config", "set", inst.name, "raw.lxc",
                                "lxc.signal.halt=SIGWINCH")

    def leftovers() -> None:
        names = daemon.cli("list", "--format", "csv", "-c", "n", check=False).stdout.split()
        mine = [n for n in names if n.startswith("ct-")]
        if mine:
            daemon.cli("delete", "--force", *mine, check=False)

    stack.callback(leftovers)
    scratch = request.getfixturevalue("tmp_path_factory").mktemp("marker")

    async def read_marker(ref: InstanceRef) -> str | None:
        out = scratch / "pulled"
        out.unlink(missing_ok=True)
        proc = await asyncio.to_thread(daemon.cli, "file", "pull", f"{ref.name}{MARKER}",
                                       out, check=False)
        if proc.returncode != 0:
            # LXD: "Error: Not Found"; Incus: "Error: file does not exist"
            assert any(w in proc.stderr.lower() for w in ("not found", "does not exist")), \
                proc.stderr
            return None
        return out.read_text()

    return Subject(kind, backend, info, request_for, make_stubborn=stubborn,
                   write_marker=_file_marker(backend, scratch), read_marker=read_marker)


async def _lxc_subject(request, stack: contextlib.AsyncExitStack, kind: str) -> Subject:
    from backends.lxc import LXCBackend, lxc_remotes

    missing = [t for t in ("lxc-create", "lxc-start", "lxc-monitor", "lxc-snapshot")
               if shutil.which(t) is None]
    if missing:
        pytest.fail(f"LXC tools missing: {', '.join(missing)} (run scripts/setup-lab.sh)",
                    pytrace=False)
    path = request.getfixturevalue("tmp_path_factory").mktemp("lxcpath")
    os.chmod(path, 0o755)

    def leftovers() -> None:
        for entry in path.iterdir():
            if (entry / "config").is_file():
                for tool, flag in (("lxc-stop", "-k"), ("lxc-destroy", "-s")):
                    subprocess.run([tool, "-P", str(path), "-n", entry.name, flag],
                                   capture_output=True)

    stack.callback(leftovers)
    backend = LXCBackend(lxc_remotes([str(path)])[0], timeout=10)
    stack.push_async_callback(backend.close)
    info = await backend.connect()

    async def request_for(name: str) -> CreateRequest:
        return CreateRequest(name=name, source=await _source(backend, "template", "busybox"),
                             network="none")

    async def stubborn(inst: Instance) -> None:
        # the busybox template halts with SIGUSR1; busybox init ignores SIGWINCH
        config = path / inst.name / "config"
        text = config.read_text()
        assert "lxc.signal.halt = SIGUSR1" in text, text
        config.write_text(text.replace("lxc.signal.halt = SIGUSR1",
                                       "lxc.signal.halt = SIGWINCH"))

    async def read_marker(ref: InstanceRef) -> str | None:
        config = (path / ref.name / "config").read_text()
        rootfs = next(line.split("=", 1)[1].strip() for line in config.splitlines()
                      if line.replace(" ", "").startswith("lxc.rootfs.path="))
        marker = Path(rootfs.removeprefix("dir:") + MARKER)
        return marker.read_text() if marker.exists() else None

    scratch = request.getfixturevalue("tmp_path_factory").mktemp("marker")
    return Subject(kind, backend, info, request_for, make_stubborn=stubborn,
                   write_marker=_file_marker(backend, scratch), read_marker=read_marker)


def _kill_processes_mentioning(text: str) -> None:
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if text.encode() in cmdline and int(pid) != os.getpid():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


async def _qemu_subject(request, stack: contextlib.AsyncExitStack, kind: str) -> Subject:
    from backends.qemu import QEMUBackend, qemu_remote

    kernel, initrd = request.getfixturevalue("guest")
    vms = request.getfixturevalue("tmp_path_factory").mktemp("vms")
    run = Path(f"/tmp/cq-{os.getpid()}-contract")  # short: unix socket paths
    env = pytest.MonkeyPatch()
    env.setenv("XDG_RUNTIME_DIR", str(run))
    stack.callback(shutil.rmtree, run, ignore_errors=True)
    stack.callback(env.undo)
    stack.callback(_kill_processes_mentioning, str(vms))
    backend = QEMUBackend(qemu_remote(str(vms)), timeout=10)
    stack.push_async_callback(backend.close)
    info = await backend.connect()

    async def request_for(name: str) -> CreateRequest:
        source = replace(await _source(backend, "kernel"), value=str(kernel))
        # a small disk: snapshots of a VM without one have nothing to hold
        return CreateRequest(name=name, source=source, memory=256 * MiB, disk=64 * MiB,
                             network="none", options={"initrd": str(initrd),
                                                      "cmdline": "console=ttyS0",
                                                      "accel": "tcg"})

    async def booted(ref: InstanceRef) -> None:
        await qemu_guest.wait_serial(backend, ref.name, "corral-guest ready", timeout=120)

    # busybox as init ignores the ACPI power button: a graceful stop never ends, so this
    # one VM is the stubborn guest, and the plain start/stop check stops it by force.
    def disk(ref: InstanceRef) -> str:
        return str(backend.vms.dir(ref.name) / backend.vms.definition(ref.name).disks[0])

    scratch = request.getfixturevalue("tmp_path_factory").mktemp("marker")
    write_marker, read_marker = _disk_markers(scratch, disk)
    return Subject(kind, backend, info, request_for, booted=booted, graceful_stop=False,
                   one_instance=True, write_marker=write_marker, read_marker=read_marker)


def _disk_markers(scratch: Path, disk: Callable[[InstanceRef], str]) -> tuple[
        Callable[[InstanceRef, str], Awaitable[None]],
        Callable[[InstanceRef], Awaitable[str | None]]]:
    """``write_marker``/``read_marker`` on the first bytes of a stopped VM's qcow2 disk (the
    test guest's disk holds no file system), with ``qemu-io``."""
    async def write_marker(ref: InstanceRef, text: str) -> None:
        source = scratch / "marker"
        source.write_bytes(text.encode().ljust(512, b"\0"))
        await asyncio.to_thread(qemu_io, disk(ref), f"write -s {source} 0 512")

    async def read_marker(ref: InstanceRef) -> str | None:
        dump = await asyncio.to_thread(qemu_io, disk(ref), "read -v 0 512", "-r")
        data = bytes(int(h, 16) for line in dump.splitlines()
                     if re.fullmatch(r"[0-9a-f]{8}", line[:8]) and line[8:9] == ":"
                     for h in line[9:].split()[:16])
        return data.rstrip(b"\0").decode() or None

    return write_marker, read_marker


def qemu_io(disk: str, command: str, *flags: str) -> str:
    """Run one ``qemu-io`` command on a qcow2 disk nothing else has open; its output."""
    return subprocess.run(["qemu-io", "-f", "qcow2", *flags, "-c", command, disk],
                          capture_output=True, text=True, check=True).stdout


async def _libvirt_subject(request, stack: contextlib.AsyncExitStack, kind: str) -> Subject:
    import libvirt

    import lab_libvirt

    vlab = lab_libvirt.session_lab(request)
    kernel, initrd = request.getfixturevalue("guest")
    backend = get_backend(Remote(name="lv", kind="libvirt", address=vlab.ssh_uri()),
                          timeout=10)
    stack.push_async_callback(backend.close)
    info = await backend.connect()

    def disk(ref: InstanceRef) -> str:
        return str(vlab.images / f"{ref.name}.qcow2")  # the default pool's new volume

    async def request_for(name: str) -> CreateRequest:
        # a small qcow2 disk: libvirt keeps its internal snapshots in it; TCG (the lab's
        # KVM aborts)
        source = replace(await _source(backend, "kernel"), value=str(kernel))
        return CreateRequest(name=name, source=source, memory=128 * MiB, disk=16 * MiB,
                             network="none", options={"initrd": str(initrd),
                                                      "cmdline": "console=ttyS0",
                                                      "accel": "qemu"})

    def leftovers() -> None:
        conn = libvirt.open(vlab.unix_uri)
        try:
            for vol in conn.storagePoolLookupByName("default").listAllVolumes(0):
                if vol.name().startswith("ct-"):
                    vol.delete(0)
        finally:
            conn.close()

    stack.callback(leftovers)

    scratch = request.getfixturevalue("tmp_path_factory").mktemp("marker")
    write_marker, read_marker = _disk_markers(scratch, disk)
    # busybox init ignores the ACPI power button (see _qemu_subject)
    return Subject(kind, backend, info, request_for, graceful_stop=False,
                   one_instance=True, write_marker=write_marker, read_marker=read_marker)


async def _fake_subject(request, stack: contextlib.AsyncExitStack, kind: str) -> Subject:
    backend = FakeBackend(Remote(name="fake", kind="fake", address="fake:"))
    stack.push_async_callback(backend.close)
    info = await backend.connect()

    async def request_for(name: str) -> CreateRequest:
        return CreateRequest(name=name, source=await _source(backend, "image", "busybox"))

    async def stubborn(inst: Instance) -> None:
        backend.hang_on_stop.add(inst.name)

    return Subject(kind, backend, info, request_for, make_stubborn=stubborn)


SETUPS = {"lxd": _lxd_subject, "incus": _lxd_subject, "lxc": _lxc_subject,
          "qemu": _qemu_subject, "libvirt": _libvirt_subject, "fake": _fake_subject}
