"""The libvirt backend against the suite's private libvirtd (``tests/lab_libvirt.py``),
over its unix socket and over ``qemu+ssh://`` to the lab's sshd on loopback: listing,
lifecycle verbs and the lifecycle events they cause, usage figures, the serial console,
delete keeping disks. The connection-loss tests are in ``test_libvirt_reconnect.py``."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import subprocess
import time
import uuid

import pytest
import pytest_asyncio

import lab_libvirt
from backends import get_backend
from backends.errors import Conflict, NotFound, StopTimedOut
from backends.models import (
    BackendEvent,
    Capability,
    EventKind,
    InstanceRef,
    InstanceStatus,
    InstanceType,
    Remote,
)

live = pytest.mark.asyncio(loop_scope="module")


STARTER = contextvars.ContextVar("starter", default="")
"""Set by the code that starts a console; the sink must see it (Textual keeps its app in
such variables: a sink fed outside that context repainted nothing)."""


class Sink:
    def __init__(self) -> None:
        self.data = b""
        self.reason: str | None = None
        self.contexts: set[str] = set()

    def feed(self, data: bytes) -> None:
        self.data += data
        self.contexts.add(STARTER.get())

    def closed(self, reason: str) -> None:
        self.reason = reason


class Watch:
    """What ``watch()`` yields, collected by a task."""

    def __init__(self, backend) -> None:
        self.events: list[BackendEvent] = []
        self.task = asyncio.ensure_future(self._pump(backend))

    async def _pump(self, backend) -> None:
        async for event in backend.watch():
            self.events.append(event)

    def mark(self) -> int:
        return len(self.events)

    async def wait(self, since: int, *, action: str, ref: InstanceRef | None = None,
                   kind: EventKind = EventKind.LIFECYCLE, timeout: float = 30) -> BackendEvent:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for e in self.events[since:]:
                if e.kind is kind and e.action == action and (ref is None or e.ref == ref):
                    return e
            assert not self.task.done(), self.task
            await asyncio.sleep(0.05)
        seen = [(e.kind.value, e.action, str(e.ref)) for e in self.events[since:]]
        raise AssertionError(f"no {action} event for {ref} within {timeout} s; seen {seen}")


async def typed_until(session, sink: Sink, line: bytes, wanted: bytes, timeout: float = 120):
    """Type ``line`` every few seconds until ``wanted`` shows (the guest may still boot)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await session.send_bytes(line)
        for _ in range(30):
            if wanted in sink.data:
                return
            await asyncio.sleep(0.1)
    raise AssertionError(f"{wanted!r} never came; the console showed {sink.data[-500:]!r}")


@pytest.fixture(scope="module")
def vlab(request):
    return lab_libvirt.session_lab(request)


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["unix", "ssh"])
async def lv(request, vlab):
    uri = vlab.unix_uri if request.param == "unix" else vlab.ssh_uri()
    backend = get_backend(Remote(name=f"lv-{request.param}", kind="libvirt", address=uri),
                          timeout=10)
    await backend.connect()
    watch = Watch(backend)
    await watch.wait(0, action="connected", kind=EventKind.CONNECTION)
    backend.watcher = watch
    yield backend
    watch.task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await watch.task
    for inst in await backend.list_instances():
        if inst.name.startswith("lvt-"):
            with contextlib.suppress(NotFound):
                await backend.delete(inst.ref, force=True)
    await backend.close()


@pytest.fixture
def domain(vlab, guest, lv):
    """A new stopped test guest on the lab's daemon; its ref on ``lv``'s remote."""
    name = f"lvt-{uuid.uuid4().hex[:6]}"
    lab_libvirt.define(vlab, lab_libvirt.guest_xml(name, *guest))
    return InstanceRef(lv.remote.name, name)


@live
async def test_connect_names_the_server(lv):
    info = await lv.connect()
    assert info.server == "libvirt" and info.version.startswith("9.")
    assert info.server_name and "QEMU" in info.note


