"""NICs of the libvirt backend against the suite's private libvirtd
(``tests/lab_libvirt.py``), read back from libvirt's XML (not through corral): NICs on a
libvirt network, a host bridge and macvtap added to a shut-off domain's definition, named by
their user alias; an IPv4 address of a network NIC is that network's DHCP host entry for its
MAC, changed and released with it; what libvirt cannot do honestly (routed NICs, IPv6,
addresses of bridged NICs) is refused in words with nothing changed. A running domain gets a
NIC live and in its definition (on a bridge made for the test). The networks are defined,
never started: no bridge or dnsmasq of libvirt's own is made on the host."""

from __future__ import annotations

import contextlib
import subprocess
import uuid
import xml.etree.ElementTree as ET

import libvirt
import pytest
import pytest_asyncio

import lab_libvirt
from backends.errors import Conflict, InvalidInput, NotFound, Unsupported

from .libvirt_helpers import connected, define, domain_xml

live = pytest.mark.asyncio(loop_scope="module")
PREFIX = "lvn-"


@pytest.fixture(scope="module")
def vlab(request):
    return lab_libvirt.session_lab(request)


@pytest.fixture(scope="module")
def network(vlab):
    """A defined (not started) libvirt network with DHCP on 10.213.7.0/24."""
    name = f"lvnet{uuid.uuid4().hex[:6]}"
    conn = libvirt.open(vlab.unix_uri)
    net = conn.networkDefineXML(
        f"<network><name>{name}</name><bridge name='lvb{uuid.uuid4().hex[:6]}'/>"
        f"<ip address='10.213.7.1' netmask='255.255.255.0'><dhcp>"
        f"<range start='10.213.7.100' end='10.213.7.200'/></dhcp></ip></network>")
    yield name
    net.undefine()
    conn.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lv(vlab):
    async with connected(vlab, "lvn", PREFIX) as backend:
        yield backend


def ifaces(vlab, name: str, *, saved: bool = True) -> dict[str, ET.Element]:
    out = {}
    for iface in domain_xml(vlab, name, saved=saved).iterfind("devices/interface"):
        alias = iface.find("alias")
        out[alias.get("name") if alias is not None else iface.find("mac").get("address")] = \
            iface
    return out


def reservations(vlab, network: str) -> dict[str, str]:
    conn = libvirt.open(vlab.unix_uri)
    try:
        root = ET.fromstring(conn.networkLookupByName(network).XMLDesc(0))
    finally:
        conn.close()
    return {h.get("mac"): h.get("ip") for h in root.iterfind("ip/dhcp/host")}


