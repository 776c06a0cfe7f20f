"""Fixtures shared by the QEMU backend tests (real QEMU under TCG)."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

import qemu_guest  # tests/ is on sys.path (tests/conftest.py)
from backends.qemu import QEMUBackend, qemu_remote


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
