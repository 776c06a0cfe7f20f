"""The launch wizard's verbs (the CREATE ability) and pending limits of the QEMU backend,
against real QEMU under TCG with the cached busybox guest of tests/qemu_guest.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend_checks import longest_stall
from qemu_guest import wait_serial

from backends.errors import Conflict, InvalidInput, OperationFailed
from backends.models import Capability, InstanceRef, InstanceStatus, InstanceType
from backends.create_models import CreateRequest, CreateSource

MiB, GiB = 1 << 20, 1 << 30


def image_info(path):
    out = subprocess.run(["qemu-img", "info", "-U", "--output=json", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def kernel_request(name, kernel, initrd, **kw):
    options = {"initrd": str(initrd), "cmdline": "console=ttyS0", "accel": "tcg"}
    options.update(kw.pop("options", {}))
    return CreateRequest(name=name, source=CreateSource("kernel", "Kernel", value=str(kernel),
                                                        type=InstanceType.VM),
                         options=options, **kw)


async def test_sources_options_and_names(qemu):
    assert Capability.CREATE in qemu.capabilities
    sources = {s.kind: s for s in await qemu.create_sources()}
    assert list(sources) == ["disk-image", "iso", "kernel", "pxe", "vm-import"]
    assert all(s.type is InstanceType.VM for s in sources.values())
    # what the wizard asks for each: the file here (the source's value), the firmware, a
    # kernel's initrd and command line (options)
    asked = {k: [(f.key, f.path, f.required) for f in s.fields] for k, s in sources.items()}
    here, firmware = ("", "local", True), ("firmware", "", False)
    assert asked == {"disk-image": [here, firmware], "iso": [here, firmware],
                     "kernel": [here, ("initrd", "local", False), ("cmdline", "", False)],
                     "pxe": [firmware], "vm-import": [here]}
    assert sources["pxe"].fields[0].choices == (("bios", "BIOS (SeaBIOS)"),
                                                ("uefi", "UEFI (OVMF)"))
    assert sources["pxe"].fields[0].default == "bios"
    options = await qemu.create_options()
    assert options.networks == ("user", "none")  # no bridged NIC in a VM definition
    assert options.max_cpus == os.cpu_count() and not options.user_data
    assert dict(options.defaults) == {"cpus": "1", "memory": "512MiB", "disk": "10GiB"}
    assert qemu.check_name("good-name") is None
    assert "not a valid VM name" in qemu.check_name("Bad_Name")
    assert "not a valid VM name" in qemu.check_name("-x")


async def test_kernel_vm_is_created_started_and_boots(qemu, guest):
    kernel, initrd = guest
    said = []
    started = time.monotonic()
    inst = await qemu.create_instance(
        kernel_request("kvm1", kernel, initrd, cpus=2, memory=256 * MiB, disk=GiB + 512 * MiB,
                       start=True), progress=said.append)
    assert inst.status is InstanceStatus.RUNNING and inst.type is InstanceType.VM
    assert inst.cpu_limit == "2" and inst.memory_limit == 256 * MiB
    assert "creating disk…" in said and said[-1] == "starting…"
    await wait_serial(qemu, "kvm1", "corral-guest ready")
    print(f"created + booted in {time.monotonic() - started:.1f}s")
    disk = Path(qemu.remote.address) / "kvm1" / "disk0.qcow2"
    assert image_info(disk)["virtual-size"] == GiB + 512 * MiB
    d = qemu.vms.definition("kvm1")
    assert (d.kernel, d.initrd, d.cmdline, d.accel, d.network) == (
        str(kernel), str(initrd), "console=ttyS0", "tcg", "user")
    cmdline = Path(f"/proc/{qemu.vms.pid('kvm1')}/cmdline").read_bytes().split(b"\0")
    assert b"256M" in cmdline and b"user,id=net0" in cmdline

    # restart-only changes while running show as pending; live ones do not
    ref = InstanceRef("qemu", "kvm1")
    assert await qemu.set_limits(ref, {"memory_max": "384MiB", "cpus": "1"}) == {
        "memory_max": "restart", "cpus": "restart"}
    fields = {f.key: f for f in await qemu.get_limits(ref)}
    assert (fields["memory_max"].value, fields["memory_max"].pending) == ("256MiB", "384MiB")
    assert (fields["cpus"].value, fields["cpus"].pending) == ("2", "1")
    assert fields["write_bps"].pending == "" and fields["disk"].pending == ""
    # a definition saved meanwhile (here: edited outside) differs from what QEMU applies
    d = qemu.vms.definition("kvm1")
    d.io_limits["write_bps"] = 4096
    d.save(qemu.vms.dir("kvm1"))
    fields = {f.key: f for f in await qemu.get_limits(ref)}
    assert (fields["write_bps"].value, fields["write_bps"].pending) == ("", "4096")
    assert await qemu.set_limits(ref, {"write_bps": "4096"}) == {"write_bps": "live"}
    assert {f.key: f.pending for f in await qemu.get_limits(ref)}["write_bps"] == ""

    await qemu.stop(ref, force=True)
    fields = {f.key: f for f in await qemu.get_limits(ref)}
    assert all(f.pending == "" for f in fields.values())
    assert (fields["memory_max"].value, fields["cpus"].value) == ("384MiB", "1")
    assert fields["memory_max"].applies == "restart"


async def test_bad_requests_leave_nothing_behind(qemu, guest, tmp_path):
    kernel, initrd = guest
    vms = Path(qemu.remote.address)
    bad = [
        (kernel_request("Bad_Name", kernel, initrd), "not a valid VM name"),
        (kernel_request("m1", kernel, initrd, memory=256 * MiB + 1), "whole number of MiB"),
        (kernel_request("m2", kernel, initrd, memory=16 * MiB), "at least 32 MiB"),
        (kernel_request("m3", tmp_path / "nope", initrd), "does not exist"),
        (kernel_request("m4", kernel, tmp_path / "nope"), "does not exist"),
        (kernel_request("m5", kernel, initrd, options={"bogus": "1"}), "Unknown option"),
        (kernel_request("m6", kernel, initrd, network="br0"), "user networking"),
        (kernel_request("m7", kernel, initrd, options={"accel": "hvf"}), "tcg or auto"),
        (kernel_request("m8", kernel, initrd, options={"firmware": "coreboot"}), "bios or uefi"),
        (kernel_request("m9", kernel, initrd, disk=GiB + 1), "multiple of 512"),
        (kernel_request("m10", kernel, initrd, cpus=0), "CPUs must be"),
        (CreateRequest("m11", CreateSource("pxe", "PXE", type=InstanceType.VM),
                       network="none"), "needs a NIC"),
        (CreateRequest("m12", CreateSource("image", "LXD image", value="x")), "cannot be made"),
        (CreateRequest("m13", CreateSource("iso", "ISO", value=str(tmp_path / "x.iso"))),
         "does not exist"),
        (CreateRequest("m14", CreateSource("disk-image", "Disk", value=str(kernel)),
                       options={"overlay": "maybe"}), "overlay"),
        (CreateRequest("m15", CreateSource("disk-image", "Disk", value="")), "Give the path"),
    ]
    for request, message in bad:
        with pytest.raises(InvalidInput, match=message):
            await qemu.create_instance(request)
        assert list(vms.iterdir()) == [], request
    await qemu.create_instance(kernel_request("taken", kernel, initrd))
    with pytest.raises(Conflict, match="already exists"):
        await qemu.create_instance(kernel_request("taken", kernel, initrd))
    assert "already exists" in qemu.check_name("taken")
    assert [p.name for p in vms.iterdir()] == ["taken"]


async def test_disk_image_overlay_copy_and_grow(qemu, tmp_path):
    base = tmp_path / "base.qcow2"
    subprocess.run(["qemu-img", "create", "-f", "qcow2", str(base), "64M"], check=True,
                   capture_output=True)
    source = CreateSource("disk-image", "Disk", value=str(base), type=InstanceType.VM)
    said = []
    await qemu.create_instance(CreateRequest("ovl", source, disk=128 * MiB),
                               progress=said.append)
    info = image_info(qemu.vms.dir("ovl") / "disk0.qcow2")
    assert info["virtual-size"] == 128 * MiB and info["backing-filename"] == str(base)
    assert "creating overlay disk…" in said and "resizing disk…" in said
    await qemu.create_instance(CreateRequest("cpy", source, options={"overlay": "no"}))
    info = image_info(qemu.vms.dir("cpy") / "disk0.qcow2")
    assert info["virtual-size"] == 64 * MiB and "backing-filename" not in info
    with pytest.raises(InvalidInput, match="at least as large as the image"):
        await qemu.create_instance(CreateRequest("small", source, disk=32 * MiB))
    assert not qemu.vms.dir("small").exists()
    # ISO/PXE sources get the default 10GiB disk when none is asked for
    iso = tmp_path / "inst.iso"
    iso.write_bytes(b"\0" * 2048)
    await qemu.create_instance(CreateRequest("inst", CreateSource("iso", "ISO", value=str(iso)),
                                             network="none"))
    d = qemu.vms.definition("inst")
    assert (d.boot, d.iso, d.network) == ("cdrom", str(iso), "none")
    assert image_info(qemu.vms.dir("inst") / d.disks[0])["virtual-size"] == 10 * GiB
    assert "-netdev" not in qemu.launcher.argv(d)


async def test_a_vm_that_does_not_start_stays_defined(qemu, guest, tmp_path):
    kernel, initrd = guest
    doomed = tmp_path / "vmlinuz"
    shutil.copyfile(kernel, doomed)

    def progress(text):  # the kernel vanishes between definition and start
        if text == "starting…":
            doomed.unlink()

    # refused at start, before QEMU runs: the boot files are opened and checked by corral
    with pytest.raises(OperationFailed, match="created, but could not start: .*its kernel "
                                              ".* cannot be opened"):
        await qemu.create_instance(kernel_request("nostart", doomed, initrd, start=True),
                                   progress=progress)
    inst = await qemu.get_instance(InstanceRef("qemu", "nostart"))
    assert inst.status is InstanceStatus.STOPPED


async def test_listing_and_one_vm_read_the_definitions_off_the_event_loop(qemu, monkeypatch):
    """Each VM's definition is a file to read and check, for the listing and for one VM
    (after each of its events): a slow disk must not stop the event loop. Here each read
    takes 0.2 s; the loop ticks every 20 ms throughout."""
    from backends.qemu.machines import Machines

    await qemu.create_instance(CreateRequest(
        "slowdisk", CreateSource("pxe", "PXE", type=InstanceType.VM), disk=64 * MiB,
        network="user"))
    real = Machines.instance

    def slow(self, name):
        time.sleep(0.2)
        return real(self, name)

    monkeypatch.setattr(Machines, "instance", slow)
    (listed, got), stall = await longest_stall(
        qemu.list_instances(), qemu.get_instance(InstanceRef(qemu.remote.name, "slowdisk")))
    assert "slowdisk" in {i.name for i in listed} and got.name == "slowdisk"
    assert stall < 0.15, f"the loop stood still for {stall:.2f} s"
