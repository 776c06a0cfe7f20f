"""Creating libvirt domains (``backends/libvirt/create.py``) on the suite's private libvirtd
(``tests/lab_libvirt.py``), over its unix socket and over ``qemu+ssh://``, read back with
``virsh`` and ``qemu-img`` (not through corral):

- the sources and their fields, the pools and networks offered, UEFI and KVM offered as
  the daemon's domain capabilities say;
- a kernel + initrd domain boots under TCG and its serial console answers; its XML has
  the virtio disk (a new volume of the pool), the virtio NIC, the serial console, the
  VNC screen on a unix socket and the virtio balloon;
- a disk image becomes a qcow2 overlay whose backing file is the image (``vol-dumpxml``,
  ``qemu-img info``), or a copy without one, grown to the size asked;
- an ISO is the CD drive booted first, with a new empty disk of the size asked;
- an empty domain boots from the network (defined, starts; its disk holds no data);
- bad input (a missing file, a relative path, a taken domain or volume name, a kernel
  that cannot start) leaves no domain and no volume behind, and so does a copy into a
  pool without room for it (a 1 MiB tmpfs mounted in the lab daemon's namespace).

The ISO is made with ``genisoimage``/``xorriso`` when one is installed, else written here
as a minimal ISO 9660 volume (an empty root directory): the test is about the CD drive.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import struct
import subprocess
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
import pytest_asyncio

import lab_libvirt
from backends import get_backend
from backends.errors import Conflict, InvalidInput, NotFound, OperationFailed
from backends.models import InstanceRef, InstanceStatus, Remote
from backends.create_models import CreateRequest

from .libvirt_helpers import domain_xml, virsh

live = pytest.mark.asyncio(loop_scope="module")
PREFIX = "lvc-"
MiB = 1024**2


@pytest.fixture(scope="module")
def vlab(request):
    return lab_libvirt.session_lab(request)


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["unix", "ssh"])
async def lv(request, vlab):
    uri = vlab.unix_uri if request.param == "unix" else vlab.ssh_uri()
    backend = get_backend(Remote(name=f"lvc-{request.param}", kind="libvirt", address=uri),
                          timeout=10)
    await backend.connect()
    yield backend
    for inst in await backend.list_instances():
        if inst.name.startswith(PREFIX):
            with contextlib.suppress(NotFound):
                await backend.delete(inst.ref, force=True)
    for line in virsh(vlab, "vol-list", "default").stdout.split():
        if line.startswith(PREFIX) and line.endswith(".qcow2"):
            virsh(vlab, "vol-delete", "--pool", "default", line, check=False)
    await backend.close()


def new_name() -> str:
    return f"{PREFIX}{uuid.uuid4().hex[:6]}"


async def request_for(lv, kind: str, name: str, value: str = "", **kw) -> CreateRequest:
    [source] = [s for s in await lv.create_sources() if s.kind == kind]
    kw.setdefault("memory", 128 * MiB)
    kw.setdefault("network", "user")
    options = {"accel": "qemu", **kw.pop("options", {})}  # the lab's KVM aborts: TCG
    return CreateRequest(name=name, source=replace(source, value=value), options=options,
                         **kw)


def volumes(vlab) -> set[str]:
    return {line.split()[0] for line in virsh(vlab, "vol-list", "default").stdout.splitlines()[2:]
            if line.split()}


def domains(vlab) -> set[str]:
    return set(virsh(vlab, "list", "--all", "--name").stdout.split())


def img_info(path: Path) -> dict:
    return json.loads(subprocess.run(["qemu-img", "info", "-U", "--output=json", str(path)],
                                     capture_output=True, text=True, check=True).stdout)


async def remove(lv, name: str) -> None:
    ref = InstanceRef(lv.remote.name, name)
    await lv.delete_with_storage(ref, await lv.owned_storage(ref), force=True)


class Sink:
    def __init__(self) -> None:
        self.data = b""

    def feed(self, data: bytes) -> None:
        self.data += data

    def closed(self, reason: str) -> None:
        pass


async def console_answers(lv, ref: InstanceRef) -> None:
    """Type on the serial console until the guest's shell answers."""
    session = await lv.open_console(ref)
    sink = Sink()
    await session.start(sink)
    try:
        deadline = time.monotonic() + 120
        while b"k42" not in sink.data:
            assert time.monotonic() < deadline, f"no answer; the console showed {sink.data[-400:]!r}"
            await session.send_bytes(b"echo k$((6*7))\r")
            for _ in range(30):
                if b"k42" in sink.data:
                    break
                await asyncio.sleep(0.1)
    finally:
        await session.close()