@live
async def test_a_defined_domain_is_listed_stopped(lv, domain):
    listed = {i.ref: i for i in await lv.list_instances()}
    assert domain in listed, sorted(map(str, listed))
    inst = listed[domain]
    assert inst.type is InstanceType.VM and inst.status is InstanceStatus.STOPPED
    assert inst.memory_limit == 128 * 2**20 and inst.cpu_limit == "1"
    one = await lv.get_instance(domain)
    assert one.status is InstanceStatus.STOPPED and one.extra["uuid"] == inst.extra["uuid"]
    assert Capability.START in lv.instance_capabilities(one)
    with pytest.raises(NotFound):
        await lv.get_instance(InstanceRef(lv.remote.name, "lvt-missing"))


@live
async def test_start_pause_resume_shutdown_force_with_events(lv, domain):
    w = lv.watcher
    mark = w.mark()
    await lv.start(domain)
    await w.wait(mark, action="instance-started", ref=domain)
    assert (await lv.get_instance(domain)).status is InstanceStatus.RUNNING
    states = await lv.get_states([domain])
    assert states[domain].cpu_usage_ns > 0 and states[domain].memory_limit == 128 * 2**20
    with pytest.raises(Conflict):
        await lv.start(domain)

    mark = w.mark()
    await lv.freeze(domain)
    await w.wait(mark, action="instance-paused", ref=domain)
    assert (await lv.get_instance(domain)).status is InstanceStatus.FROZEN
    assert domain not in await lv.get_states([domain])
    with pytest.raises(Conflict, match="paused"):
        await lv.stop(domain, timeout=2)  # said in words, not libvirt's error
    mark = w.mark()
    await lv.unfreeze(domain)
    await w.wait(mark, action="instance-resumed", ref=domain)
    assert (await lv.get_instance(domain)).status is InstanceStatus.RUNNING

    # busybox init ignores the ACPI power button: the graceful stop times out in time
    started = time.monotonic()
    with pytest.raises(StopTimedOut) as timed_out:
        await lv.stop(domain, timeout=2)
    assert time.monotonic() - started < 10 and "forced off" in str(timed_out.value)
    assert (await lv.get_instance(domain)).status is InstanceStatus.RUNNING
    mark = w.mark()
    await lv.stop(domain, force=True)
    await w.wait(mark, action="instance-stopped", ref=domain)
    assert (await lv.get_instance(domain)).status is InstanceStatus.STOPPED
    assert domain not in await lv.get_states([domain])


@live
async def test_serial_console_answers_and_the_guest_powers_off(lv, domain):
    w = lv.watcher
    await lv.start(domain)
    session = await lv.open_console(domain)
    sink = Sink()
    STARTER.set("the starter")
    await session.start(sink)
    try:
        await typed_until(session, sink, b"echo k$((6*7))\r", b"k42")
        assert b"k42" in await session.history()
        assert sink.contexts == {"the starter"}  # fed in the context that started it
        mark = w.mark()
        await session.send_bytes(b"poweroff -f\r")  # the guest's own shutdown
        await w.wait(mark, action="instance-stopped", ref=domain, timeout=60)
        for _ in range(50):
            if sink.reason:
                break
            await asyncio.sleep(0.1)
        # the end of the pty is an end of stream or, racing with the domain's end, a
        # stream error: either way the pane is told the console is gone
        assert sink.reason is not None and sink.reason.startswith("the console"), sink.reason
    finally:
        await session.close()
    assert (await lv.get_instance(domain)).status is InstanceStatus.STOPPED
    with pytest.raises(Conflict):
        await lv.open_console(domain)  # a stopped domain has no console


@live
async def test_delete_undefines_and_keeps_the_disks(lv, vlab, guest):
    name = f"lvt-{uuid.uuid4().hex[:6]}"
    disk = vlab.root / f"{name}.img"
    subprocess.run(["qemu-img", "create", "-q", "-f", "raw", str(disk), "16M"], check=True)
    lab_libvirt.define(vlab, lab_libvirt.guest_xml(name, *guest, disk=disk))
    ref = InstanceRef(lv.remote.name, name)
    mark = lv.watcher.mark()
    await lv.start(ref)
    with pytest.raises(Conflict):
        await lv.delete(ref)
    await lv.delete(ref, force=True)
    await lv.watcher.wait(mark, action="instance-deleted", ref=ref)
    with pytest.raises(NotFound):
        await lv.get_instance(ref)
    assert ref not in {i.ref for i in await lv.list_instances()}
    assert disk.stat().st_size == 16 * 2**20
    disk.unlink()
