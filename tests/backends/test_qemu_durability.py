"""Durability of QEMU VM definitions against real QEMU, qemu-img and real kill -9: a corral
killed while it writes a definition, renames, creates or exports a VM leaves the
definitions intact and nothing behind after the next start; a full disk is reported in
words with nothing half-made; a VM's process is found by exact command-line match."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from backends.errors import Conflict, OperationFailed
from backends.models import InstanceRef, InstanceStatus
from backends.qemu import QEMUBackend, qemu_remote
from backends.qemu.definition import VMDefinition, qcow2_backing
from backends.qemu.machines import is_vm_process

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import asyncio, sys
sys.path.insert(0, {root!r})
from backends.qemu import QEMUBackend, qemu_remote
from backends.models import InstanceRef

async def main():
    b = QEMUBackend(qemu_remote({vms!r}), timeout=10)
    await b.connect()
    print("ready", flush=True)
{body}

asyncio.run(main())
"""


def child(vms: Path, body: str, env: dict | None = None) -> subprocess.Popen:
    code = CHILD.format(root=str(ROOT), vms=str(vms),
                        body="\n".join("    " + line for line in body.strip().splitlines()))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            env=env or dict(os.environ), text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def make_image(path: Path, size: str, data: str) -> None:
    """A qcow2 of ``size`` with ``data`` (e.g. ``40M``) of it written."""
    subprocess.run(["qemu-img", "create", "-f", "qcow2", str(path), size], check=True,
                   capture_output=True)
    subprocess.run(["qemu-io", "-c", f"write -P 0x5a 0 {data}", str(path)], check=True,
                   capture_output=True)


def kill9(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)


def wait_for(predicate, timeout=30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.002)


def leftovers(*dirs: Path) -> list[str]:
    out = []
    for d in dirs:
        for p in d.rglob("*"):
            if ".corral-" in p.name or p.name.endswith((".tmp", ".part")):
                out.append(str(p))
    return out


async def fresh(qemu: QEMUBackend) -> QEMUBackend:
    """The next start of corral on the same VMs."""
    again = QEMUBackend(qemu.remote, timeout=10)
    await again.connect()
    return again


def test_process_match_is_exact(tmp_path):
    pidfile = tmp_path / "accel" / "qemu.pid"
    other = [b"qemu-system-x86_64", b"-name", b"web", b"-accel", b"tcg", b"-pidfile",
             str(tmp_path / "web" / "qemu.pid").encode()]
    assert not is_vm_process(other, "accel", pidfile)  # '-accel' is in every command line
    assert not is_vm_process(other, "we", tmp_path / "we" / "qemu.pid")
    assert is_vm_process(other, "web", tmp_path / "web" / "qemu.pid")
    assert not is_vm_process([b"/bin/sleep", b"-name", b"web", b"-pidfile",
                              str(tmp_path / "web" / "qemu.pid").encode()],
                             "web", tmp_path / "web" / "qemu.pid")


async def test_stale_pidfile_never_kills_another_vm(qemu, guest):
    """A VM named 'accel' whose stale pid file names another VM's QEMU: not running, and
    force-stopping it does not kill the other VM."""
    kernel, initrd = guest
    await qemu.create("web", kernel=str(kernel), initrd=str(initrd), memory_mib=128,
                      cmdline="console=ttyS0", accel="tcg")
    await qemu.create("accel", kernel=str(kernel), memory_mib=128, accel="tcg")
    web = InstanceRef("qemu", "web")
    await qemu.start(web)
    pid = qemu.vms.pid("web")
    assert pid
    run = qemu.vms.run_dir("accel")
    run.mkdir(parents=True, exist_ok=True)
    (run / "qemu.pid").write_text(f"{pid}\n")
    assert qemu.vms.pid("accel") is None
    assert (await qemu.get_instance(InstanceRef("qemu", "accel"))).status is InstanceStatus.STOPPED
    with pytest.raises(Conflict):
        await qemu.stop(InstanceRef("qemu", "accel"), force=True)
    assert qemu.vms.pid("web") == pid and Path(f"/proc/{pid}").exists()


