"""Resource limits of the LXD/Incus backend against the real lab daemons: lxd1 over its
unix socket ('local'), lxd2 over HTTPS ('lab2') and Incus over HTTPS ('inc1'). Every effect
is checked with the real CLI or, for memory, the kernel's cgroup. Limits the host cannot
apply are pinned by asking the host (its kernel, the daemon's own start-up words)."""

from __future__ import annotations

import asyncio
import subprocess
import uuid

import pytest
from backend_checks import busybox, cfg, host_memory_limit, init_pid, watching

from backends import get_backend
from backends.errors import InvalidInput, OperationFailed, Unsupported
from backends.lxd import limits as limitsmod
from backends.models import EventKind, InstanceRef, InstanceStatus
from backends.create_models import CreateRequest
from backends.remotes import discover

MiB = 1024 * 1024


@pytest.fixture
async def local_backend(lab, lab_env):
    remotes = {r.name: r for r in discover(lab_env).remotes}
    backend = get_backend(remotes["local"], timeout=10)
    await backend.connect()
    yield backend, lab.lxd1
    await backend.close()


def host_polices() -> tuple[bool, str]:
    """Whether this kernel can police traffic with tc, and its words when it cannot: what
    LXD does to the host's end of a veth for ``limits.egress`` (an ingress qdisc and a u32
    filter with the police action), tried on a veth in a private network namespace."""
    script = ("ip link add crl0 type veth peer name crl1 && ip link set crl0 up && "
              "tc qdisc add dev crl0 handle ffff:0 ingress && "
              "tc filter add dev crl0 parent ffff:0 protocol all u32 match u32 0 0 "
              "police rate 20000000bit burst 1024k mtu 64kb drop")
    proc = subprocess.run(["unshare", "--net", "sh", "-ec", script], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=30)
    return proc.returncode == 0, (proc.stderr or proc.stdout).strip()


def disk_priority_ignored(daemon) -> bool:
    """Whether the daemon said at its start that it found no blkio.weight cgroup file
    (LXD and Incus log "Couldn't find the CGroup blkio.weight, disk priority will be
    ignored"): then it refuses limits.disk.priority."""
    return "disk priority will be ignored" in daemon.log.read_text(errors="replace")


async def test_network_choice_and_nic_limits(local_backend, unique):
    """On lxd1 with a bridge (made here, no addresses): the NIC joins it, shows in the
    options, and its ingress limit is set live. An egress limit needs the kernel's tc police
    action (LXD polices what enters the host's end of the veth): the outcome is pinned by
    asking the kernel (:func:`host_polices`). Where it polices, the limit is set live; where
    it cannot (these machines), the daemon refuses, nothing changes and the field then shows
    as unsupported."""
    backend, daemon = local_backend
    bridge = "crl" + uuid.uuid4().hex[:8]
    daemon.cli("network", "create", bridge, "ipv4.address=none", "ipv6.address=none")
    c = unique()
    try:
        assert bridge in (await backend.create_options()).networks
        await backend.create_instance(CreateRequest(
            name=c, source=await busybox(backend), network=bridge, start=True))
        assert daemon.cli("config", "device", "get", c, "eth0", "network").stdout.strip() \
            == bridge
        ref = InstanceRef("local", c)
        fields = {f.key: f for f in await backend.get_limits(ref)}
        assert fields["net_ingress"].applies == "live"
        assert await backend.set_limits(ref, {"net_ingress": "10Mbit"}) \
            == {"net_ingress": "live"}
        assert daemon.cli("config", "device", "get", c, "eth0",
                          "limits.ingress").stdout.strip() == "10Mbit"
        polices, words = host_polices()
        if polices:
            assert await backend.set_limits(ref, {"net_egress": "20Mbit"}) \
                == {"net_egress": "live"}
            assert daemon.cli("config", "device", "get", c, "eth0",
                              "limits.egress").stdout.strip() == "20Mbit"
        else:  # these machines: "Failed to load TC action module"
            print(f"\n[local] this host cannot police: {words}")
            with pytest.raises(OperationFailed) as refused:
                await backend.set_limits(ref, {"net_egress": "20Mbit"})
            print(f"[local] egress refused: {refused.value}")
            assert daemon.cli("config", "device", "get", c, "eth0",
                              "limits.egress").stdout.strip() == ""
            fields = {f.key: f for f in await backend.get_limits(ref)}
            assert fields["net_egress"].applies == "unsupported"
            assert "police" in fields["net_egress"].hint
    finally:
        daemon.cli("delete", "--force", c, check=False)
        daemon.cli("network", "delete", bridge, check=False)