# -- what is offered -----------------------------------------------------------------------


@live
async def test_sources_fields_and_options_follow_the_daemon(lv, vlab):
    sources = {s.kind: s for s in await lv.create_sources()}
    assert set(sources) == {"disk-image", "iso", "kernel", "pxe"}
    kernel = {f.key: f for f in sources["kernel"].fields}
    assert kernel[""].path == "remote" and kernel[""].required
    assert kernel["initrd"].path == "remote" and not kernel["initrd"].required
    assert kernel["cmdline"].default == "console=ttyS0"
    assert dict(next(f for f in sources["disk-image"].fields if f.key == "overlay").choices) \
        .keys() == {"yes", "no"}
    caps = virsh(vlab, "domcapabilities", "--virttype", "qemu").stdout
    firmware = dict(next(f for f in sources["pxe"].fields if f.key == "firmware").choices)
    assert ("uefi" in firmware) == ("<value>efi</value>" in caps), (firmware, caps)
    kvm = virsh(vlab, "domcapabilities", "--virttype", "kvm", check=False).returncode == 0
    accel = dict(next(f for f in sources["pxe"].fields if f.key == "accel").choices)
    assert ("kvm" in accel) == kvm and "qemu" in accel
    options = await lv.create_options()
    assert options.storage_pools[0] == "default"
    assert options.networks[-2:] == ("user", "none")
    assert options.max_cpus >= 1 and options.defaults["disk"] == "10GiB"


# -- kernel + initrd -----------------------------------------------------------------------


@live
async def test_kernel_boot_runs_and_its_serial_console_answers(lv, vlab, guest):
    kernel, initrd = guest
    name, said = new_name(), []
    request = await request_for(lv, "kernel", name, str(kernel), disk=64 * MiB, start=True,
                                options={"initrd": str(initrd), "cmdline": "console=ttyS0"})
    inst = await lv.create_instance(request, said.append)
    try:
        assert inst.status is InstanceStatus.RUNNING and inst.memory_limit == 128 * MiB
        assert said[0] == "checking…" and "starting…" in said
        xml = domain_xml(vlab, name, saved=True)
        assert xml.get("type") == "qemu"  # TCG: QEMU's default CPU model, as libvirt fills it
        assert xml.find("cpu") is None or xml.find("cpu").get("mode") != "host-passthrough"
        assert xml.findtext("os/kernel") == str(kernel)
        assert xml.findtext("os/initrd") == str(initrd)
        assert xml.findtext("os/cmdline") == "console=ttyS0"
        [disk] = xml.findall("devices/disk")
        assert disk.find("target").get("bus") == "virtio"
        assert disk.find("source").get("file") == "/var/lib/libvirt/images/" + name + ".qcow2"
        assert img_info(vlab.images / f"{name}.qcow2")["virtual-size"] == 64 * MiB
        [nic] = xml.findall("devices/interface")
        assert nic.get("type") == "user" and nic.find("model").get("type") == "virtio"
        assert xml.find("devices/serial").get("type") == "pty"
        assert xml.find("devices/console/target").get("type") == "serial"
        assert xml.find("devices/graphics").get("type") == "vnc"
        assert xml.find("devices/graphics/listen").get("type") == "socket"
        assert xml.find("devices/memballoon").get("model") == "virtio"
        assert inst.extra["vnc"]
        await console_answers(lv, inst.ref)
    finally:
        await remove(lv, name)
    assert name not in domains(vlab) and f"{name}.qcow2" not in volumes(vlab)


