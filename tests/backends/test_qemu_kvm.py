"""KVM that is there but broken, with real QEMU started with accel kvm on this host (nested
virtualisation: the guest hangs, or QEMU aborts in kvm_buf_set_msrs): corral says so,
remembers the host fallback, and the next start runs under TCG."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from qemu_guest import wait_serial

from backends.errors import AcceleratorUnusable
from backends.models import InstanceRef
from backends.qemu import QEMUBackend
from backends.qemu.kvm import FALLBACK, HostFallback, kvm_error

from .test_qemu_backend import next_event

ROOT = Path(__file__).resolve().parents[2]


def accel_of(pid: int) -> str:
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return argv[argv.index(b"-accel") + 1].decode()


def run_refused(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def test_kvm_errors_are_recognised():
    assert kvm_error("qemu-system-x86_64: ../target/i386/kvm/kvm.c:3000: kvm_buf_set_msrs: "
                     "Assertion `ret == cpu->kvm_msr_buf->nmsrs' failed.")
    assert kvm_error("Could not access KVM kernel module: Permission denied\n"
                     "qemu-system-x86_64: failed to initialize kvm: Permission denied")
    assert not kvm_error("qemu-system-x86_64: -drive file=x: Could not open 'x'")


def test_fallback_holds_for_this_kernel_and_qemu_only(tmp_path):
    fb = HostFallback(tmp_path, "10.0.2")
    assert fb.reason() == ""
    fb.remember("QEMU ended 1 s after starting with KVM")
    assert "ended" in fb.reason()
    assert HostFallback(tmp_path, "11.0.0").reason() == ""  # a new QEMU: try KVM again
    (tmp_path / FALLBACK).write_text('{"kernel": "other", "reason": "x"}')
    assert fb.reason() == ""


async def test_hanging_kvm_guest_is_reported_and_the_next_start_uses_tcg(qemu, guest):
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        pytest.fail("/dev/kvm is missing: this test needs a host whose KVM is broken",
                    pytrace=False)
    kernel, initrd = guest
    await qemu.create("kvmvm", kernel=str(kernel), initrd=str(initrd), memory_mib=256,
                      cmdline="console=ttyS0", accel="auto")
    ref = InstanceRef("qemu", "kvmvm")
    stream = qemu.watch()
    assert (await anext(stream)).action == "connected"
    try:
        started = time.monotonic()
        try:
            await qemu.start(ref)
        except AcceleratorUnusable as e:
            # QEMU 10 on this host may abort (kvm_buf_set_msrs) before it detaches, rather
            # than hang after: the start itself says so, and remembers the host's fallback
            assert e.retry_slower
            assert "KVM does not work on this host" in e.message and FALLBACK in e.message
            print(f"broken KVM refused at the start ({time.monotonic() - started:.1f} s)")
        else:
            assert accel_of(qemu.vms.pid("kvmvm")) == "kvm"
            ev = await next_event(stream, ref, {"instance-updated", "instance-stopped"},
                                  timeout=40)
            detect = time.monotonic() - started
            assert "KVM does not work on this host" in ev.message
            note = (await qemu.get_instance(ref)).extra["reason"]
            assert "TCG" in note and FALLBACK in note
            print(f"broken KVM detected {detect:.1f} s after the start ({ev.action})")
            await qemu.stop(ref, force=True)
        await qemu.start(ref)  # the host fallback: TCG this time
        assert accel_of(qemu.vms.pid("kvmvm")) == "tcg"
        await wait_serial(qemu, "kvmvm", "corral-guest ready")
        # a new corral on the same host remembers it
        again = QEMUBackend(qemu.remote, timeout=10)
        await again.connect()
        assert again.vms.accel(again.vms.definition("kvmvm")) == "tcg"
        await again.close()
    finally:
        await stream.aclose()


async def test_kvm_refused_at_start_offers_tcg(guest, tmp_path, monkeypatch):
    """QEMU itself refusing KVM (here: /dev/kvm replaced by /dev/null in a private mount
    namespace, so QEMU's KVM_GET_API_VERSION fails)."""
    kernel, initrd = guest
    monkeypatch.setenv("XDG_RUNTIME_DIR", f"/tmp/cq-kvm-{os.getpid()}")
    vms = tmp_path / "vms"
    code = f"""
import asyncio, sys
sys.path.insert(0, {str(ROOT)!r})
from backends.errors import AcceleratorUnusable
from backends.qemu import QEMUBackend, qemu_remote
from backends.models import InstanceRef
async def main():
    b = QEMUBackend(qemu_remote({str(vms)!r}), timeout=10)
    await b.connect()
    await b.create("refused", kernel={str(kernel)!r}, initrd={str(initrd)!r}, memory_mib=128,
                   cmdline="console=ttyS0", accel="auto")
    try:
        await b.start(InstanceRef("qemu", "refused"))
        print("STARTED")
    except AcceleratorUnusable as e:
        print("UNUSABLE", e.retry_slower, e.message)
    await b.start(InstanceRef("qemu", "refused"))
    print("ACCEL", b.vms.accel(b.vms.definition("refused")))
    await b.stop(InstanceRef("qemu", "refused"), force=True)
    await b.close()
asyncio.run(main())
"""
    script = tmp_path / "refused.py"
    script.write_text(code)
    out = run_refused(["unshare", "-m", "sh", "-c",
                       f"mount --bind /dev/null /dev/kvm && exec {sys.executable} {script}"])
    assert "UNUSABLE True" in out.stdout, out.stdout + out.stderr
    assert "could not start qemu:refused with KVM" in out.stdout
    assert "ACCEL tcg" in out.stdout
    shutil.rmtree(f"/tmp/cq-kvm-{os.getpid()}", ignore_errors=True)


def test_error_type_carries_the_offer():
    assert AcceleratorUnusable("x", retry_slower=True).retry_slower
