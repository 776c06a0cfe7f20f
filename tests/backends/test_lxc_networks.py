"""LXC lists the host's bridges as read-only networks (it manages none itself): a bridge
made on the host is listed, with its address, and the containers whose config uses it."""

from __future__ import annotations

import asyncio
import subprocess
import uuid

from backends.base import contract_problems
from backends.lxc import LXCBackend
from backends.models import Capability, Remote


def test_host_bridges_are_listed_read_only(lxc_path):
    name = f"ctb{uuid.uuid4().hex[:6]}"
    subprocess.run(["ip", "link", "add", name, "type", "bridge"], check=True)
    try:
        subprocess.run(["ip", "addr", "add", "10.231.77.1/24", "dev", name], check=True)
        (lxc_path / "c1").mkdir()
        (lxc_path / "c1" / "config").write_text(
            f"lxc.uts.name = c1\nlxc.net.0.type = veth\nlxc.net.0.link = {name}\n")
        backend = LXCBackend(Remote("lxc", "lxc", str(lxc_path)))
        assert Capability.NETWORKS in backend.capabilities
        assert Capability.NETWORK_MANAGE not in backend.capabilities
        assert contract_problems(LXCBackend) == []
        nets = {n.name: n for n in asyncio.run(backend.list_networks())}
        assert name in nets
        net = nets[name]
        assert net.read_only and net.get("type") == "bridge" and net.get("managed") == "no"
        assert net.get("ipv4") == "10.231.77.1/24"
        assert net.used_by == ("container c1",)
    finally:
        subprocess.run(["ip", "link", "del", name], check=False)