# -- disk images ---------------------------------------------------------------------------


@live
async def test_a_disk_image_becomes_an_overlay_on_it_or_a_copy(lv, vlab):
    base = vlab.root / f"{PREFIX}base-{uuid.uuid4().hex[:6]}.qcow2"  # in no pool
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(base), "16M"], check=True)
    subprocess.run(["qemu-io", "-f", "qcow2", "-c", "write -P 0x5a 0 64k", str(base)],
                   check=True, capture_output=True)
    overlay, copy = new_name(), new_name()
    try:
        made = await lv.create_instance(await request_for(
            lv, "disk-image", overlay, str(base), disk=32 * MiB))
        assert made.status is InstanceStatus.STOPPED
        vol = virsh(vlab, "vol-dumpxml", "--pool", "default", f"{overlay}.qcow2").stdout
        assert f"<path>{base}</path>" in vol and "<format type='qcow2'/>" in vol, vol
        info = img_info(vlab.images / f"{overlay}.qcow2")
        assert info["backing-filename"] == str(base)
        assert info["backing-filename-format"] == "qcow2"
        assert info["virtual-size"] == 32 * MiB  # grown to the size asked

        await lv.create_instance(await request_for(
            lv, "disk-image", copy, str(base), disk=0, options={"overlay": "no"}))
        info = img_info(vlab.images / f"{copy}.qcow2")
        assert "backing-filename" not in info and info["format"] == "qcow2"
        assert info["virtual-size"] == 16 * MiB
        read = subprocess.run(["qemu-io", "-f", "qcow2", "-r", "-U", "-c",
                               "read -P 0x5a 0 64k", str(vlab.images / f"{copy}.qcow2")],
                              capture_output=True, text=True)
        assert "Pattern verification failed" not in read.stdout and read.returncode == 0, read

        base.chmod(0o666)  # anyone could change what the overlay reads at every start
        with pytest.raises(InvalidInput) as writable:
            await lv.create_instance(await request_for(lv, "disk-image", new_name(), str(base)))
        assert "every user" in str(writable.value) and "copy" in str(writable.value)
        base.chmod(0o644)

        with pytest.raises(InvalidInput) as small:  # disks only grow
            await lv.create_instance(await request_for(
                lv, "disk-image", new_name(), str(base), disk=8 * MiB))
        assert "at least as large" in str(small.value)
    finally:
        for name in (overlay, copy):
            if name in domains(vlab):
                await remove(lv, name)
        base.unlink()
    assert {f"{overlay}.qcow2", f"{copy}.qcow2"} & volumes(vlab) == set()


# -- ISO and network boot ------------------------------------------------------------------


def tiny_iso(path: Path) -> Path:
    """An ISO 9660 image: made by genisoimage or xorriso when installed, else written here
    (volume descriptors, path tables and an empty root directory)."""
    content = path.with_suffix(".d")
    content.mkdir()
    (content / "README").write_text("corral\n")
    for tool in ("genisoimage", "xorrisofs", "mkisofs"):
        if shutil.which(tool):
            subprocess.run([tool, "-quiet", "-V", "CORRAL", "-o", str(path), str(content)],
                           check=True, capture_output=True)
            return path

    def both16(n: int) -> bytes:
        return struct.pack("<H", n) + struct.pack(">H", n)

    def both32(n: int) -> bytes:
        return struct.pack("<I", n) + struct.pack(">I", n)

    def record(extent: int, name: bytes) -> bytes:
        body = (both32(extent) + both32(2048) + bytes(7) + bytes([2, 0, 0]) + both16(1)
                + bytes([len(name)]) + name)
        body += b"\0" * (len(body) % 2)  # a record's length is even
        return bytes([len(body) + 2, 0]) + body

    root = record(20, b"\0")
    table_l = bytes([1, 0]) + struct.pack("<I", 20) + struct.pack("<H", 1) + b"\0\0"
    table_m = bytes([1, 0]) + struct.pack(">I", 20) + struct.pack(">H", 1) + b"\0\0"
    pvd = (bytes([1]) + b"CD001" + bytes([1, 0]) + b" " * 32 + b"CORRAL".ljust(32)
           + bytes(8) + both32(21) + bytes(32) + both16(1) + both16(1) + both16(2048)
           + both32(len(table_l) - 2) + struct.pack("<I", 18) + bytes(4)
           + struct.pack(">I", 19) + bytes(4) + root)
    pvd = pvd.ljust(881, b" ")[:881] + bytes([1])
    terminator = bytes([255]) + b"CD001" + bytes([1])
    sectors = [bytes(2048)] * 16 + [pvd, terminator, table_l, table_m,
                                    record(20, b"\0") + record(20, b"\1")]
    path.write_bytes(b"".join(s.ljust(2048, b"\0") for s in sectors))
    return path


