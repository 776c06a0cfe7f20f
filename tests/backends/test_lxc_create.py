"""The launch wizard's verbs (the CREATE ability) and pending limits of the LXC backend,
against real lxc-* tools in a private lxcpath (no lxcbr0 here: containers get no NIC)."""

from __future__ import annotations

import asyncio
import os
import subprocess

import pytest
from backend_checks import lxc, state

from backends.errors import Conflict, InvalidInput, OperationFailed
from backends.lxc.limits import cgroup_version, host_supports
from backends.models import Capability, InstanceRef, InstanceStatus
from backends.create_models import CreateRequest, CreateSource

MiB = 1 << 20
BUSYBOX = CreateSource("template", "busybox", value="busybox")


@pytest.fixture
def backend(lxc_backend):
    return lxc_backend


def cgroup(path, name, key):
    return lxc(path, "lxc-cgroup", "-n", name, key).stdout.strip()


V1 = cgroup_version() == 1
MEM_KEY = "memory.limit_in_bytes" if V1 else "memory.max"


async def test_sources_options_and_names(backend, lxc_path):
    assert Capability.CREATE in backend.capabilities
    sources = await backend.create_sources()
    templates = [s.value for s in sources if s.kind == "template"]
    assert templates[0] == "busybox" and set(templates) <= {"busybox", "download"}
    tarball = [s for s in sources if s.kind == "tarball"]
    assert len(tarball) == 1 and [(f.key, f.path, f.required) for f in tarball[0].fields] \
        == [("", "local", True)]  # the wizard asks for the tarball's path here
    options = await backend.create_options()
    assert options.networks[-1] == "none"
    assert all(os.path.isdir(f"/sys/class/net/{n}/bridge") for n in options.networks[:-1])
    assert options.max_cpus == os.cpu_count()
    assert backend.check_name("c-1.ok") is None
    assert "not a valid container name" in backend.check_name("bad name!")


async def test_busybox_with_limits_is_created_and_started(backend, lxc_path):
    said = []
    inst = await backend.create_instance(
        CreateRequest("lim1", BUSYBOX, cpus=1, memory=256 * MiB, start=True),
        progress=said.append)
    assert inst.status is InstanceStatus.RUNNING and inst.memory_limit == 256 * MiB
    assert said == ["running the busybox template…", "setting limits…", "starting…"]
    assert state(lxc_path, "lim1") == "RUNNING"
    config = (lxc_path / "lim1" / "config").read_text()
    assert f"{MEM_KEY} = {256 * MiB}" in config and "lxc.net.0.type = empty" in config
    assert cgroup(lxc_path, "lim1", MEM_KEY) == str(256 * MiB)
    if host_supports("cpu_quota"):  # one CPU = 100 % of one CPU's time
        if V1:
            assert cgroup(lxc_path, "lim1", "cpu.cfs_quota_us") == "100000"
        else:
            assert cgroup(lxc_path, "lim1", "cpu.max") == "100000 100000"
    fields = {f.key: f for f in await backend.get_limits(InstanceRef("lxc", "lim1"))}
    assert fields["cpu_quota"].value == "100" and fields["memory"].value == str(256 * MiB)
    assert all(f.pending == "" for f in fields.values())


async def test_pending_limits_of_a_running_container(backend, lxc_path):
    await backend.create_instance(CreateRequest("pend", BUSYBOX, memory=256 * MiB,
                                                 start=True))
    ref = InstanceRef("lxc", "pend")
    # the config says otherwise than the cgroup (edited while it runs): pending
    path = lxc_path / "pend" / "config"
    path.write_text(path.read_text().replace(str(256 * MiB), str(128 * MiB)))
    fields = {f.key: f for f in await backend.get_limits(ref)}
    assert (fields["memory"].value, fields["memory"].pending) == (str(256 * MiB),
                                                                  str(128 * MiB))
    assert fields["memory"].applies == "live"
    # a cleared CPU set is not undone live: it is pending until the next start
    if (os.cpu_count() or 1) > 1 and len(os.sched_getaffinity(0)) > 1:
        assert await backend.set_limits(ref, {"cpuset": "0"}) == {"cpuset": "live"}
        assert {f.key: f.pending for f in await backend.get_limits(ref)}["cpuset"] == ""
        assert await backend.set_limits(ref, {"cpuset": ""}) == {"cpuset": "restart"}
        fields = {f.key: f for f in await backend.get_limits(ref)}
        assert fields["cpuset"].value == "0"
        assert fields["cpuset"].pending == backend._all_cpus()
    await backend.stop(ref, force=True)
    fields = {f.key: f for f in await backend.get_limits(ref)}
    assert all(f.pending == "" and f.applies in ("restart", "unsupported")
               for f in fields.values())
    assert fields["memory"].value == str(128 * MiB)
    await backend.start(ref)
    assert cgroup(lxc_path, "pend", MEM_KEY) == str(128 * MiB)
    assert all(f.pending == "" for f in await backend.get_limits(ref))