async def test_killed_during_definition_writes_leaves_a_whole_definition(qemu, guest):
    kernel, _ = guest
    await qemu.create("vm1", kernel=str(kernel), accel="tcg")
    vms = Path(qemu.remote.address)
    for round_ in range(6):
        proc = child(vms, """
ref = InstanceRef("qemu", "vm1")
i = 0
while True:
    i += 1
    await b.set_description(ref, str(i) * 200_000)
""")
        await asyncio.sleep(0.2 + 0.07 * round_)
        kill9(proc)
        d = VMDefinition.load(vms / "vm1")  # whole JSON, old or new
        assert d.name == "vm1" and set(d.description) <= set("0123456789")
    again = await fresh(qemu)
    try:
        assert leftovers(vms) == []
        assert (await again.get_instance(InstanceRef("qemu", "vm1"))).status is \
            InstanceStatus.STOPPED
    finally:
        await again.close()


async def test_killed_during_renames_keeps_one_vm_with_its_own_disks(qemu, guest):
    kernel, _ = guest
    await qemu.create("aa", kernel=str(kernel), disk_gib=0.01, accel="tcg")
    await qemu.clone_instance(InstanceRef("qemu", "aa"), "cc", linked=True)
    vms = Path(qemu.remote.address)
    for round_ in range(8):
        proc = child(vms, """
names = ["aa", "bb"]
import os
while True:
    cur = "aa" if os.path.isdir({vms!r} + "/aa") else "bb"
    await b.rename_instance(InstanceRef("qemu", cur), "bb" if cur == "aa" else "aa")
""".replace("{vms!r}", repr(str(vms))))
        await asyncio.sleep(0.15 + 0.05 * round_)
        kill9(proc)
        present = [n for n in ("aa", "bb") if (vms / n).is_dir()]
        assert len(present) == 1
        again = await fresh(qemu)
        try:
            listed = [i.name for i in await again.list_instances()]
            assert listed == [*present, "cc"]
            # the linked clone follows its base, whatever moment the kill came at
            assert qcow2_backing(vms / "cc" / "disk0.qcow2") == str(
                vms / present[0] / "disk0.qcow2")
            assert again.vms.definition("cc").linked_to == present[0]
            d = again.vms.definition(present[0])
            assert d.name == present[0]
            argv = again.launcher.argv(d)
            drive = next(a for a in argv if "disk0.qcow2" in a)
            assert f"file={vms / present[0] / 'disk0.qcow2'}" in drive
            assert leftovers(vms) == []
        finally:
            await again.close()


async def test_killed_during_create_and_export_leaves_nothing_after_next_start(
        qemu, guest, tmp_path):
    kernel, _ = guest
    vms = Path(qemu.remote.address)
    image = tmp_path / "big.qcow2"
    make_image(image, "256M", "160M")
    # create: killed while qemu-img copies the image into the new VM's directory
    proc = child(vms, f"await b.create('half', image={str(image)!r}, overlay=False, "
                      f"accel='tcg')")
    wait_for(lambda: (vms / "half" / "disk0.qcow2").exists())
    kill9(proc)
    assert (vms / "half").is_dir()  # the interrupted creation's leftover
    # export: killed while the archive is written
    await qemu.create("full", image=str(image), overlay=False, accel="tcg")
    out = tmp_path / "exports"
    out.mkdir()
    target = out / "full.tar"
    proc = child(vms, f"await b.export_instance(InstanceRef('qemu', 'full'), "
                      f"{str(target)!r}, with_snapshots=False)")
    wait_for(lambda: os.path.exists(str(target) + ".part")
             and os.path.getsize(str(target) + ".part") > 1 << 20, timeout=60)
    kill9(proc)
    assert leftovers(vms, out)
    again = await fresh(qemu)
    try:
        assert leftovers(vms, out) == []
        assert not (vms / "half").exists() and not target.exists()
        assert [i.name for i in await again.list_instances()] == ["full"]
        # and the name can be used again
        await again.create("half", kernel=str(kernel), accel="tcg")
    finally:
        await again.close()


