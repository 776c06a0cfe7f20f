"""A libvirt remote on bad days, against the suite's private libvirtd: SSH host keys
pinned (a changed or unknown key refused in words, at once), a host that would ask for a
password reported instead of waited for, and a daemon that dies or stops answering seen
as ``disconnected``/``not-responding`` and followed again by itself when it is back.

These tests kill and stop the lab's daemon: they run in their own module, after which the
daemon is running again."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
import uuid

import pytest

import lab_libvirt
from backends import get_backend
from backends.errors import AuthError, Unreachable
from backends.models import EventKind, InstanceRef, InstanceStatus, Remote

live = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def vlab(request):
    return lab_libvirt.session_lab(request)


def _backend(uri: str, name: str = "lvr"):
    return get_backend(Remote(name=name, kind="libvirt", address=uri), timeout=10)


async def _refused(uri: str) -> AuthError:
    backend = _backend(uri)
    started = time.monotonic()
    try:
        with pytest.raises(AuthError) as refused:
            await backend.connect()
    finally:
        await backend.close()
    assert time.monotonic() - started < 10, "a prompt was waited for"
    return refused.value


@live
async def test_a_changed_host_key_is_refused_in_words(vlab):
    err = await _refused(vlab.ssh_uri(known_hosts=vlab.ssh / "known_hosts_changed"))
    assert "127.0.0.1" in err.message and "not the one pinned" in err.message
    assert "known_hosts_changed" in err.message


@live
async def test_an_unknown_host_key_is_refused_not_accepted(vlab):
    err = await _refused(vlab.ssh_uri(known_hosts=vlab.ssh / "known_hosts_empty"))
    assert "not known" in err.message
    assert (vlab.ssh / "known_hosts_empty").read_text() == ""  # nothing was added


@live
async def test_the_ssh_program_refuses_a_host_key_it_cannot_verify_without_asking(vlab):
    """Without known_hosts= the ``ssh`` program runs in batch mode: the lab's host key is in
    no known_hosts of this user, so ssh refuses it at once instead of asking."""
    uri = f"qemu+ssh://root@127.0.0.1:{vlab.port}/system?keyfile={vlab.ssh / 'id_ed25519'}"
    err = await _refused(uri)
    assert "host key of root@127.0.0.1" in err.message and "is not known" in err.message


@live
async def test_a_host_that_asks_for_a_password_is_reported(vlab):
    err = await _refused(vlab.ssh_uri(keyfile=vlab.ssh / "stranger_ed25519"))
    assert "password" in err.message and "never types" in err.message


@live
async def test_no_daemon_is_unreachable_in_words(tmp_path):
    backend = _backend(f"qemu+unix:///system?socket={tmp_path}/none-sock")
    try:
        with pytest.raises(Unreachable) as gone:
            await backend.connect()
    finally:
        await backend.close()
    assert "Cannot connect to libvirt" in gone.value.message


async def _wait(events: list, since: int, action: str, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for e in events[since:]:
            if e.kind is EventKind.CONNECTION and e.action == action:
                return e
        await asyncio.sleep(0.1)
    raise AssertionError(f"no {action} within {timeout} s: "
                         f"{[(e.kind.value, e.action, e.message) for e in events[since:]]}")


@live
@pytest.mark.parametrize("transport", ["unix", "ssh"])
async def test_a_daemon_that_stops_answering_or_dies_comes_back_by_itself(
        vlab, guest, transport):
    name = f"lvr-{uuid.uuid4().hex[:6]}"
    lab_libvirt.define(vlab, lab_libvirt.guest_xml(name, *guest))
    uri = vlab.unix_uri if transport == "unix" else vlab.ssh_uri()
    backend = _backend(uri)
    ref = InstanceRef(backend.remote.name, name)
    events: list = []

    async def pump():
        async for event in backend.watch():
            events.append(event)

    task = asyncio.ensure_future(pump())
    try:
        await _wait(events, 0, "connected", 20)
        await backend.start(ref)

        # stopped (SIGSTOP): keepalive finds it; no call hangs past the time-out
        mark = len(events)
        os.kill(vlab.daemon.pid, signal.SIGSTOP)
        try:
            lost = await _wait(events, mark, "not-responding", 40)
            assert "not responding" in lost.message
        finally:
            os.kill(vlab.daemon.pid, signal.SIGCONT)
        await _wait(events, mark, "connected", 40)
        assert (await backend.get_instance(ref)).status is InstanceStatus.RUNNING

        # killed: the domain keeps running, the remote is followed again once it is back
        mark = len(events)
        vlab.kill_daemon()
        gone = await _wait(events, mark, "disconnected", 20)
        assert gone.message
        with pytest.raises(Unreachable):
            await backend.list_instances()
        await asyncio.sleep(1)
        vlab.start_daemon()
        await _wait(events, mark, "connected", 40)
        assert (await backend.get_instance(ref)).status is InstanceStatus.RUNNING
        mark = len(events)
        await backend.stop(ref, force=True)
        for _ in range(100):  # the events of the new connection arrive
            if any(e.ref == ref and e.action == "instance-stopped" for e in events[mark:]):
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("no stopped event after reconnecting")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        with contextlib.suppress(Exception):
            await backend.delete(ref, force=True)
        await backend.close()