@live
async def test_nics_of_a_shut_off_domain(lv, vlab, guest, network):
    ref = define(vlab, lv, guest, PREFIX, formats=())
    assert await lv.list_nics(ref) == {}
    await lv.add_nic(ref, "eth1", network=network, ipv4="10.213.7.50")
    await lv.add_nic(ref, "br1", nictype="bridged", parent="lvnobridge0")
    await lv.add_nic(ref, "mv1", nictype="macvlan", parent="eth0")
    saved = ifaces(vlab, ref.name)
    assert set(saved) == {"ua-eth1", "ua-br1", "ua-mv1"}
    assert saved["ua-eth1"].get("type") == "network"
    assert saved["ua-eth1"].find("source").get("network") == network
    assert saved["ua-br1"].get("type") == "bridge"
    assert saved["ua-br1"].find("source").get("bridge") == "lvnobridge0"
    assert (saved["ua-mv1"].get("type"), saved["ua-mv1"].find("source").get("dev")) == (
        "direct", "eth0")
    mac = saved["ua-eth1"].find("mac").get("address")
    assert reservations(vlab, network) == {mac: "10.213.7.50"}

    nics = await lv.list_nics(ref)
    assert nics["eth1"]["network"] == network and nics["eth1"]["hwaddr"] == mac
    assert nics["eth1"]["ipv4.address"] == "10.213.7.50"
    assert (nics["br1"]["nictype"], nics["br1"]["parent"]) == ("bridged", "lvnobridge0")
    assert (nics["mv1"]["nictype"], nics["mv1"]["parent"]) == ("macvlan", "eth0")

    # what libvirt cannot do is refused, and nothing is added
    refusals = [
        (Unsupported, "no routed NICs", dict(nictype="routed", parent="eth0")),
        (Unsupported, "IPv6", dict(network=network, ipv6="fd00::5")),
        (Unsupported, "not on a libvirt network", dict(nictype="bridged", parent="x0",
                                                       ipv4="10.213.7.51")),
        (InvalidInput, "not a host address of a subnet", dict(network=network,
                                                              ipv4="10.9.9.9")),
        (Conflict, "reserved for", dict(network=network, ipv4="10.213.7.50")),
        (NotFound, "no libvirt network named", dict(network="lvnet-none")),
    ]
    for error, words, kwargs in refusals:
        with pytest.raises(error, match=words):
            await lv.add_nic(ref, "eth9", **kwargs)
    with pytest.raises(Conflict, match="already has a NIC named eth1"):
        await lv.add_nic(ref, "eth1", network=network)
    with pytest.raises(InvalidInput, match="letters, digits"):
        await lv.add_nic(ref, "eth.9", network=network)
    assert set(ifaces(vlab, ref.name)) == {"ua-eth1", "ua-br1", "ua-mv1"}
    assert reservations(vlab, network) == {mac: "10.213.7.50"}

    # addresses: the network's DHCP host entry, changed and released
    await lv.set_nic_addresses(ref, "eth1", ipv4="10.213.7.60")
    assert reservations(vlab, network) == {mac: "10.213.7.60"}
    with pytest.raises(Unsupported, match="IPv6"):
        await lv.set_nic_addresses(ref, "eth1", ipv4="10.213.7.60", ipv6="fd00::1")
    with pytest.raises(Unsupported, match="not on a libvirt network \\(lvnobridge0\\)"):
        await lv.set_nic_addresses(ref, "br1", ipv4="10.213.7.61")
    await lv.set_nic_addresses(ref, "br1")  # nothing to clear
    await lv.set_nic_addresses(ref, "eth1")
    assert reservations(vlab, network) == {}
    await lv.set_nic_addresses(ref, "eth1", ipv4="10.213.7.70")

    # removing a NIC removes its host entry too
    await lv.remove_nic(ref, "eth1")
    await lv.remove_nic(ref, "mv1")
    assert set(ifaces(vlab, ref.name)) == {"ua-br1"}
    assert reservations(vlab, network) == {}
    with pytest.raises(NotFound, match="no NIC named eth1"):
        await lv.remove_nic(ref, "eth1")


@live
async def test_a_nic_without_an_alias_is_named_by_its_mac(lv, vlab, guest):
    ref = define(vlab, lv, guest, PREFIX, formats=())
    subprocess.run(["virsh", "-c", vlab.unix_uri, "attach-interface", ref.name, "bridge",
                    "lvnobridge0", "--mac", "52:54:00:aa:bb:cc", "--config"],
                   check=True, capture_output=True)
    assert list(await lv.list_nics(ref)) == ["52:54:00:aa:bb:cc"]
    await lv.remove_nic(ref, "52:54:00:aa:bb:cc")
    assert ifaces(vlab, ref.name) == {}


@live
async def test_a_running_domain_gets_a_nic_live_and_saved(lv, vlab, guest):
    bridge = f"lvnb{uuid.uuid4().hex[:6]}"
    subprocess.run(["ip", "link", "add", bridge, "type", "bridge"], check=True)
    ref = define(vlab, lv, guest, PREFIX, formats=())
    try:
        subprocess.run(["ip", "link", "set", bridge, "up"], check=True)
        await lv.start(ref)
        await lv.add_nic(ref, "eth1", nictype="bridged", parent=bridge)
        assert "ua-eth1" in ifaces(vlab, ref.name, saved=False)
        assert "ua-eth1" in ifaces(vlab, ref.name)
        assert (await lv.list_nics(ref))["eth1"]["parent"] == bridge
        try:
            await lv.remove_nic(ref, "eth1")
        except Conflict as e:  # a guest that does not answer ACPI hot-unplug (yet)
            assert "has not released it yet" in str(e)
        assert "ua-eth1" not in ifaces(vlab, ref.name)
    finally:
        with contextlib.suppress(Exception):
            await lv.stop(ref, force=True)
        subprocess.run(["ip", "link", "del", bridge], check=False)
