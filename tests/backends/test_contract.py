"""One contract, every backend: what ``backends/base.py`` promises, checked the same way on
LXD and Incus (the lab's daemons), LXC (a private lxcpath), QEMU (a private state dir, the
cached test guest under TCG) and the in-memory FakeBackend the UI tests use.

- The declared abilities match the implemented optional verbs (``contract_problems``), and
  every verb has the base class's signature (parameter names, kinds, defaults).
- connect identifies the server; an instance made with ``create_instance`` is listed.
- start → RUNNING and stop → STOPPED, seen by ``get_instance`` and as ``watch()`` events.
- A graceful stop of a guest that ignores the request raises StopTimedOut within the
  timeout; ``stop(force=True)`` then stops it.
- Snapshots: create, list, count, restore, delete (where SNAPSHOTS is declared).
- Every verb of an ability the backend does not declare raises Unsupported, and so do the
  flags of abilities it lacks (``stateful=``, ``expires_at=``, ``linked=``, ``kind="vga"``).

Each backend gets one module-scoped connection and at most two instances (QEMU: one VM,
booted when a test needs a running guest), so the suite stays fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest
import pytest_asyncio

import qemu_guest  # tests/ is on sys.path (tests/conftest.py)
from backends import backend_class, get_backend
from backends.base import CAPABILITY_METHODS, Backend, contract_problems
from backends.errors import NotFound, StopTimedOut, Unsupported
from backends.fake import FakeBackend
from backends.models import (
    BackendEvent,
    Capability,
    CreateRequest,
    CreateSource,
    EventKind,
    FileEntry,
    Instance,
    InstanceRef,
    InstanceStatus,
    Remote,
    ResourceKind,
    ServerInfo,
    Snapshot,
)

KINDS = ["lxd", "incus", "lxc", "qemu", "libvirt", "fake"]
SERVER = {"lxd": "lxd", "incus": "incus", "lxc": "lxc", "qemu": "qemu", "libvirt": "libvirt",
          "fake": "fake"}
CORE = ("connect", "close", "list_instances", "get_instance", "get_states", "start", "stop",
        "restart", "freeze", "unfreeze", "delete")
OPTIONAL = tuple(sorted({m for methods in CAPABILITY_METHODS.values() for m in methods}
                        | {"check_name", "instance_capabilities"}))
STARTED = {"instance-started", "instance-updated"}
STOPPED = {"instance-stopped", "instance-shutdown", "instance-updated"}
"""Lifecycle actions that say the instance started / stopped (``instance-updated``: the
generic "read it again" of the FakeBackend)."""
MiB = 1024**2

live = pytest.mark.asyncio(loop_scope="module")


def class_of(kind: str) -> type[Backend]:
    return FakeBackend if kind == "fake" else backend_class(kind)


# What the classes declare (no daemon needed) -----------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_declared_abilities_are_exactly_the_implemented_verbs(kind):
    assert contract_problems(class_of(kind)) == []


def _shape(fn: Callable) -> tuple:
    """How ``fn`` is called: async or not, its positional parameters in order and its
    keyword-only ones (their order does not matter to a caller) with their defaults."""
    values = inspect.signature(fn).parameters.values()
    params = ([(p.name, p.kind.name, p.default) for p in values if p.kind is not p.KEYWORD_ONLY],
              sorted((p.name, repr(p.default)) for p in values if p.kind is p.KEYWORD_ONLY))
    if inspect.isasyncgenfunction(fn):
        how = "async generator"
    elif inspect.iscoroutinefunction(fn):
        how = "coroutine"
    else:
        how = "plain"
    return how, params


def _shown(fn: Callable) -> str:
    """``async def name(self, ref, *, force=False)``, without annotations."""
    sig = inspect.signature(fn)
    bare = sig.replace(parameters=[p.replace(annotation=p.empty) for p in
                                   sig.parameters.values()], return_annotation=sig.empty)
    return f"{_shape(fn)[0]} {fn.__name__}{bare}"


def _signature_problems(cls: type[Backend], names: tuple[str, ...]) -> list[str]:
    return [f"{_shown(getattr(cls, n))} is not Backend's {_shown(getattr(Backend, n))}"
            for n in names if _shape(getattr(cls, n)) != _shape(getattr(Backend, n))]


@pytest.mark.parametrize("kind", KINDS)
def test_optional_verbs_have_the_base_signatures(kind):
    assert _signature_problems(class_of(kind), OPTIONAL) == []


@pytest.mark.parametrize("kind", KINDS)
def test_core_verbs_have_the_base_signatures(kind):
    assert _signature_problems(class_of(kind), CORE) == []


@pytest.mark.parametrize("kind", KINDS)
def test_class_attributes_are_known_values(kind):
    cls = class_of(kind)
    assert cls.capabilities <= set(Capability)
    assert cls.console_kinds <= {"console", "vga"}
    assert cls.backup_extension.startswith(".")


# Calls of every optional verb, for the Unsupported checks ----------------------------------

Call = Callable[[Backend, InstanceRef, Snapshot, Path], Any]

CALLS: dict[str, Call] = {
    "watch": lambda b, r, s, d: anext(b.watch()),
    "create_sources": lambda b, r, s, d: b.create_sources(),
    "create_options": lambda b, r, s, d: b.create_options(),
    "create_instance": lambda b, r, s, d: b.create_instance(
        CreateRequest(name=r.name, source=CreateSource("image", "nothing", "nothing"))),
    "get_limits": lambda b, r, s, d: b.get_limits(r),
    "set_limits": lambda b, r, s, d: b.set_limits(r, {"memory": "256MiB"}),
    "list_snapshots": lambda b, r, s, d: b.list_snapshots(r),
    "snapshot_counts": lambda b, r, s, d: b.snapshot_counts([r]),
    "create_snapshot": lambda b, r, s, d: b.create_snapshot(r, "s0"),
    "restore_snapshot": lambda b, r, s, d: b.restore_snapshot(s),
    "delete_snapshot": lambda b, r, s, d: b.delete_snapshot(s),
    "rename_snapshot": lambda b, r, s, d: b.rename_snapshot(s, "s1"),
    "snapshot_settings": lambda b, r, s, d: b.snapshot_settings(r),
    "set_snapshot_settings": lambda b, r, s, d: b.set_snapshot_settings(
        r, {"snapshots.schedule": "@daily"}),
    "open_console": lambda b, r, s, d: b.open_console(r),
    "open_shell": lambda b, r, s, d: b.open_shell(r),
    "spice_viewer_argv": lambda b, r, s, d: b.spice_viewer_argv(r),
    "open_display": lambda b, r, s, d: b.open_display(r),
    "display_viewer_argv": lambda b, r, s, d: b.display_viewer_argv(r),
    "export_instance": lambda b, r, s, d: b.export_instance(r, str(d / "backup.tar.gz")),
    "import_instance": lambda b, r, s, d: b.import_instance(str(d / "none.tar.gz"),
                                                            r.name + "-i"),
    "clone_instance": lambda b, r, s, d: b.clone_instance(r, r.name + "-c"),
    "copy_to": lambda b, r, s, d: b.copy_to(r, b, r.name + "-c"),
    "portable_vm": lambda b, r, s, d: b.portable_vm(r),
    "rename_instance": lambda b, r, s, d: b.rename_instance(r, r.name + "-r"),
    "set_description": lambda b, r, s, d: b.set_description(r, "contract"),
    "publish_image": lambda b, r, s, d: b.publish_image(r),
    "list_images": lambda b, r, s, d: b.list_images(),
    "delete_image": lambda b, r, s, d: b.delete_image("0" * 64),
    "set_password": lambda b, r, s, d: b.set_password(r, "root", "Contract-pw-1"),
    "list_nics": lambda b, r, s, d: b.list_nics(r),
    "add_nic": lambda b, r, s, d: b.add_nic(r, "eth9", network="contract0"),
    "remove_nic": lambda b, r, s, d: b.remove_nic(r, "eth9"),
    "set_nic_addresses": lambda b, r, s, d: b.set_nic_addresses(r, "eth9", "", ""),
    "list_operations": lambda b, r, s, d: b.list_operations(),
    "cancel_operation": lambda b, r, s, d: b.cancel_operation(
        "00000000-0000-0000-0000-000000000000"),
    # profiles, networks, storage, projects, image aliases, YAML (backends/resources.py)
    "list_profiles": lambda b, r, s, d: b.list_profiles(),
    "get_profile": lambda b, r, s, d: b.get_profile("contract-ghost"),
    "create_profile": lambda b, r, s, d: b.create_profile(r.name + "-p"),
    "rename_profile": lambda b, r, s, d: b.rename_profile("contract-ghost", r.name + "-p"),
    "delete_profile": lambda b, r, s, d: b.delete_profile("contract-ghost"),
    "set_instance_profiles": lambda b, r, s, d: b.set_instance_profiles(r, ["default"]),
    "list_networks": lambda b, r, s, d: b.list_networks(),
    "create_network": lambda b, r, s, d: b.create_network("ctghost0"),
    "delete_network": lambda b, r, s, d: b.delete_network("ctghost0"),
    "network_leases": lambda b, r, s, d: b.network_leases("ctghost0"),
    "list_storage_pools": lambda b, r, s, d: b.list_storage_pools(),
    "list_volumes": lambda b, r, s, d: b.list_volumes("contract-ghost"),
    "create_volume": lambda b, r, s, d: b.create_volume("contract-ghost", r.name + "-v"),
    "resize_volume": lambda b, r, s, d: b.resize_volume("contract-ghost", "v", 2**20),
    "delete_volume": lambda b, r, s, d: b.delete_volume("contract-ghost", "v"),
    "attach_volume": lambda b, r, s, d: b.attach_volume("contract-ghost", "v", r, "/mnt"),
    "detach_volume": lambda b, r, s, d: b.detach_volume("contract-ghost", "v", r),
    "copy_volume": lambda b, r, s, d: b.copy_volume("contract-ghost", "v", b,
                                                    "contract-ghost", "v2"),
    "list_projects": lambda b, r, s, d: b.list_projects(),
    "create_project": lambda b, r, s, d: b.create_project(r.name + "-pj"),
    "delete_project": lambda b, r, s, d: b.delete_project("contract-ghost"),
    "add_image_alias": lambda b, r, s, d: b.add_image_alias("0" * 64, r.name + "-a"),
    "remove_image_alias": lambda b, r, s, d: b.remove_image_alias("contract-ghost"),
    "copy_image": lambda b, r, s, d: b.copy_image("0" * 64, b),
    "refresh_image": lambda b, r, s, d: b.refresh_image("0" * 64),
    "get_yaml": lambda b, r, s, d: b.get_yaml(ResourceKind.INSTANCE, r.name),
    "put_yaml": lambda b, r, s, d: b.put_yaml(ResourceKind.INSTANCE, r.name, "{}", ""),
    "list_files": lambda b, r, s, d: b.list_files(r, "/"),
    "read_file": lambda b, r, s, d: b.read_file(r, FileEntry("/etc/hostname", "file"),
                                                str(d / "pulled")),
    "write_file": lambda b, r, s, d: b.write_file(r, FileEntry("/tmp/contract", "directory")),
    "list_members": lambda b, r, s, d: b.list_members(),
    "placements": lambda b, r, s, d: b.placements(),
    "move_to_member": lambda b, r, s, d: b.move_to_member(r, "m2"),
    "evacuate_member": lambda b, r, s, d: b.evacuate_member("m2"),
    "restore_member": lambda b, r, s, d: b.restore_member("m2"),
    "cluster_instances": lambda b, r, s, d: b.cluster_instances(),
}


def test_every_optional_verb_has_a_call():
    """The Unsupported checks below call every verb of CAPABILITY_METHODS: a new verb
    needs its call here."""
    assert set(CALLS) == {m for methods in CAPABILITY_METHODS.values() for m in methods}


async def _outcome(make: Callable[[], Any]) -> Any:
    """What a call returned, or the exception it raised."""
    try:
        result = make()
        if inspect.isawaitable(result):
            result = await asyncio.wait_for(result, 120)
    except Exception as e:  # noqa: BLE001 - the caller judges it
        return e
    close = getattr(result, "close", None)
    if callable(close) and inspect.iscoroutinefunction(close):
        await close()  # a console session that should not have opened
    return result


def _not_unsupported(what: str, outcome: Any) -> str | None:
    if isinstance(outcome, Unsupported):
        return None if str(outcome).strip() else f"{what}: Unsupported without words"
    if isinstance(outcome, Exception):
        return f"{what}: raised {type(outcome).__name__} ({outcome}), not Unsupported"
    return f"{what}: returned {outcome!r} instead of raising Unsupported"


# Live backends -----------------------------------------------------------------------------


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
    """Make a (stopped) instance without ``create_instance`` (libvirt: defined by an admin)."""

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
    return Subject(kind, backend, info, request_for, make_stubborn=stubborn)


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

    return Subject(kind, backend, info, request_for, make_stubborn=stubborn)


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
    return Subject(kind, backend, info, request_for, booted=booted, graceful_stop=False,
                   one_instance=True)


async def _libvirt_subject(request, stack: contextlib.AsyncExitStack, kind: str) -> Subject:
    import lab_libvirt

    vlab = lab_libvirt.session_lab(request)
    kernel, initrd = request.getfixturevalue("guest")
    backend = get_backend(Remote(name="lv", kind="libvirt", address=vlab.ssh_uri()),
                          timeout=10)
    stack.push_async_callback(backend.close)
    info = await backend.connect()

    async def define(name: str) -> Instance:
        await asyncio.to_thread(lab_libvirt.define, vlab,
                                lab_libvirt.guest_xml(name, kernel, initrd))
        return await backend.get_instance(InstanceRef(backend.remote.name, name))

    async def no_request(name: str) -> CreateRequest:
        raise AssertionError("libvirt domains are defined, not created, here")

    # busybox init ignores the ACPI power button (see _qemu_subject)
    return Subject(kind, backend, info, no_request, define=define, graceful_stop=False,
                   one_instance=True)


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
PARAMS = [pytest.param(k, marks=pytest.mark.lab) if k in ("lxd", "incus") else
          pytest.param(k, marks=(pytest.mark.libvirt, pytest.mark.qemu)) if k == "libvirt"
          else k for k in KINDS]


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=PARAMS)
async def subject(request):
    async with contextlib.AsyncExitStack() as stack:
        subj = await SETUPS[request.param](request, stack, request.param)
        if Capability.EVENTS in subj.backend.capabilities:
            subj.events = EventLog(subj.backend)
            stack.push_async_callback(subj.events.stop)
            await subj.events.start()
            if subj.kind == "lxc":
                await asyncio.sleep(0.5)  # lxc-monitor subscribes a moment after it starts
        stack.push_async_callback(subj.remove_all)
        yield subj


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def plain(subject) -> Instance:
    return await subject.instance("plain")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stubborn(subject) -> Instance:
    if subject.one_instance:
        return await subject.instance("plain")
    if "stubborn" not in subject.made:
        await subject.make_stubborn(await subject.instance("stubborn"))
    return subject.made["stubborn"]


@live
async def test_connect_identifies_the_server(subject):
    assert isinstance(subject.info, ServerInfo)
    assert subject.info.server == SERVER[subject.kind]
    assert subject.info.version


@live
async def test_a_created_instance_is_listed(subject, plain):
    b = subject.backend
    listed = {i.ref: i for i in await b.list_instances()}
    assert plain.ref in listed, sorted(map(str, listed))
    assert listed[plain.ref].status is InstanceStatus.STOPPED
    one = await b.get_instance(plain.ref)
    assert one.ref == plain.ref and one.type is plain.type
    assert one.status is InstanceStatus.STOPPED
    assert b.instance_capabilities(one) <= b.capabilities
    if type(b).check_name is not Backend.check_name:
        assert b.check_name(plain.name), "a taken name is not refused"
    with pytest.raises(NotFound):
        await b.get_instance(InstanceRef(b.remote.name, f"ct-missing-{uuid.uuid4().hex[:6]}"))


@live
async def test_start_then_stop(subject, plain):
    b, ref = subject.backend, plain.ref
    await subject.ensure_stopped(ref)
    mark = subject.events.mark() if subject.events else 0
    await b.start(ref)
    assert await subject.status(ref) is InstanceStatus.RUNNING
    if subject.events:
        await subject.events.lifecycle(ref, STARTED, since=mark)
    assert ref in await b.get_states([ref])

    await subject.booted(ref)
    mark = subject.events.mark() if subject.events else 0
    if subject.graceful_stop:
        await b.stop(ref, timeout=30)
    else:
        await b.stop(ref, force=True)  # see graceful_stop: this guest never powers off
    assert await subject.status(ref) is InstanceStatus.STOPPED
    if subject.events:
        await subject.events.lifecycle(ref, STOPPED, since=mark)
    assert ref not in await b.get_states([ref])


@live
async def test_graceful_stop_of_a_guest_that_ignores_it_times_out_then_force_works(
        subject, stubborn):
    b, ref = subject.backend, stubborn.ref
    await subject.ensure_running(ref)
    started = time.monotonic()
    with pytest.raises(StopTimedOut) as timed_out:
        await b.stop(ref, timeout=2)
    assert time.monotonic() - started < 20
    assert str(timed_out.value).strip()
    assert await subject.status(ref) is InstanceStatus.RUNNING
    mark = subject.events.mark() if subject.events else 0
    await b.stop(ref, force=True)
    assert await subject.status(ref) is InstanceStatus.STOPPED
    if subject.events:
        await subject.events.lifecycle(ref, STOPPED, since=mark)


@live
async def test_snapshots_create_list_restore_delete(subject, plain):
    b, ref = subject.backend, plain.ref
    if Capability.SNAPSHOTS not in b.capabilities:
        with pytest.raises(Unsupported):
            await b.list_snapshots(ref)
        return
    await subject.ensure_stopped(ref)
    before = {s.name for s in await b.list_snapshots(ref)}
    first = await b.create_snapshot(ref, "first")
    assert first.ref == ref and first.created_at is not None
    # the name typed is kept (LXC names snapshots itself and keeps it as the comment)
    assert "first" in (first.name, first.comment), first
    second = await b.create_snapshot(ref, "second")
    listed = {s.name: s for s in await b.list_snapshots(ref)}
    assert set(listed) == before | {first.name, second.name}
    assert listed[first.name].created_at == first.created_at
    assert await b.snapshot_counts([ref]) == {ref: len(listed)}

    await b.restore_snapshot(first)
    assert await subject.status(ref) is InstanceStatus.STOPPED
    assert first.name in {s.name for s in await b.list_snapshots(ref)}

    await b.delete_snapshot(second)
    await b.delete_snapshot(first)
    assert {s.name for s in await b.list_snapshots(ref)} == before
    assert await b.snapshot_counts([ref]) == {ref: len(before)}


@live
async def test_undeclared_verbs_and_flags_raise_unsupported(subject, plain, tmp_path):
    b = subject.backend
    declared = b.capabilities
    offered = {m for cap in declared for m in CAPABILITY_METHODS.get(cap, ())}
    undeclared = sorted(set(CALLS) - offered)
    # a missing instance: a backend that implements a verb it does not declare fails here
    # without changing anything
    ghost = InstanceRef(b.remote.name, f"ct-ghost-{uuid.uuid4().hex[:6]}")
    ghost_snapshot = Snapshot(ref=ghost, name="s0")
    problems = []
    for name in undeclared:
        outcome = await _outcome(lambda: CALLS[name](b, ghost, ghost_snapshot, tmp_path))
        problems.append(_not_unsupported(name, outcome))

    # the flags of abilities built on a declared one, on the real (stopped) instance
    ref = plain.ref
    await subject.ensure_stopped(ref)
    flags: list[tuple[str, Callable[[], Any]]] = []
    if Capability.SNAPSHOTS in declared:
        if Capability.SNAPSHOT_STATEFUL not in declared:
            flags.append(("create_snapshot(stateful=True)",
                          lambda: b.create_snapshot(ref, "ct-stateful", stateful=True)))
        if Capability.SNAPSHOT_EXPIRY not in declared:
            flags.append(("create_snapshot(expires_at=…)", lambda: b.create_snapshot(
                ref, "ct-expiry", expires_at=datetime.now() + timedelta(days=1))))
    clone = f"{ref.name}-linked"
    if Capability.CLONE in declared and Capability.LINKED_CLONE not in declared:
        flags.append(("clone_instance(linked=True)",
                      lambda: b.clone_instance(ref, clone, linked=True)))
    if Capability.CONSOLE in declared:
        for kind in sorted({"console", "vga"} - set(type(b).console_kinds)):
            flags.append((f"open_console(kind={kind!r})",
                          lambda kind=kind: b.open_console(ref, kind=kind)))
    try:
        for what, make in flags:
            problems.append(_not_unsupported(what, await _outcome(make)))
    finally:  # undo what a backend that ignored a flag made
        if Capability.SNAPSHOTS in declared:
            for snap in await b.list_snapshots(ref):
                if {snap.name, snap.comment} & {"ct-stateful", "ct-expiry"}:
                    await b.delete_snapshot(snap)
        for inst in await b.list_instances():
            if inst.name == clone:
                await b.delete(inst.ref, force=True)
    assert [p for p in problems if p] == []
