"""Moving a libvirt domain to another libvirt remote (``copy_to`` with ``move``) between the
suite's two lab hosts (``tests/lab_libvirt.py``: ``vlab`` and ``vlab2``, each its own
libvirtd with its own host UUID, hostname, mount namespace and ``default`` pool on its own
``/var/lib/libvirt/images``): a running domain moves live with its disk copied and its
guest runs on (what it held in memory is there, its uptime went on), read back with
``virsh`` on both hosts; a cancelled move leaves it running at the source and nothing on
the destination; a shut-off domain moves shut off; the refusals are in words with nothing
changed; a move between two ``qemu+ssh://`` remotes works the same."""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
import uuid

import pytest
import pytest_asyncio

import lab_libvirt
from backends import get_backend
from backends.errors import Conflict, InvalidInput, Unsupported
from backends.fake import FakeBackend
from backends.models import InstanceRef, InstanceStatus, Remote

from .libvirt_helpers import connected

live = pytest.mark.asyncio(loop_scope="module")
PREFIX = "lvm-"


@pytest.fixture(scope="module")
def vlab(request):
    return lab_libvirt.session_lab(request)


@pytest.fixture(scope="module")
def vlab2(request):
    return lab_libvirt.session_lab(request, second=True)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def here(vlab):
    async with connected(vlab, "lvm-a", PREFIX) as backend:
        yield backend


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def there(vlab2):
    async with connected(vlab2, "lvm-b", PREFIX) as backend:
        yield backend


@pytest.fixture
def images(vlab, vlab2):
    """The disk files the test leaves in either host's pool are removed after it."""
    yield
    for lab in (vlab, vlab2):
        for disk in lab.images.glob(f"{PREFIX}*"):
            disk.unlink()


def virsh(lab, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["virsh", "-c", lab.unix_uri, *args], capture_output=True,
                          text=True, check=check)


def define(lab, guest, *, shared: bool = False, **xml) -> str:
    """A new shut-off test guest on ``lab`` with a qcow2 disk in its own pool (or, with
    ``shared``, in the lab's directory, which the other lab host sees too)."""
    name = f"{PREFIX}{uuid.uuid4().hex[:6]}"
    local = (lab.root if shared else lab.images) / f"{name}.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(local), "16M"], check=True)
    path = local if shared else f"/var/lib/libvirt/images/{name}.qcow2"
    lab_libvirt.define(lab, lab_libvirt.guest_xml(name, *guest, disks=((path, "qcow2"),),
                                                  **xml))
    return name