@live
async def test_an_iso_boots_from_the_cd_first_with_an_empty_disk(lv, vlab):
    iso = tiny_iso(vlab.root / f"{PREFIX}{uuid.uuid4().hex[:6]}.iso")
    name = new_name()
    try:
        inst = await lv.create_instance(await request_for(
            lv, "iso", name, str(iso), disk=48 * MiB, start=True))
        assert inst.status is InstanceStatus.RUNNING
        xml = domain_xml(vlab, name, saved=True)
        assert [b.get("dev") for b in xml.findall("os/boot")] == ["cdrom", "hd"]
        cdrom = next(d for d in xml.findall("devices/disk") if d.get("device") == "cdrom")
        assert cdrom.find("source").get("file") == str(iso)
        assert cdrom.find("readonly") is not None
        info = img_info(vlab.images / f"{name}.qcow2")
        assert info["virtual-size"] == 48 * MiB and "backing-filename" not in info
        assert await lv.owned_storage(inst.ref) == [f"/var/lib/libvirt/images/{name}.qcow2"]
    finally:
        if name in domains(vlab):
            await remove(lv, name)
    assert iso.exists()  # the ISO is the host's, never the domain's


@live
async def test_an_empty_domain_boots_from_the_network(lv, vlab):
    name = new_name()
    try:
        inst = await lv.create_instance(await request_for(lv, "pxe", name, disk=32 * MiB,
                                                          start=True))
        assert inst.status is InstanceStatus.RUNNING
        xml = domain_xml(vlab, name, saved=True)
        assert [b.get("dev") for b in xml.findall("os/boot")] == ["network", "hd"]
        assert xml.find("devices/interface/model").get("type") == "virtio"
        mapped = json.loads(subprocess.run(
            ["qemu-img", "map", "-U", "--output=json", str(vlab.images / f"{name}.qcow2")],
            capture_output=True, text=True, check=True).stdout)
        assert not any(extent["data"] for extent in mapped), mapped  # no disk content
        with pytest.raises(InvalidInput) as no_nic:
            await lv.create_instance(await request_for(lv, "pxe", new_name(), network="none"))
        assert "NIC" in str(no_nic.value)
    finally:
        if name in domains(vlab):
            await remove(lv, name)


@live
async def test_uefi_is_libvirts_ovmf_and_goes_with_the_domain(lv, vlab):
    name = new_name()
    await lv.create_instance(await request_for(lv, "pxe", name, disk=16 * MiB, start=True,
                                               options={"firmware": "uefi"}))
    try:
        assert domain_xml(vlab, name, saved=True).find("os").get("firmware") == "efi"
        running = domain_xml(vlab, name)  # libvirt picks the firmware when it starts
        assert "OVMF" in running.findtext("os/loader", ""), running.findtext("os/loader")
        nvram = running.findtext("os/nvram", "")
        assert nvram.startswith("/var/lib/libvirt/"), nvram
        vars_file = vlab.root / "lib" / nvram.removeprefix("/var/lib/libvirt/")
        assert vars_file.exists()
    finally:
        await remove(lv, name)
    assert name not in domains(vlab) and not vars_file.exists()


# -- refusals ------------------------------------------------------------------------------


