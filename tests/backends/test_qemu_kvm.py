"""KVM with the users' default accelerator ('auto'): used and kept where it works, TCG at
once without /dev/kvm, and where it is there but broken (nested virtualisation: the guest
hangs, or QEMU aborts in kvm_buf_set_msrs) corral says so, remembers the host fallback, and
the next start runs under TCG. This host's own case runs for real; the others by fault
injection (a qemu-system-x86_64 wrapper on PATH, tests/backends/kvm_hosts.py)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from qemu_guest import wait_serial

from backends.errors import AcceleratorUnusable
from backends.models import InstanceRef, InstanceStatus
from backends.qemu import QEMUBackend, launcher
from backends.qemu.kvm import FALLBACK, SILENT_BOOT, HostFallback, kvm_error

from .kvm_hosts import accels, fake_kvm, host_kvm
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


async def _auto_vm(qemu, guest, name):
    """A VM with the users' default accelerator ('auto'), and the backend's event stream."""
    kernel, initrd = guest
    await qemu.create(name, kernel=str(kernel), initrd=str(initrd), memory_mib=256,
                      cmdline="console=ttyS0", accel="auto")
    stream = qemu.watch()
    assert (await anext(stream)).action == "connected"
    return InstanceRef("qemu", name), stream


async def _no_kvm_complaint(stream, ref, within):
    """No event for ``ref`` blames KVM within ``within`` seconds (the silent-boot watch had
    its chance to misfire)."""
    deadline = time.monotonic() + within
    while (left := deadline - time.monotonic()) > 0:
        try:
            ev = await asyncio.wait_for(anext(stream), left)
        except asyncio.TimeoutError:
            return
        assert not (ev.ref == ref and "KVM" in (ev.message or "")), ev.message


async def _kvm_used_and_kept(qemu, ref, stream, accel_seen):
    """Working KVM: the guest boots with it, nothing blames KVM, no fallback is remembered."""
    await qemu.start(ref)
    assert accel_seen() == "kvm"
    await wait_serial(qemu, ref.name, "corral-guest ready")
    await _no_kvm_complaint(stream, ref, SILENT_BOOT + 2)
    assert (await qemu.get_instance(ref)).status is InstanceStatus.RUNNING
    assert qemu.launcher.kvm.fallback.reason() == ""
    again = QEMUBackend(qemu.remote, timeout=10)
    await again.connect()
    assert again.launcher.accel(again.vms.definition(ref.name)) == "kvm"
    await again.close()
    await qemu.stop(ref, force=True)


async def _kvm_found_broken(qemu, ref, stream, how, accel_seen):
    """Broken KVM (``how``: "aborts" or "hangs"): corral says so, remembers the host fallback,
    the next start runs under TCG and a new corral on the same host remembers it."""
    started = time.monotonic()
    try:
        await qemu.start(ref)
    except AcceleratorUnusable as e:
        # QEMU aborts before it detaches (QEMU 10 here): the start itself says so
        assert how == "aborts", f"a guest that {how} under KVM refused at the start: {e}"
        assert e.retry_slower
        assert "KVM does not work on this host" in e.message and FALLBACK in e.message
        print(f"broken KVM refused at the start ({time.monotonic() - started:.1f} s)")
    else:
        # a hanging guest (QEMU 7.2 here) is found by its silent serial port; an abort after
        # QEMU detached, by its early exit: either way an event says so
        assert accel_seen() == "kvm"
        ev = await next_event(stream, ref, {"instance-updated", "instance-stopped"},
                              timeout=SILENT_BOOT + 30)
        assert "KVM does not work on this host" in ev.message
        if how == "hangs":
            assert "printed nothing on its serial console" in ev.message
        note = (await qemu.get_instance(ref)).extra["reason"]
        assert "TCG" in note and FALLBACK in note
        print(f"broken KVM found {time.monotonic() - started:.1f} s after the start")
        await qemu.stop(ref, force=True)
    assert qemu.launcher.kvm.fallback.reason()
    await qemu.start(ref)  # the host fallback: TCG this time
    assert accel_seen() == "tcg"
    await wait_serial(qemu, ref.name, "corral-guest ready")
    again = QEMUBackend(qemu.remote, timeout=10)
    await again.connect()
    assert again.launcher.accel(again.vms.definition(ref.name)) == "tcg"
    await again.close()
    await qemu.stop(ref, force=True)


async def test_this_hosts_kvm_as_it_is(qemu, guest):
    """The path this host has, for real: what KVM does here is found by booting the guest
    with the real QEMU and -accel kvm (kvm_hosts.host_kvm, no corral code), and corral's
    'auto' must then do the one right thing: TCG without /dev/kvm; KVM, kept, when it works;
    a report and the TCG fallback when it aborts or hangs (this host: QEMU 10 aborts in
    kvm_buf_set_msrs, QEMU 7.2 hangs after "Probing EDD")."""
    kernel, initrd = guest
    how = host_kvm(str(kernel), str(initrd))
    print(f"this host's KVM {how}")
    ref, stream = await _auto_vm(qemu, guest, "hostkvm")

    def accel_seen():
        return accel_of(qemu.vms.pid(ref.name))

    try:
        if how == "absent":
            await qemu.start(ref)
            assert accel_seen() == "tcg"
            await wait_serial(qemu, ref.name, "corral-guest ready")
            assert qemu.launcher.kvm.fallback.reason() == ""
        elif how == "works":
            await _kvm_used_and_kept(qemu, ref, stream, accel_seen)
        else:
            await _kvm_found_broken(qemu, ref, stream, how, accel_seen)
    finally:
        await stream.aclose()


@pytest.mark.parametrize("how", ["aborts", "hangs"])
async def test_broken_kvm_is_reported_and_the_next_start_uses_tcg(qemu, guest, tmp_path,
                                                                  monkeypatch, how):
    """Fault injection, on any host: a QEMU wrapper that, asked for KVM, aborts in
    kvm_buf_set_msrs as QEMU 10 does here, or runs a guest that never prints (a hang); and
    /dev/kvm reported usable (corral's own check), so 'auto' tries KVM first."""
    log = fake_kvm(tmp_path / "bin", how, monkeypatch)
    monkeypatch.setattr(launcher, "kvm_usable", lambda: True)
    ref, stream = await _auto_vm(qemu, guest, f"kvm{how}")
    try:
        await _kvm_found_broken(qemu, ref, stream, how, lambda: accels(log)[-1])
        assert accels(log) == ["kvm", "tcg"]
    finally:
        await stream.aclose()


async def test_working_kvm_is_used_and_no_fallback_is_remembered(qemu, guest, tmp_path,
                                                                 monkeypatch):
    """The users' default on a host whose KVM works, by fault injection on any host: the
    wrapper runs what corral starts with -accel kvm under TCG (this host's KVM cannot run the
    guest); corral asked for KVM, the guest boots, the silent-boot watch does not misfire."""
    log = fake_kvm(tmp_path / "bin", "works", monkeypatch)
    monkeypatch.setattr(launcher, "kvm_usable", lambda: True)
    ref, stream = await _auto_vm(qemu, guest, "kvmworks")
    try:
        await _kvm_used_and_kept(qemu, ref, stream, lambda: accels(log)[-1])
        assert accels(log) == ["kvm"]
    finally:
        await stream.aclose()


async def test_without_dev_kvm_auto_is_tcg_and_never_asks_for_kvm(qemu, guest, tmp_path,
                                                                  monkeypatch):
    """A host without /dev/kvm, by fault injection on any host: corral's check reports no
    device, and the wrapper refuses KVM as QEMU does there; 'auto' starts TCG at once."""
    log = fake_kvm(tmp_path / "bin", "absent", monkeypatch)
    monkeypatch.setattr(launcher, "kvm_usable", lambda: False)
    ref, stream = await _auto_vm(qemu, guest, "nokvm")
    try:
        await qemu.start(ref)
        await wait_serial(qemu, ref.name, "corral-guest ready")
        assert accels(log) == ["tcg"]
        assert qemu.launcher.kvm.fallback.reason() == ""
        await qemu.stop(ref, force=True)
    finally:
        await stream.aclose()


async def test_kvm_refused_at_start_offers_tcg(guest, tmp_path, monkeypatch):
    """QEMU itself refusing KVM: where /dev/kvm exists, for real (it is replaced by /dev/null
    in a private mount namespace, so QEMU's KVM_GET_API_VERSION fails); where it does not,
    by fault injection (/dev/kvm reported usable to corral, a QEMU wrapper refusing KVM as
    QEMU does without the device)."""
    kernel, initrd = guest
    real = os.path.exists("/dev/kvm")
    if not real:
        fake_kvm(tmp_path / "bin", "absent", monkeypatch)
    monkeypatch.setenv("XDG_RUNTIME_DIR", f"/tmp/cq-kvm-{os.getpid()}")
    vms = tmp_path / "vms"
    code = f"""
import asyncio, sys
sys.path.insert(0, {str(ROOT)!r})
from backends.errors import AcceleratorUnusable
from backends.qemu import QEMUBackend, qemu_remote
from backends.models import InstanceRef
from backends.qemu import launcher
if {not real!r}:
    launcher.kvm_usable = lambda: True
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
    print("ACCEL", b.launcher.accel(b.vms.definition("refused")))
    await b.stop(InstanceRef("qemu", "refused"), force=True)
    await b.close()
asyncio.run(main())
"""
    script = tmp_path / "refused.py"
    script.write_text(code)
    if real:
        out = run_refused(["unshare", "-m", "sh", "-c",
                           f"mount --bind /dev/null /dev/kvm && exec {sys.executable} {script}"])
    else:
        out = run_refused([sys.executable, str(script)])
    assert "UNUSABLE True" in out.stdout, out.stdout + out.stderr
    assert "could not start qemu:refused with KVM" in out.stdout
    assert "ACCEL tcg" in out.stdout
    shutil.rmtree(f"/tmp/cq-kvm-{os.getpid()}", ignore_errors=True)


def test_error_type_carries_the_offer():
    assert AcceleratorUnusable("x", retry_slower=True).retry_slower
