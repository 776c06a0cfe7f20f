"""One contract, every backend: what ``backends/base.py`` promises, checked the same way on
LXD and Incus (the lab's daemons), LXC (a private lxcpath), QEMU (a private state dir, the
cached test guest under TCG) and the in-memory FakeBackend the UI tests use.

- The declared abilities match the implemented optional verbs (``contract_problems``), and
  every verb has the base class's signature (parameter names, kinds, defaults).
- connect identifies the server; an instance made with ``create_instance`` is listed.
- start → RUNNING and stop → STOPPED, seen by ``get_instance`` and as ``watch()`` events.
- A graceful stop of a guest that ignores the request raises StopTimedOut within the
  timeout; ``stop(force=True)`` then stops it.
- Snapshots: create, list, count, restore, delete (where SNAPSHOTS is declared); a restore
  takes back what was written on the instance's disk after the snapshot.
- Delete with storage (where DELETE_STORAGE is declared): ``owned_storage`` names items,
  and ``delete_with_storage`` refuses a list naming what is not the instance's own, with
  the instance left as it was.
- Every verb of an ability the backend does not declare raises Unsupported, and so do the
  flags of abilities it lacks (``stateful=``, ``expires_at=``, ``linked=``, ``kind="vga"``).

Each backend gets one module-scoped connection and at most two instances (QEMU: one VM,
booted when a test needs a running guest), so the suite stays fast. The subjects are made
in ``contract_subjects.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
import uuid
from datetime import datetime, timedelta
from typing import Any, Callable

import pytest
import pytest_asyncio

from .contract_subjects import SETUPS, EventLog
from .verb_calls import CALLS
from backends import backend_class
from backends.base import CAPABILITY_METHODS, Backend, contract_problems
from backends.errors import Conflict, NotFound, StopTimedOut, Unsupported
from backends.fake import FakeBackend
from backends.models import (
    Capability,
    Instance,
    InstanceRef,
    InstanceStatus,
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
    except Exception as e:  # the caller judges it
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
    assert subject.write_marker and subject.read_marker, f"{subject.kind}: no marker"
    await subject.write_marker(ref, "before the snapshots\n")
    first = await b.create_snapshot(ref, "first")
    assert first.ref == ref and first.created_at is not None
    # the name typed is kept (LXC names snapshots itself and keeps it as the comment)
    assert "first" in (first.name, first.comment), first
    second = await b.create_snapshot(ref, "second")
    listed = {s.name: s for s in await b.list_snapshots(ref)}
    assert set(listed) == before | {first.name, second.name}
    assert listed[first.name].created_at == first.created_at
    assert await b.snapshot_counts([ref]) == {ref: len(listed)}

    # what is written after the snapshot, over what was there before it, is taken back
    assert subject.write_marker and subject.read_marker, f"{subject.kind}: no marker"
    await subject.write_marker(ref, "after the snapshots\n")
    assert await subject.read_marker(ref) == "after the snapshots\n"
    await b.restore_snapshot(first)
    assert await subject.status(ref) is InstanceStatus.STOPPED
    assert await subject.read_marker(ref) == "before the snapshots\n"
    assert first.name in {s.name for s in await b.list_snapshots(ref)}

    await b.delete_snapshot(second)
    await b.delete_snapshot(first)
    assert {s.name for s in await b.list_snapshots(ref)} == before
    assert await b.snapshot_counts([ref]) == {ref: len(before)}


@live
async def test_delete_with_storage_refuses_what_is_not_its_own(subject, plain):
    b, ref = subject.backend, plain.ref
    if Capability.DELETE_STORAGE not in b.capabilities:
        return  # its verbs raise Unsupported: the test below
    owned = await b.owned_storage(ref)
    assert isinstance(owned, list) and all(isinstance(p, str) and p for p in owned)
    with pytest.raises(Conflict) as refused:
        await b.delete_with_storage(ref, [*owned, "/nonexistent/corral-not-its-own"],
                                    force=True)
    assert "corral-not-its-own" in str(refused.value)
    assert (await b.get_instance(ref)).ref == ref
    assert await b.owned_storage(ref) == owned


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