# Limits ------------------------------------------------------------------------------------


async def test_limits_change_live_on_a_running_container(remote_backend, unique):
    name, backend, info, daemon = remote_backend
    c = unique()
    daemon.cli("launch", "busybox", c, "-c", "limits.memory=256MiB")
    ref = InstanceRef(name, c)
    try:
        fields = {f.key: f for f in await backend.get_limits(ref)}
        assert fields["memory"].value == "256MiB" and fields["memory"].applies == "live"
        assert fields["cpus"].applies == "live"
        assert fields["net_ingress"].applies == "unsupported"
        assert "no network interface" in fields["net_ingress"].hint
        print(f"\n[{name}] disk: {fields['disk'].applies}: {fields['disk'].hint}")
        assert fields["disk"].applies == "unsupported" and "dir" in fields["disk"].hint
        result = await backend.set_limits(ref, {"memory": "300MiB", "cpus": "1",
                                                "processes": "200",
                                                "cpu_allowance": "50%",
                                                "disk_read": "10MB", "disk_write": "100iops"})
        assert set(result.values()) == {"live"}
        assert cfg(daemon, c, "limits.memory") == "300MiB"
        assert cfg(daemon, c, "limits.cpu") == "1"
        assert cfg(daemon, c, "limits.processes") == "200"
        assert cfg(daemon, c, "limits.cpu.allowance") == "50%"
        assert daemon.cli("config", "device", "get", c, "root", "limits.read").stdout.strip() \
            == "10MB"
        assert host_memory_limit(init_pid(daemon, c)) == 300 * MiB
        fields = {f.key: f for f in await backend.get_limits(ref)}
        assert fields["memory"].value == "300MiB" and not fields["memory"].pending
        # "" removes a limit
        await backend.set_limits(ref, {"processes": ""})
        assert cfg(daemon, c, "limits.processes") == ""
        with pytest.raises(Unsupported, match="dir"):
            await backend.set_limits(ref, {"disk": "2GiB"})
    finally:
        daemon.cli("delete", "--force", c, check=False)


async def test_invalid_values_change_nothing(remote_backend, unique):
    name, backend, info, daemon = remote_backend
    c = unique()
    daemon.cli("launch", "busybox", c, "-c", "limits.memory=256MiB")
    ref = InstanceRef(name, c)
    try:
        show = daemon.cli("config", "show", c).stdout
        for changes, field in (({"memory": "300MiB", "processes": "lots"}, "Processes"),
                               ({"memory": "300MiB", "disk_priority": "11"}, "Disk priority"),
                               ({"cpu_allowance": "150%"}, "CPU allowance"),
                               ({"memory": "a lot"}, "Memory"),
                               ({"net_ingress": "fast"}, "Network in"),
                               ({"bogus": "1"}, "bogus")):
            with pytest.raises(InvalidInput, match=field):
                await backend.set_limits(ref, changes)
        with pytest.raises(Unsupported, match="no network interface"):
            await backend.set_limits(ref, {"memory": "300MiB", "net_egress": "10Mbit"})
        assert daemon.cli("config", "show", c).stdout == show
    finally:
        daemon.cli("delete", "--force", c, check=False)


async def test_disk_priority_as_the_host_allows(remote_backend, unique):
    """limits.disk.priority needs the blkio.weight cgroup file. The outcome is pinned by
    what the daemon said when it started (:func:`disk_priority_ignored`): where it found
    the file, the priority is set live; where it did not (these machines), it refuses,
    nothing changes and the field then shows as unsupported."""
    name, backend, info, daemon = remote_backend
    c = unique()
    daemon.cli("launch", "busybox", c)
    ref = InstanceRef(name, c)
    try:
        if not disk_priority_ignored(daemon):
            assert await backend.set_limits(ref, {"disk_priority": "5"}) \
                == {"disk_priority": "live"}
            assert cfg(daemon, c, "limits.disk.priority") == "5"
        else:  # these machines: cgroup v1 blkio without blkio.weight
            with pytest.raises(OperationFailed) as refused:
                await backend.set_limits(ref, {"disk_priority": "5"})
            print(f"\n[{name}] disk priority refused: {refused.value}")
            assert "blkio.weight" in str(refused.value) or "controller is missing" in str(
                refused.value)
            assert cfg(daemon, c, "limits.disk.priority") == ""
            fields = {f.key: f for f in await backend.get_limits(ref)}
            assert fields["disk_priority"].applies == "unsupported"
        fields = {f.key: f for f in await backend.get_limits(ref)}
        if name == "inc1":  # Incus dropped limits.network.priority
            assert fields["net_priority"].applies == "unsupported"
        else:
            assert await backend.set_limits(ref, {"net_priority": "3"}) \
                == {"net_priority": "live"}
            assert cfg(daemon, c, "limits.network.priority") == "3"
    finally:
        daemon.cli("delete", "--force", c, check=False)


