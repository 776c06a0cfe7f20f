"""A libvirt remote in corral's inventory (``tui/services/inventory.py``, the service the
table is drawn from), over qemu+ssh to the private libvirt: its domains are listed, a verb
shows its outcome through the lifecycle events, and a daemon that stops answering is
``not responding`` and then connected again by itself."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid

import pytest

import lab_libvirt
from backends.models import ConnectionState, InstanceRef, InstanceStatus, Remote


async def _until(check, timeout: float, what):
    """Until ``check()``; after ``timeout`` s an AssertionError with ``what`` (text, or a
    function giving it then)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not within {timeout} s: {what() if callable(what) else what}")


@pytest.fixture(scope="module")
def vlab(request):
    return lab_libvirt.session_lab(request)


async def test_inventory_lists_follows_and_survives_a_silent_daemon(vlab, guest):
    from tui.services.inventory import Inventory

    name = f"lvi-{uuid.uuid4().hex[:6]}"
    lab_libvirt.define(vlab, lab_libvirt.guest_xml(name, *guest))
    remote = Remote(name="server", kind="libvirt", address=vlab.ssh_uri())
    changes: list[str] = []
    inv = Inventory([remote], on_change=lambda r, refs: changes.append(r), reconnect_cap=2)
    ref = InstanceRef("server", name)
    task = asyncio.ensure_future(inv.run_remote("server"))
    status = inv.statuses["server"]
    try:
        await _until(lambda: status.state is ConnectionState.CONNECTED and ref in inv.instances,
                     30, f"listed ({status.state}, {status.message})")
        assert inv.instances[ref].status is InstanceStatus.STOPPED
        assert status.server is not None and status.server.server == "libvirt"

        await inv.act(ref, "start", "starting…")
        await _until(lambda: inv.instances[ref].status is InstanceStatus.RUNNING, 20,
                     "running after start")
        # the lifecycle event comes on its own, maybe after the read that follows the verb
        await _until(lambda: any(what == "started" for _, what in inv.history.get(ref, ())),
                     10, f"the started event ({inv.history.get(ref)})")

        os.kill(vlab.daemon.pid, signal.SIGSTOP)
        try:
            await _until(lambda: status.state is ConnectionState.NOT_RESPONDING, 40,
                         f"not responding ({status.state}, {status.message})")
            assert "not responding" in status.message
        finally:
            os.kill(vlab.daemon.pid, signal.SIGCONT)
        try:
            await _until(lambda: status.state is ConnectionState.CONNECTED, 40,
                         lambda: f"connected again ({status.state}, {status.message}); "
                                 f"{vlab.daemon_report()}")
        finally:
            # libvirtd died once after SIGCONT (in CI, under load; cause unknown): this
            # test then fails with its report, and the next tests of this module get the
            # daemon back instead of failing one after another on its socket
            if vlab.daemon is not None and vlab.daemon.poll() is not None:
                vlab.start_daemon()
        await inv.act(ref, "stop", "stopping…", force=True)
        await _until(lambda: inv.instances[ref].status is InstanceStatus.STOPPED, 20,
                     "stopped after the reconnect")
        await inv.act(ref, "delete", "deleting…")
        await _until(lambda: ref not in inv.instances, 20, "gone after delete")
    finally:
        task.cancel()
        await inv.close()
