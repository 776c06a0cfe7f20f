"""The libvirt networks of a remote (``list_networks``) against the suite's private
libvirtd (``tests/lab_libvirt.py``): a NAT network with DHCP and an isolated one without
addresses, defined (never started: no bridge or dnsmasq is made on the host) by libvirt
directly, read back as the contract's networks with their forward mode, bridge, IPv4
range, DHCP range, state and the domains with a NIC on them."""

from __future__ import annotations

import uuid

import libvirt
import pytest
import pytest_asyncio

import lab_libvirt
from backends.models import Capability, ResourceKind

from .libvirt_helpers import connected, define

live = pytest.mark.asyncio(loop_scope="module")
PREFIX = "lvw-"


@pytest.fixture(scope="module")
def vlab(request):
    return lab_libvirt.session_lab(request)


@pytest.fixture(scope="module")
def networks(vlab):
    """``(nat, isolated)``: two defined networks (the first with DHCP on 10.214.9.0/24)."""
    tag = uuid.uuid4().hex[:6]
    nat, isolated = f"lvwnat{tag}", f"lvwiso{tag}"
    conn = libvirt.open(vlab.unix_uri)
    made = [conn.networkDefineXML(
        f"<network><name>{nat}</name><forward mode='nat'/><bridge name='lvwb{tag}'/>"
        f"<ip address='10.214.9.1' netmask='255.255.255.0'><dhcp>"
        f"<range start='10.214.9.10' end='10.214.9.99'/></dhcp></ip></network>"),
        conn.networkDefineXML(f"<network><name>{isolated}</name>"
                              f"<bridge name='lvwi{tag}'/></network>")]
    yield nat, isolated
    for net in made:
        net.undefine()
    conn.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lv(vlab):
    async with connected(vlab, "lvw", PREFIX) as backend:
        yield backend


@live
async def test_networks_are_listed_with_mode_bridge_range_and_users(lv, vlab, guest,
                                                                    networks):
    nat, isolated = networks
    assert Capability.NETWORKS in lv.capabilities
    assert Capability.NETWORK_MANAGE not in lv.capabilities
    ref = define(vlab, lv, guest, PREFIX, formats=())
    await lv.add_nic(ref, "eth1", network=nat)

    by_name = {n.name: n for n in await lv.list_networks()}
    net = by_name[nat]
    assert net.kind is ResourceKind.NETWORK and net.remote == "lvw" and not net.read_only
    assert (net.get("type"), net.get("ipv4"), net.get("nat"), net.get("status")) == (
        "nat", "10.214.9.1/24", "v4", "inactive")
    assert net.get("bridge").startswith("lvwb") and net.get("dhcp") == "10.214.9.10-10.214.9.99"
    assert net.used_by == (f"instance {ref.name}",) and net.get("used_by") == "1"
    assert "DHCP 10.214.9.10-10.214.9.99" in net.description

    iso = by_name[isolated]
    assert (iso.get("type"), iso.get("ipv4"), iso.get("nat"), iso.used_by) == (
        "isolated", "", "no", ())

    await lv.remove_nic(ref, "eth1")
    assert (await lv.list_networks())[0].remote == "lvw"
    assert {n.name: n.used_by for n in await lv.list_networks()}[nat] == ()
