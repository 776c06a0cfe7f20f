"""Fixtures shared by the backend tests: QEMU (real QEMU under TCG), the lab's LXD/Incus
daemons and LXC in a private lxcpath."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

import qemu_guest  # tests/ is on sys.path (tests/conftest.py)
from backend_checks import REMOTES, daemon_for
from backends import get_backend
from backends.lxc import LXCBackend, lxc_remotes
from backends.qemu import QEMUBackend, qemu_remote
from backends.remotes import discover


@pytest.fixture(scope="session")
def guest():
    """(kernel, initrd) of the test guest; QEMU missing fails, never skips."""
    if shutil.which("qemu-system-x86_64") is None or shutil.which("qemu-img") is None:
        pytest.fail("QEMU is not installed (run scripts/setup-lab.sh)", pytrace=False)
    return qemu_guest.guest()


@pytest.fixture
async def qemu(tmp_path, monkeypatch):
    """A connected QEMUBackend on a private data dir; its VMs are killed afterwards."""
    run = Path(f"/tmp/cq-{os.getpid()}-{tmp_path.name[-6:]}")  # short: unix socket paths
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    backend = QEMUBackend(qemu_remote(str(tmp_path / "vms")), timeout=10)
    info = await backend.connect()
    assert info.server == "qemu" and info.version
    yield backend
    for name in list(backend.vms.names()):
        pid = backend.vms.pid(name)
        if pid:
            os.kill(pid, signal.SIGKILL)
    await backend.close()
    shutil.rmtree(run, ignore_errors=True)


@pytest.fixture(params=REMOTES)
async def remote_backend(request, lab, lab_env):
    """(remote name, connected backend, its ServerInfo, the lab daemon behind it), once for
    each of the lab's remotes."""
    remotes = {r.name: r for r in discover(lab_env).remotes}
    backend = get_backend(remotes[request.param], timeout=10)
    info = await backend.connect()
    yield request.param, backend, info, daemon_for(lab, request.param)
    await backend.close()


@pytest.fixture
async def lxc_backend(lxc_path):
    """A connected LXCBackend on the private lxcpath of ``lxc_path``."""
    b = LXCBackend(lxc_remotes([str(lxc_path)])[0], timeout=10)
    info = await b.connect()
    assert info.server == "lxc" and info.version
    yield b
    await b.close()