def state(lab, name: str) -> str:
    """``virsh domstate`` of ``name`` on ``lab`` ("" when it has no such domain)."""
    done = virsh(lab, "domstate", name, check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


class Console:
    """The guest's serial console, to ask it things."""

    def __init__(self) -> None:
        self.data = b""
        self.reason: str | None = None

    def feed(self, data: bytes) -> None:
        self.data += data

    def closed(self, reason: str) -> None:
        self.reason = reason


async def ask(backend, ref: InstanceRef, command: str, pattern: bytes,
              timeout: float = 120) -> re.Match:
    """Type ``command`` on the console until its output matches ``pattern`` (the guest may
    still boot)."""
    session = await backend.open_console(ref)
    sink = Console()
    await session.start(sink)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            await session.send_bytes(command.encode() + b"\r")
            for _ in range(30):
                found = re.search(pattern, sink.data)
                if found:
                    return found
                await asyncio.sleep(0.1)
        raise AssertionError(f"{pattern!r} never came; the console showed {sink.data[-500:]!r}")
    finally:
        await session.close()


UPTIME = "echo up$(cut -d. -f1 /proc/uptime)=$(cat /tmp/kept)"
"""Asks the guest its uptime in seconds and what it keeps in RAM (its initramfs)."""


@live
async def test_a_running_domain_moves_live_with_its_disk(here, there, vlab, vlab2, guest,
                                                        images):
    """Its console answers before, during and after the move; what it kept in memory and
    its uptime go on at B."""
    name = define(vlab, guest)
    ref = InstanceRef(here.remote.name, name)
    inst = await here.get_instance(ref)
    await here.start(ref)
    # read back in the same line: a line typed while the guest boots may lose characters
    # in the UART (its 16-byte FIFO), and 'k42' alone came once with nothing written
    await ask(here, ref, "echo kept-$((6*7)) > /tmp/kept; echo k$(cat /tmp/kept)",
              rb"kkept-42")
    before = int((await ask(here, ref, UPTIME, rb"up(\d+)=kept-42")).group(1))
    running = await here.get_instance(ref)
    assert here.live_move_to_problem(running, there) is None  # the UI moves it running
    said: list[str] = []
    # its console stays open through the move, which goes slowly until the guest has
    # answered on it while its copy waits, paused, on B
    session = await here.open_console(ref)
    sink = Console()
    await session.start(sink)
    virsh(vlab, "migrate-setspeed", name, "2")  # MiB/s
    move = asyncio.ensure_future(here.copy_to(ref, there, name, move=True,
                                              progress=said.append))
    try:
        for _ in range(300):
            if state(vlab2, name) == "paused" or move.done():
                break
            await asyncio.sleep(0.1)
        assert state(vlab2, name) == "paused" and state(vlab, name) == "running", said
        for _ in range(50):
            await session.send_bytes(b"echo during-$((6*8))\r")
            await asyncio.sleep(0.3)
            if b"during-48" in sink.data:
                break
        assert b"during-48" in sink.data, sink.data[-300:]
        assert state(vlab2, name) == "paused", "the move ended before the guest answered"
        virsh(vlab, "migrate-setspeed", name, "100000")  # the rest at full speed
        moved = await asyncio.wait_for(move, 300)
    finally:
        if not move.done():
            move.cancel()
        await session.close()

    assert moved.ref == InstanceRef(there.remote.name, name)
    assert moved.status is InstanceStatus.RUNNING and moved.extra["uuid"] == inst.extra["uuid"]
    assert state(vlab2, name) == "running" and state(vlab, name) == ""
    assert "--persistent" not in virsh(vlab2, "list", "--all", "--transient").stdout
    assert name in virsh(vlab2, "list", "--all", "--persistent", "--name").stdout.split()
    assert (vlab2.images / f"{name}.qcow2").exists()  # its disk copied into B's pool
    assert said and said[0] == "copying memory", said  # first tried as shared storage
    assert any(s.startswith("moving") for s in said), said
    # the same guest, running on: what it held in memory is there, its uptime went on
    after = int((await ask(there, moved.ref, UPTIME, rb"up(\d+)=kept-42")).group(1))
    assert after >= before
    await there.delete(moved.ref, force=True)


@live
async def test_a_cancelled_move_leaves_it_running_at_the_source(here, there, vlab, vlab2,
                                                               guest, images):
    name = define(vlab, guest)
    ref = InstanceRef(here.remote.name, name)
    await here.start(ref)
    virsh(vlab, "migrate-setspeed", name, "1")  # 1 MiB/s: the move takes minutes
    said: list[str] = []
    move = asyncio.ensure_future(here.copy_to(ref, there, name, move=True,
                                              progress=said.append))
    for _ in range(100):
        if "copying disks and memory" in said and state(vlab2, name):
            break  # under way: its copy is on B, paused, waiting for the rest
        await asyncio.sleep(0.1)
    assert state(vlab2, name) == "paused", said
    move.cancel()
    with pytest.raises(asyncio.CancelledError):
        await move
    assert state(vlab, name) == "running" and state(vlab2, name) == ""
    assert virsh(vlab, "dominfo", name).stdout.count("Persistent:     yes") == 1
    assert not (vlab2.images / f"{name}.qcow2").exists()  # libvirt's disk copy removed
    assert (await here.get_instance(ref)).status is InstanceStatus.RUNNING
    await here.delete(ref, force=True)


@live
async def test_a_shut_off_domain_moves_shut_off_under_a_new_name(here, there, vlab, vlab2,
                                                                guest, images):
    name = define(vlab, guest)
    ref = InstanceRef(here.remote.name, name)
    moved = await here.copy_to(ref, there, f"{name}-b", move=True)
    assert moved.ref == InstanceRef(there.remote.name, f"{name}-b")
    assert moved.status is InstanceStatus.STOPPED
    assert state(vlab2, f"{name}-b") == "shut off" and state(vlab, name) == ""
    assert (vlab2.images / f"{name}.qcow2").exists()
    await there.delete(moved.ref)


@live
async def test_the_refusals_in_words_change_nothing(here, there, vlab, vlab2, guest, images):
    name = define(vlab, guest)
    ref = InstanceRef(here.remote.name, name)
    fake = FakeBackend(Remote(name="elsewhere", kind="fake", address=""))
    assert "only to another libvirt remote" in here.live_move_to_problem(
        await here.get_instance(ref), fake)
    with pytest.raises(Unsupported, match="only to another libvirt remote"):
        await here.copy_to(ref, fake, name, move=True)
    with pytest.raises(Unsupported, match="does not copy a domain to another host"):
        await here.copy_to(ref, there, name)

    taken = define(vlab2, guest)
    with pytest.raises(Conflict, match=f"already has a domain named {taken}"):
        await here.copy_to(ref, there, taken, move=True)

    virsh(vlab, "snapshot-create-as", name, "one")
    with pytest.raises(Conflict, match="1 snapshot: libvirt does not move snapshots"):
        await here.copy_to(ref, there, name, move=True)
    virsh(vlab, "snapshot-delete", name, "one")

    # the same host (the same name) under two remotes
    async with connected(vlab, "lvm-a2", PREFIX + "none-") as again:
        with pytest.raises(InvalidInput, match="have the same host name"):
            await here.copy_to(ref, again, name, move=True)

    # a disk where the far host has no pool to copy it into: refused before anything moves
    odd = define(vlab, guest, shared=True)
    odd_ref = InstanceRef(here.remote.name, odd)
    await here.start(odd_ref)
    with pytest.raises(InvalidInput, match=f"has no storage pool for {vlab.root}"):
        await here.copy_to(odd_ref, there, odd, move=True)
    assert state(vlab, odd) == "running" and state(vlab2, odd) == ""
    await here.delete(odd_ref, force=True)
    (vlab.root / f"{odd}.qcow2").unlink()

    assert state(vlab, name) == "shut off" and state(vlab2, name) == ""
    assert (await here.get_instance(ref)).status is InstanceStatus.STOPPED


@live
async def test_a_move_between_ssh_remotes(vlab, vlab2, guest, images):
    """Both remotes over ``qemu+ssh://`` (each lab host's sshd): the move's own connections
    go the same way."""
    name = define(vlab, guest)
    backends = [get_backend(Remote(name=f"lvm-ssh-{i}", kind="libvirt",
                                   address=lab.ssh_uri()), timeout=10)
                for i, lab in enumerate((vlab, vlab2))]
    for backend in backends:
        await backend.connect()
    a, b = backends
    try:
        ref = InstanceRef(a.remote.name, name)
        await a.start(ref)
        moved = await a.copy_to(ref, b, name, move=True)
        assert moved.status is InstanceStatus.RUNNING
        assert state(vlab2, name) == "running" and state(vlab, name) == ""
        await b.delete(moved.ref, force=True)
    finally:
        for backend in backends:
            await backend.close()