@pytest.fixture
def small_fs(tmp_path):
    """A 24 MiB tmpfs: a disk that fills up."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)], check=True)
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(fs: Path, leave: int = 0) -> None:
    """Fill ``fs`` but ``leave`` bytes."""
    st = os.statvfs(fs)
    with open(fs / "filler", "wb") as f:
        f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))


async def test_disk_full_during_create_and_export_is_said_and_leaves_nothing(
        guest, tmp_path, small_fs, monkeypatch):
    kernel, _ = guest
    monkeypatch.setenv("XDG_RUNTIME_DIR", f"/tmp/cq-full-{os.getpid()}")
    qemu = QEMUBackend(qemu_remote(str(small_fs / "vms")), timeout=10)
    await qemu.connect()
    try:
        image = tmp_path / "big.qcow2"
        make_image(image, "64M", "40M")
        with pytest.raises(OperationFailed, match="disk is full"):
            await qemu.create("big", image=str(image), overlay=False, accel="tcg")
        assert sorted(p.name for p in (small_fs / "vms").iterdir()) == []

        await qemu.create("small", kernel=str(kernel), disk_gib=0.01, accel="tcg")
        ref = InstanceRef("qemu", "small")
        fill(small_fs)
        with pytest.raises(OperationFailed, match="is full"):
            await qemu.set_description(ref, "x" * 100_000)
        assert VMDefinition.load(small_fs / "vms" / "small").description == ""
        with pytest.raises(OperationFailed, match="is full"):
            await qemu.set_limits(ref, {"cpus": "2"})
        assert VMDefinition.load(small_fs / "vms" / "small").cpus == 1
        with pytest.raises(OperationFailed, match="full"):
            await qemu.clone_instance(ref, "copy")
        assert not (small_fs / "vms" / "copy").exists()
        exports = small_fs / "out"
        (small_fs / "filler").unlink()
        exports.mkdir()
        fill(small_fs, leave=64 << 10)
        with pytest.raises(OperationFailed, match="full"):
            await qemu.export_instance(ref, str(exports / "small.tar"), with_snapshots=False)
        assert list(exports.iterdir()) == []
        assert leftovers(small_fs) == []
    finally:
        await qemu.close()
        shutil.rmtree(f"/tmp/cq-full-{os.getpid()}", ignore_errors=True)


async def test_live_change_that_cannot_be_saved_is_rolled_back(guest, small_fs, monkeypatch):
    kernel, initrd = guest
    monkeypatch.setenv("XDG_RUNTIME_DIR", f"/tmp/cq-live-{os.getpid()}")
    qemu = QEMUBackend(qemu_remote(str(small_fs / "vms")), timeout=10)
    await qemu.connect()
    ref = InstanceRef("qemu", "live")
    try:
        await qemu.create("live", kernel=str(kernel), initrd=str(initrd), memory_mib=256,
                          disk_gib=0.01,
                          cmdline="console=ttyS0", accel="tcg")
        await qemu.start(ref)
        before = await qemu.monitor.execute(ref, "query-balloon")
        fill(small_fs)
        with pytest.raises(OperationFailed, match="is full"):
            await qemu.set_limits(ref, {"memory": "128MiB", "write_bps": "1000000"})
        assert await qemu.monitor.execute(ref, "query-balloon") == before
        blocks = await qemu.monitor.execute(ref, "query-block")
        assert all((b.get("inserted") or {}).get("bps_wr", 0) == 0 for b in blocks)
        saved = json.loads((small_fs / "vms" / "live" / "vm.json").read_text())
        assert saved["memory_target_mib"] == 0 and saved["io_limits"] == {}
    finally:
        pid = qemu.vms.pid("live")
        if pid:
            os.kill(pid, signal.SIGKILL)
        await qemu.close()
        shutil.rmtree(f"/tmp/cq-live-{os.getpid()}", ignore_errors=True)