async def test_from_an_lxd_style_tarball(backend, lxc_path, tmp_path):
    import lab as labmod  # tests/ is on sys.path (conftest)

    image = labmod.build_busybox_image(tmp_path / "img")
    source = CreateSource("tarball", "LXD-style image tarball", value=str(image))
    said = []
    inst = await backend.create_instance(CreateRequest("tar1", source, memory=128 * MiB,
                                                       start=True), progress=said.append)
    assert inst.status is InstanceStatus.RUNNING and said[0] == "unpacking image…"
    assert (lxc_path / "tar1" / "rootfs" / "bin" / "busybox").exists()
    assert state(lxc_path, "tar1") == "RUNNING"
    assert cgroup(lxc_path, "tar1", MEM_KEY) == str(128 * MiB)

    (tmp_path / "empty").mkdir()
    bogus = tmp_path / "bogus.tar.gz"
    subprocess.run(["tar", "-czf", str(bogus), "-C", str(tmp_path / "empty"), "."], check=True)
    with pytest.raises(InvalidInput, match="not an LXD-style image"):
        await backend.create_instance(CreateRequest("tar2", CreateSource(
            "tarball", "x", value=str(bogus)), start=True))
    with pytest.raises(InvalidInput, match="does not exist"):
        await backend.create_instance(CreateRequest("tar3", CreateSource(
            "tarball", "x", value=str(tmp_path / "nope.tar.gz"))))
    assert sorted(p.name for p in lxc_path.iterdir()) == ["tar1"]


async def test_bad_requests_leave_nothing_behind(backend, lxc_path):
    bad = [
        (CreateRequest("bad name!", BUSYBOX), InvalidInput, "not a valid container name"),
        (CreateRequest("m1", BUSYBOX, memory=MiB), InvalidInput, "at least 4MiB"),
        (CreateRequest("m2", BUSYBOX, cpus=(os.cpu_count() or 1) + 1), InvalidInput,
         "CPUs must be from 1"),
        (CreateRequest("m3", BUSYBOX, cpus=0), InvalidInput, "CPUs must be from 1"),
        (CreateRequest("m4", BUSYBOX, disk=1 << 30), InvalidInput, "no disk size"),
        (CreateRequest("m5", BUSYBOX, network="nobr0"), InvalidInput, "no bridge named"),
        (CreateRequest("m6", CreateSource("template", "x", value="nosuch")), InvalidInput,
         "No LXC template 'nosuch'"),
        (CreateRequest("m7", CreateSource("image", "LXD", value="x")), InvalidInput,
         "cannot be made"),
        (CreateRequest("m8", BUSYBOX, options={"bogus": "1"}), InvalidInput, "Unknown option"),
        (CreateRequest("m9", BUSYBOX, user_data="#cloud-config"), InvalidInput, "user-data"),
        # a template without the file it needs fails inside lxc-create: destroyed again
        (CreateRequest("m10", BUSYBOX, options={
            "template_args": "--busybox-path /nonexistent-busybox"}), OperationFailed, "m10"),
    ]
    for request, error, message in bad:
        with pytest.raises(error, match=message):
            await backend.create_instance(request)
        assert list(lxc_path.iterdir()) == [], request
    await backend.create_instance(CreateRequest("taken", BUSYBOX))
    with pytest.raises(Conflict, match="already exists"):
        await backend.create_instance(CreateRequest("taken", BUSYBOX))
    assert [p.name for p in lxc_path.iterdir()] == ["taken"]


async def test_a_container_that_does_not_start_stays(backend, lxc_path):
    def progress(text):  # the config is broken between creation and start
        if text == "starting…":
            path = lxc_path / "nostart" / "config"
            path.write_text(path.read_text() + "lxc.no.such.key = 1\n")

    with pytest.raises(OperationFailed, match="created, but could not start"):
        await backend.create_instance(CreateRequest("nostart", BUSYBOX, start=True),
                                      progress=progress)
    path = lxc_path / "nostart" / "config"
    assert path.is_file()  # kept, so its config and log can be looked at; mended, it runs
    path.write_text(path.read_text().replace("lxc.no.such.key = 1\n", ""))
    assert state(lxc_path, "nostart") == "STOPPED"
    await backend.start(InstanceRef("lxc", "nostart"))
    assert state(lxc_path, "nostart") == "RUNNING"


async def test_a_creation_cancelled_after_the_container_was_made_leaves_nothing(backend,
                                                                                 lxc_path):
    """The caller cancels while the limits are being set (the step after the container
    was made): the step's undo destroys the container and its directory."""
    def cancel_when_limiting(text: str) -> None:
        if text == "setting limits…":
            task.cancel()

    task = asyncio.ensure_future(backend.create_instance(
        CreateRequest("undone", BUSYBOX, memory=64 * MiB), progress=cancel_when_limiting))
    with pytest.raises(asyncio.CancelledError):
        await task
    assert list(lxc_path.iterdir()) == []
    assert "undone" not in [i.name for i in await backend.list_instances()]
