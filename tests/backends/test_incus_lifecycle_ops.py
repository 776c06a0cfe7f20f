"""Export and import, clone, rename, description and NICs on the lab's Incus daemon ('inc1',
over HTTPS), as tests/backends/test_lxd_lifecycle_ops.py does them on LXD. Every effect is
checked with the real `incus` CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from backend_checks import names

from backends import get_backend
from backends.errors import Conflict, InvalidInput, NotFound
from backends.models import InstanceRef, InstanceStatus
from backends.remotes import discover


@pytest.fixture
async def inc1(lab, lab_env):
    """The connected backend of 'inc1' and the daemon behind it."""
    remotes = {r.name: r for r in discover(lab_env).remotes}
    backend = get_backend(remotes["inc1"], timeout=10)
    await backend.connect()
    yield backend, lab.incus1
    await backend.close()


def query(daemon, path):
    return json.loads(daemon.cli("query", path).stdout)


def snapshots(daemon, name):
    return sorted(u.rsplit("/", 1)[-1] for u in query(daemon, f"/1.0/instances/{name}/snapshots"))


def make(daemon, name, *, snapshot=""):
    daemon.cli("init", "busybox", name)
    if snapshot:
        daemon.cli("snapshot", "create", name, snapshot)


def gone(daemon, *instances):
    for n in instances:
        daemon.cli("delete", "--force", n, check=False)


def ref(name):
    return InstanceRef("inc1", name)


async def test_export_and_import_on_incus(inc1, unique, tmp_path):
    backend, d = inc1
    c, back, bare_name = unique(), unique("i"), unique("b")
    make(d, c, snapshot="snap0")
    d.cli("config", "set", c, "user.marker", "from-inc1")
    target = tmp_path / f"backup{backend.backup_extension}"
    seen: list[str] = []
    try:
        size = await backend.export_instance(ref(c), str(target), progress=seen.append)
        print(f"\nexport: {size} bytes; {seen}")
        assert target.stat().st_size == size > 100_000
        assert not Path(str(target) + ".part").exists()
        assert query(d, f"/1.0/instances/{c}/backups") == []  # the server's copy is gone
        with pytest.raises(InvalidInput, match="already exists"):
            await backend.export_instance(ref(c), str(target))

        inst = await backend.import_instance(str(target), back, progress=seen.append)
        assert inst.name == back and inst.status is InstanceStatus.STOPPED
        assert back in names(d) and snapshots(d, back) == ["snap0"]
        assert d.cli("config", "get", back, "user.marker").stdout.strip() == "from-inc1"
        with pytest.raises(Conflict, match="already taken on 'inc1'"):
            await backend.import_instance(str(target), back)

        bare = tmp_path / f"bare{backend.backup_extension}"
        await backend.export_instance(ref(c), str(bare), with_snapshots=False)
        await backend.import_instance(str(bare), bare_name)
        assert snapshots(d, bare_name) == []
    finally:
        gone(d, c, back, bare_name)


async def test_clone_on_incus(inc1, unique):
    backend, d = inc1
    c, full, bare = unique(), unique("f"), unique("b")
    make(d, c, snapshot="s0")
    d.cli("config", "set", c, "user.marker", "cloned")
    try:
        inst = await backend.clone_instance(ref(c), full)
        assert inst.name == full and snapshots(d, full) == ["s0"]
        assert d.cli("config", "get", full, "user.marker").stdout.strip() == "cloned"
        await backend.clone_instance(ref(c), bare, with_snapshots=False)
        assert snapshots(d, bare) == []
        assert {c, full, bare} <= names(d)
        with pytest.raises(Conflict, match="already taken"):
            await backend.clone_instance(ref(c), full)
        with pytest.raises(InvalidInput, match="name"):
            await backend.clone_instance(ref(c), "bad_name")
        with pytest.raises(NotFound):
            await backend.clone_instance(ref(unique("x")), unique("y"))
    finally:
        gone(d, c, full, bare)


async def test_rename_and_description_on_incus(inc1, unique):
    backend, d = inc1
    c, new, other = unique(), unique("n"), unique("o")
    make(d, c, snapshot="s0")
    make(d, other)
    try:
        await backend.set_description(ref(c), "  made by corral  ")
        assert query(d, f"/1.0/instances/{c}")["description"] == "made by corral"
        inst = await backend.rename_instance(ref(c), new)
        assert inst.name == new and inst.description == "made by corral"
        assert new in names(d) and c not in names(d)
        assert snapshots(d, new) == ["s0"]
        with pytest.raises(Conflict, match="already taken"):
            await backend.rename_instance(ref(new), other)
        d.cli("start", new)
        with pytest.raises(Conflict, match="is running: stop it first"):
            await backend.rename_instance(ref(new), unique("z"))
        await backend.set_description(ref(new), "")
        assert query(d, f"/1.0/instances/{new}")["description"] == ""
    finally:
        gone(d, c, new, other)


async def test_nics_on_incus(inc1, unique):
    backend, d = inc1
    bridge = "cib" + unique()[-6:]
    c = unique()
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    net = next(f"10.{a}.{b}" for a in range(150, 250) for b in range(3, 250, 7)
               if f" 10.{a}.{b}." not in used)
    d.cli("network", "create", bridge, f"ipv4.address={net}.1/24", "ipv6.address=none")
    make(d, c)
    try:
        r = ref(c)
        assert await backend.list_nics(r) == {}
        await backend.add_nic(r, "eth0", network=bridge, ipv4=f"{net}.50")
        assert d.cli("config", "device", "get", c, "eth0", "network").stdout.strip() == bridge
        assert d.cli("config", "device", "get", c, "eth0", "ipv4.address").stdout.strip() \
            == f"{net}.50"
        assert (await backend.list_nics(r))["eth0"]["ipv4.address"] == f"{net}.50"
        with pytest.raises(Conflict, match="already has a device named 'eth0'"):
            await backend.add_nic(r, "eth0", network=bridge)
        with pytest.raises(InvalidInput, match="not in"):
            await backend.add_nic(r, "eth1", network=bridge, ipv4="192.0.2.200")
        with pytest.raises(InvalidInput, match="no network 'nonet'"):
            await backend.add_nic(r, "eth1", network="nonet")
        await backend.add_nic(r, "eth2", nictype="routed", ipv4="192.0.2.10, 192.0.2.11")
        assert d.cli("config", "device", "get", c, "eth2", "ipv4.address").stdout.strip() \
            == "192.0.2.10,192.0.2.11"
        await backend.set_nic_addresses(r, "eth0", ipv4=f"{net}.60")
        assert d.cli("config", "device", "get", c, "eth0", "ipv4.address").stdout.strip() \
            == f"{net}.60"
        await backend.remove_nic(r, "eth2")
        assert set(await backend.list_nics(r)) == {"eth0"}
        assert "eth2" not in query(d, f"/1.0/instances/{c}")["devices"]
        d.cli("start", c)  # the daemon takes the NIC as set
        assert query(d, f"/1.0/instances/{c}")["status"] == "Running"
        with pytest.raises(NotFound):
            await backend.remove_nic(r, "eth9")
        await backend.set_nic_addresses(r, "eth0")  # cleared
        assert "ipv4.address" not in d.cli("config", "show", c).stdout
    finally:
        gone(d, c)
        d.cli("network", "delete", bridge, check=False)
