"""Creating instances, the rules of resource limits and snapshot extras of the LXD/Incus
backend, against the real lab daemons: lxd1 over its unix socket ('local'), lxd2 over HTTPS
('lab2') and Incus over HTTPS ('inc1'). Every effect is checked with the real CLI. Limits on
the daemons are in test_lxd_limits.py."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime, timedelta, timezone

import pytest
from backend_checks import busybox, cfg, cli_status, host_memory_limit, init_pid, names

from backends.errors import Conflict, InvalidInput, OperationFailed
from backends.lxd import limits as limitsmod
from backends.lxd.create import name_problem
from backends.lxd.snapshots import check_expiry, check_schedule
from backends.models import Capability, InstanceRef, InstanceStatus, InstanceType
from backends.create_models import CreateRequest

MiB = 1024 * 1024


# Pure rules (no daemon) ------------------------------------------------------------------


def test_name_rules_in_words():
    assert name_problem("web-1") is None
    assert "digit" in name_problem("1web")
    assert "start with a hyphen" in name_problem("-web")
    assert "end with a hyphen" in name_problem("web-")
    assert "'_'" in name_problem("web_1")
    assert "63" in name_problem("a" * 64)
    assert name_problem("a" * 63) is None


def test_schedule_and_expiry_rules():
    for ok in ("", "@daily", "@hourly, @startup", "0 6 * * *", "*/15 * * * 1-5", "@never"):
        check_schedule(ok)
    for bad in ("daily", "@often", "0 6 * *", "every day at 6"):
        with pytest.raises(InvalidInput):
            check_schedule(bad)
    assert check_expiry(" 1w   3d ") == "1w 3d"
    for ok in ("", "2d", "6H", "30M 1y"):
        check_expiry(ok)
    for bad in ("2 days", "2D", "1w3d", "-1d"):
        with pytest.raises(InvalidInput):
            check_expiry(bad)


def test_vm_limits_classification_table():
    """VMs cannot run on the lab machines (no vhost_vsock), so the VM rules are checked on
    the table itself: memory needs a restart (no memory hotplug), a CPU count is live with
    cpu_hotplug, a pinned set is not, and a stopped instance takes everything at start."""
    spec = limitsmod.BY_KEY
    hot = frozenset({"cpu_hotplug"})
    run = dict(vm=True, running=True, extensions=hot, live_keys=None)
    assert limitsmod.applies(spec["memory"], value="1GiB", **run) == "restart"
    assert limitsmod.applies(spec["cpus"], value="2", **run) == "live"
    assert limitsmod.applies(spec["cpus"], value="0-1", **run) == "restart"
    assert limitsmod.applies(spec["cpus"], value="2", vm=True, running=True,
                             extensions=frozenset(), live_keys=None) == "restart"
    assert limitsmod.applies(spec["disk"], value="10GiB", **run) == "restart"
    assert limitsmod.applies(spec["net_ingress"], value="10Mbit", **run) == "live"
    for s in limitsmod.SPECS:
        assert limitsmod.applies(s, vm=True, running=False, value="", extensions=hot,
                                 live_keys=None) == "restart"
        assert limitsmod.applies(s, vm=False, running=True, value="", extensions=hot,
                                 live_keys=None) == "live"


def test_values_are_checked_and_normalised():
    n = limitsmod.normalise
    spec = limitsmod.BY_KEY
    assert n(spec["memory"], "1.5GiB") == "1536MiB"
    assert n(spec["memory"], "512MiB") == "512MiB"
    assert n(spec["memory"], "50%") == "50%"
    assert n(spec["disk_read"], "10MB") == "10MB"
    assert n(spec["disk_read"], "100iops") == "100iops"
    assert n(spec["cpus"], "0-1,3") == "0-1,3"
    assert n(spec["cpu_allowance"], "25ms/100ms") == "25ms/100ms"
    for key, bad in (("memory", "lots"), ("memory", "150%"), ("cpus", "0"), ("cpus", "two"),
                     ("cpu_allowance", "150%"), ("processes", "-3"), ("disk_priority", "11"),
                     ("net_ingress", "10MB"), ("disk_write", "fast")):
        with pytest.raises(InvalidInput, match=spec[key].label):
            n(spec[key], bad)


# Creating ----------------------------------------------------------------------------------


async def test_sources_and_options(remote_backend):
    name, backend, info, daemon = remote_backend
    assert Capability.CREATE in backend.capabilities
    assert Capability.RESOURCES in backend.capabilities
    sources = await backend.create_sources()
    image = next(s for s in sources if s.kind == "image" and "busybox" in s.label)
    assert len(image.value) == 64 and image.type is InstanceType.CONTAINER
    assert "x86_64" in image.detail
    empty = [s for s in sources if s.kind == "empty-vm"]
    assert len(empty) == 1 and empty[0].type is InstanceType.VM
    options = await backend.create_options()
    assert "default" in options.profiles and options.default_profiles == ("default",)
    assert "default" in options.storage_pools
    assert options.max_cpus >= 1 and options.can_cancel and options.user_data
    assert options.defaults["memory"] == "512MiB"


async def test_create_container_with_limits_and_start(remote_backend, unique):
    name, backend, info, daemon = remote_backend
    c = unique()
    seen: list[str] = []
    try:
        started = time.monotonic()
        inst = await backend.create_instance(
            CreateRequest(name=c, source=await busybox(backend), cpus=1, memory=256 * MiB,
                          start=True, options={"description": "made by corral"}),
            progress=seen.append)
        elapsed = time.monotonic() - started
        assert inst.status is InstanceStatus.RUNNING and inst.name == c
        assert cfg(daemon, c, "limits.memory") == "256MiB"
        assert cfg(daemon, c, "limits.cpu") == "1"
        assert cli_status(daemon, c) == "RUNNING"
        assert seen[0].startswith("creating container") and seen[-1] == "done"
        assert any(s.startswith("starting") for s in seen)
        assert elapsed < 20
        # the enforced limit, read from the host's cgroup
        assert host_memory_limit(init_pid(daemon, c)) == 256 * MiB
        await backend.list_instances()
        assert "taken" in backend.check_name(c)
    finally:
        daemon.cli("delete", "--force", c, check=False)


async def test_create_with_pool_disk_and_user_data(remote_backend, unique):
    name, backend, info, daemon = remote_backend
    c = unique()
    user_data = "#cloud-config\npackages: [htop]\nruncmd:\n  - echo hello\n"
    try:
        inst = await backend.create_instance(CreateRequest(
            name=c, source=await busybox(backend), storage_pool="default", disk=1024 * MiB,
            user_data=user_data, network="none"))
        assert inst.status is InstanceStatus.STOPPED
        assert cfg(daemon, c, "cloud-init.user-data") == user_data.strip()
        assert daemon.cli("config", "device", "get", c, "root", "size").stdout.strip() == "1GiB"
        assert daemon.cli("config", "device", "get", c, "root", "pool").stdout.strip() \
            == "default"
    finally:
        daemon.cli("delete", "--force", c, check=False)


async def test_bad_input_is_refused_and_nothing_is_made(remote_backend, unique):
    name, backend, info, daemon = remote_backend
    src = await busybox(backend)
    taken = unique("t")
    daemon.cli("init", "busybox", taken)
    try:
        before = names(daemon)
        for bad in ("1web", "-web", "web-", "web_1", "a" * 64, ""):
            assert backend.check_name(bad)
            with pytest.raises(InvalidInput, match="name"):
                await backend.create_instance(CreateRequest(name=bad, source=src))
        await backend.list_instances()
        assert "taken" in backend.check_name(taken)
        with pytest.raises(Conflict, match="taken"):
            await backend.create_instance(CreateRequest(name=taken, source=src))
        fresh = unique("u")
        with pytest.raises(InvalidInput, match="#cloud-config"):
            await backend.create_instance(CreateRequest(
                name=fresh, source=src, user_data="packages: [htop]\n"))
        with pytest.raises(InvalidInput, match="(?i)not valid YAML"):
            await backend.create_instance(CreateRequest(
                name=fresh, source=src, user_data="#cloud-config\npackages: [htop\n"))
        with pytest.raises(InvalidInput, match="profile"):
            await backend.create_instance(CreateRequest(
                name=fresh, source=src, profiles=("default", "no-such-profile")))
        with pytest.raises(OperationFailed) as refused:
            await backend.create_instance(CreateRequest(
                name=fresh, source=src, network="no-such-network"))
        print(f"\n[{name}] unknown network: {refused.value}")
        assert names(daemon) == before
    finally:
        daemon.cli("delete", "--force", taken, check=False)


@pytest.mark.parametrize("moment", ["at-once", "while-creating", "while-starting"])
async def test_cancelled_creation_leaves_nothing(remote_backend, unique, moment):
    name, backend, info, daemon = remote_backend
    c = unique()
    before = names(daemon)
    seen: list[str] = []
    marker = {"at-once": None, "while-creating": "creating", "while-starting": "starting"}
    task = asyncio.create_task(backend.create_instance(
        CreateRequest(name=c, source=await busybox(backend), start=True),
        progress=seen.append))
    try:
        if marker[moment] is None:
            await asyncio.sleep(0)
        else:
            deadline = time.monotonic() + 10
            while not any(s.startswith(marker[moment]) for s in seen):
                assert time.monotonic() < deadline, seen
                await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert names(daemon) == before, f"left behind after cancel {moment}: {seen}"
    finally:
        daemon.cli("delete", "--force", c, check=False)


def drivers(daemon) -> list[str]:
    """The instance drivers the daemon says are operational (``GET /1.0``,
    ``environment.driver``: ``lxc | qemu``). LXD and Incus leave ``qemu`` out when VMs
    cannot run, as on the lab machines where vhost_vsock is not loaded."""
    env = json.loads(daemon.cli("query", "/1.0").stdout)["environment"]
    return [d.strip() for d in str(env.get("driver") or "").split("|")]


async def test_empty_vm_is_created_where_vms_run_and_refused_in_words_elsewhere(
        remote_backend, unique):
    """An empty VM, started: the outcome is pinned by what the daemon says it can do
    (:func:`drivers`). Where VMs run, it is created and running. Where they cannot (these
    machines: no vhost_vsock), the creation itself is refused, the daemon's reason reaches
    the caller, and nothing is left."""
    name, backend, info, daemon = remote_backend
    v = unique("v")
    empty = next(s for s in await backend.create_sources() if s.kind == "empty-vm")
    before = names(daemon)
    request = CreateRequest(name=v, source=empty, cpus=1, memory=512 * MiB, start=True)
    running = drivers(daemon)
    assert "lxc" in running, running  # the daemon answered, with its container driver
    if "qemu" in running:
        try:
            await backend.create_instance(request)
            assert cli_status(daemon, v) == "RUNNING"
        finally:
            daemon.cli("delete", "--force", v, check=False)
        return
    with pytest.raises(OperationFailed) as failed:
        await backend.create_instance(request)
    print(f"\n[{name}] empty VM: {failed.value}")
    assert f"VM '{v}'" in str(failed.value)
    assert "is not supported on this server" in str(failed.value)
    assert names(daemon) == before


async def test_created_but_not_started_says_so(remote_backend, unique):
    """A profile device that only fails at start: the instance stays, stopped, and the
    message says both things."""
    name, backend, info, daemon = remote_backend
    c, profile = unique(), unique("p")
    daemon.cli("profile", "create", profile)
    daemon.cli("profile", "device", "add", profile, "gone", "unix-char",
               "source=/dev/corral-nonexistent", "path=/dev/gone")
    try:
        with pytest.raises(OperationFailed, match="created, but could not start") as failed:
            await backend.create_instance(CreateRequest(
                name=c, source=await busybox(backend), profiles=("default", profile),
                start=True))
        print(f"\n[{name}] start refused: {failed.value}")
        assert "stopped" in str(failed.value)
        assert cli_status(daemon, c) == "STOPPED"
    finally:
        daemon.cli("delete", "--force", c, check=False)
        daemon.cli("profile", "delete", profile, check=False)


# Snapshots ---------------------------------------------------------------------------------


async def test_snapshot_expiry_rename_and_settings(remote_backend, unique):
    name, backend, info, daemon = remote_backend
    c = unique()
    daemon.cli("init", "busybox", c)
    ref = InstanceRef(name, c)
    try:
        when = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(days=2)
        snap = await backend.create_snapshot(ref, "before", expires_at=when)
        assert snap.expires_at == when
        raw = json.loads(daemon.cli("query", f"/1.0/instances/{c}/snapshots/before").stdout)
        assert raw["expires_at"].startswith(when.strftime("%Y-%m-%dT%H:%M:%S"))
        renamed = await backend.rename_snapshot(snap, "after")
        assert renamed.name == "after" and renamed.expires_at == when
        info_text = daemon.cli("info", c).stdout
        assert "after" in info_text and "before" not in info_text
        listed = await backend.list_snapshots(ref)
        assert [(s.name, s.stateful, s.expires_at) for s in listed] == [("after", False, when)]
        with pytest.raises(InvalidInput):
            await backend.rename_snapshot(renamed, "has space")

        assert await backend.snapshot_settings(ref) == {
            "snapshots.schedule": "", "snapshots.expiry": "", "snapshots.pattern": ""}
        values = {"snapshots.schedule": "0 6 * * *", "snapshots.expiry": "1w 3d",
                  "snapshots.pattern": "auto-%d"}
        await backend.set_snapshot_settings(ref, values)
        assert await backend.snapshot_settings(ref) == values
        for key, value in values.items():
            assert cfg(daemon, c, key) == value
        show = daemon.cli("config", "show", c).stdout
        for bad in ({"snapshots.schedule": "every day"}, {"snapshots.expiry": "2 days"},
                    {"snapshots.schedule": "@daily", "snapshots.expiry": "soon"},
                    {"snapshots.count": "3"}):
            with pytest.raises(InvalidInput):
                await backend.set_snapshot_settings(ref, bad)
        assert daemon.cli("config", "show", c).stdout == show
        await backend.set_snapshot_settings(ref, {"snapshots.schedule": "@daily, @startup",
                                                  "snapshots.expiry": ""})
        assert cfg(daemon, c, "snapshots.schedule") == "@daily, @startup"
        assert cfg(daemon, c, "snapshots.expiry") == ""
    finally:
        daemon.cli("delete", "--force", c, check=False)