@live
async def test_bad_input_is_refused_in_words_and_leaves_nothing(lv, vlab, guest, tmp_path):
    kernel, initrd = guest
    before_domains, before_volumes = domains(vlab), volumes(vlab)
    name = new_name()

    async def refused(kind: str, value: str = "", error=InvalidInput, **kw) -> str:
        with pytest.raises(error) as e:
            await lv.create_instance(await request_for(lv, kind, name, value, **kw))
        assert domains(vlab) == before_domains and volumes(vlab) == before_volumes
        return str(e.value)

    assert "does not exist" in await refused("kernel", str(vlab.root / "no-such-vmlinuz"),
                                             disk=16 * MiB)
    assert "cannot be read" in await refused("kernel", "/no/such/dir/vmlinuz")
    assert "absolute path" in await refused("kernel", "vmlinuz")
    assert "initrd" in await refused("kernel", str(kernel), disk=16 * MiB,
                                     options={"initrd": str(vlab.root / "no-initrd")})
    assert "does not exist" in await refused("iso", str(vlab.root / "no.iso"))
    assert "network" in await refused("pxe", network="no-such-net")
    assert "BIOS" in await refused("kernel", str(kernel), options={"firmware": "uefi"})
    # a kernel the daemon reads but QEMU cannot boot: made, failed to start, all undone
    bogus = vlab.root / f"{PREFIX}bogus-kernel"
    bogus.write_text("not a kernel\n")
    try:
        text = await refused("kernel", str(bogus), error=OperationFailed, disk=16 * MiB,
                             start=True)
        assert "starting it failed" in text and "Nothing was kept" in text, text
    finally:
        bogus.unlink()
    # taken names: the domain's, then its volume's (which stays as it was)
    taken = new_name()
    await lv.create_instance(await request_for(lv, "pxe", taken, disk=16 * MiB))
    try:
        made = domains(vlab), volumes(vlab)
        with pytest.raises(Conflict) as e:
            await lv.create_instance(await request_for(lv, "pxe", taken, disk=16 * MiB))
        assert "already exists" in str(e.value)
        virsh(vlab, "vol-create-as", "default", f"{name}.qcow2", "1M", "--format", "qcow2")
        with pytest.raises(Conflict) as e:
            await lv.create_instance(await request_for(lv, "pxe", name, disk=16 * MiB))
        assert f"{name}.qcow2" in str(e.value)
        assert domains(vlab) == made[0] and img_info(
            vlab.images / f"{name}.qcow2")["virtual-size"] == 1 * MiB
        # a file the pool has not seen yet (put there without libvirt) is never written over
        stranger = vlab.images / f"{name}-x.qcow2"
        stranger.write_bytes(b"not libvirt's\n")
        with pytest.raises(Conflict):
            await lv.create_instance(await request_for(lv, "pxe", f"{name}-x", disk=16 * MiB))
        assert stranger.read_bytes() == b"not libvirt's\n"
        assert f"{name}-x" not in domains(vlab)
    finally:
        virsh(vlab, "vol-delete", "--pool", "default", f"{name}.qcow2", check=False)
        virsh(vlab, "vol-delete", "--pool", "default", f"{name}-x.qcow2", check=False)
        await remove(lv, taken)
    with pytest.raises(InvalidInput):
        await lv.create_instance(await request_for(lv, "pxe", "bad/name"))