async def test_stopped_instance_takes_everything_at_next_start(remote_backend, unique):
    name, backend, info, daemon = remote_backend
    c = unique()
    daemon.cli("init", "busybox", c)
    ref = InstanceRef(name, c)
    try:
        fields = await backend.get_limits(ref)
        supported = [f for f in fields if f.applies != "unsupported"]
        assert supported and all(f.applies == "restart" for f in supported)
        assert all("next start" in f.hint for f in supported)
        assert await backend.set_limits(ref, {"memory": "128MiB"}) == {"memory": "restart"}
        assert cfg(daemon, c, "limits.memory") == "128MiB"
        # nothing is pending on a stopped instance: the saved value is what it starts with
        fields = {f.key: f for f in await backend.get_limits(ref)}
        assert fields["memory"].value == "128MiB" and fields["memory"].pending == ""
    finally:
        daemon.cli("delete", "--force", c, check=False)


async def test_restart_only_change_is_pending_until_the_next_start(remote_backend, unique,
                                                                   monkeypatch):
    """A running VM cannot exist on the lab machines, so a container stands in with
    limits.processes declared restart-only (as limits.memory is for a VM): the change is
    saved, shown as pending with the old value still in effect, and the pending mark ends
    with the instance-restarted event (watch) or a stop→start seen by get_instance."""
    name, backend, info, daemon = remote_backend
    monkeypatch.setitem(limitsmod.CONTAINER_LIVE, "limits.processes", False)
    live = await backend._config_metadata()
    if live is not None:
        monkeypatch.setitem(live, "limits.processes", False)
    c = unique()
    daemon.cli("launch", "busybox", c, "-c", "limits.processes=100")
    ref = InstanceRef(name, c)
    try:
        async with watching(backend) as events:
            first = await asyncio.wait_for(events.get(), 10)
            assert first.action == "connected"
            assert await backend.set_limits(ref, {"processes": "200", "memory": "300MiB"}) \
                == {"processes": "restart", "memory": "live"}
            assert cfg(daemon, c, "limits.processes") == "200"  # saved
            fields = {f.key: f for f in await backend.get_limits(ref)}
            assert (fields["processes"].value, fields["processes"].pending) == ("100", "200")
            assert fields["memory"].pending == ""
            await backend.restart(ref, force=True)
            while True:
                ev = await asyncio.wait_for(events.get(), 15)
                if ev.kind is EventKind.LIFECYCLE and ev.ref == ref \
                        and ev.action in ("instance-restarted", "instance-started"):
                    break
            fields = {f.key: f for f in await backend.get_limits(ref)}
            assert (fields["processes"].value, fields["processes"].pending) == ("200", "")

            # the other way: a stop and a start seen by get_instance
            await backend.set_limits(ref, {"processes": "300"})
            assert {f.key: f for f in await backend.get_limits(ref)}["processes"].pending == "300"
            daemon.cli("stop", "--force", c)
            assert (await backend.get_instance(ref)).status is InstanceStatus.STOPPED
            daemon.cli("start", c)
            assert (await backend.get_instance(ref)).status is InstanceStatus.RUNNING
            fields = {f.key: f for f in await backend.get_limits(ref)}
            assert (fields["processes"].value, fields["processes"].pending) == ("300", "")
    finally:
        daemon.cli("delete", "--force", c, check=False)


async def test_concurrent_edit_is_not_lost(remote_backend, unique, monkeypatch):
    """Another client changes the instance between our read and our write: the ETag makes
    the daemon refuse our stale write, and the change is re-applied on the fresh config."""
    name, backend, info, daemon = remote_backend
    c = unique()
    daemon.cli("init", "busybox", c)
    ref = InstanceRef(name, c)
    original = backend.ops.update_instance
    meddled = []

    async def meddling(ref_, change):
        def meddle(data):
            if not meddled:
                meddled.append(True)
                daemon.cli("config", "set", c, "user.other", "kept")
            return change(data)
        return await original(ref_, meddle)

    monkeypatch.setattr(backend.ops, "update_instance", meddling)
    try:
        await backend.set_limits(ref, {"memory": "200MiB"})
        assert cfg(daemon, c, "limits.memory") == "200MiB"
        assert cfg(daemon, c, "user.other") == "kept"
    finally:
        daemon.cli("delete", "--force", c, check=False)