@live
async def test_a_copy_into_a_pool_without_room_fails_and_leaves_nothing(lv, vlab):
    tag = uuid.uuid4().hex[:6]
    small, pool = vlab.root / f"small-{tag}", f"lvcsmall{tag}"
    small.mkdir()
    image = vlab.root / f"{PREFIX}full-{tag}.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(image), "16M"], check=True)
    subprocess.run(["qemu-io", "-f", "qcow2", "-c", "write -P 0x5a 0 4M", str(image)],
                   check=True, capture_output=True)
    in_lab = ["nsenter", f"--target={vlab.daemon.pid}", "--mount", "--"]
    subprocess.run([*in_lab, "mount", "-t", "tmpfs", "-o", "size=1M", "corral-full",
                    str(small)], check=True)
    try:
        virsh(vlab, "pool-create-as", pool, "dir", "--target", str(small))
        name = new_name()
        with pytest.raises(OperationFailed) as full:
            await lv.create_instance(await request_for(
                lv, "disk-image", name, str(image), storage_pool=pool,
                options={"overlay": "no"}))
        assert "No space left" in str(full.value) and "Nothing was kept" in str(full.value)
        assert name not in domains(vlab)
        assert [line for line in virsh(vlab, "vol-list", pool).stdout.splitlines()[2:]
                if line.strip()] == []
        assert subprocess.run([*in_lab, "ls", "-A", str(small)], capture_output=True,
                              text=True, check=True).stdout == ""
    finally:
        virsh(vlab, "pool-destroy", pool, check=False)
        subprocess.run([*in_lab, "umount", str(small)], check=False)
        small.rmdir()
        image.unlink()


@live
async def test_a_cancelled_creation_leaves_nothing_once_the_daemon_is_done(lv, vlab, guest):
    """libvirt cannot stop a creation half way: cancelling the call lets the daemon finish,
    then what it made (a started domain, its volume) is removed."""
    kernel, initrd = guest
    name, events = new_name(), []
    connected, making = asyncio.Event(), asyncio.Event()

    async def pump() -> None:
        async for event in lv.watch():
            events.append(event)
            connected.set()

    watcher = asyncio.ensure_future(pump())
    try:
        await asyncio.wait_for(connected.wait(), 30)
        request = await request_for(lv, "kernel", name, str(kernel), disk=16 * MiB, start=True,
                                    options={"initrd": str(initrd)})
        task = asyncio.ensure_future(lv.create_instance(
            request, lambda text: making.set() if text.startswith("creating") else None))
        await asyncio.wait_for(making.wait(), 60)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        deadline = time.monotonic() + 60
        while not any(e.action == "instance-deleted" and e.ref and e.ref.name == name
                      for e in events):
            assert time.monotonic() < deadline, [(e.action, str(e.ref)) for e in events]
            await asyncio.sleep(0.1)
        assert any(e.action == "instance-started" and e.ref and e.ref.name == name
                   for e in events)  # it was made, started, then removed
        for _ in range(100):  # the volume goes right after the domain
            if f"{name}.qcow2" not in volumes(vlab):
                break
            await asyncio.sleep(0.1)
        assert name not in domains(vlab) and f"{name}.qcow2" not in volumes(vlab)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


@live
async def test_bridges_and_active_networks_are_offered_and_a_nic_joins_one(lv, vlab, tmp_path):
    tag = uuid.uuid4().hex[:6]
    bridge, net = f"lvcb{tag}", f"lvcnet{tag}"
    xml = tmp_path / "net.xml"  # defined, never started: not offered, refused in words
    xml.write_text(f"<network><name>{net}</name><bridge name='lvcn{tag}'/></network>")
    virsh(vlab, "net-define", str(xml))
    subprocess.run(["ip", "link", "add", bridge, "type", "bridge"], check=True)
    name = new_name()
    try:
        subprocess.run(["ip", "link", "set", bridge, "up"], check=True)
        networks = (await lv.create_options()).networks
        assert f"bridge:{bridge}" in networks and net not in networks, networks
        with pytest.raises(InvalidInput) as inactive:
            await lv.create_instance(await request_for(lv, "pxe", name, network=net))
        assert "not active" in str(inactive.value) and name not in domains(vlab)
        await lv.create_instance(await request_for(lv, "pxe", name, disk=16 * MiB,
                                                   network=f"bridge:{bridge}"))
        nic = domain_xml(vlab, name, saved=True).find("devices/interface")
        assert nic.get("type") == "bridge" and nic.find("source").get("bridge") == bridge
        assert (await lv.list_nics(InstanceRef(lv.remote.name, name)))["eth0"]["parent"] \
            == bridge
    finally:
        if name in domains(vlab):
            await remove(lv, name)
        subprocess.run(["ip", "link", "del", bridge], check=False)
        virsh(vlab, "net-undefine", net, check=False)
