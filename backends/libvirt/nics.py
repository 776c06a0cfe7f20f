"""Network interfaces of libvirt domains: ``list_nics``, ``add_nic``, ``remove_nic`` and
``set_nic_addresses``.

- A NIC's name is its libvirt user alias without ``ua-`` (corral gives one to every NIC
  it adds: ``eth1`` is ``<alias name='ua-eth1'/>``); a NIC without one is named by its MAC
  address. The list is the saved definition's (the running one's for a transient domain).
- Added NICs are virtio, with a MAC address corral picks (``52:54:00:…``), connected to a
  libvirt network (``network=``, ``<interface type='network'>``), a host bridge
  (``nictype="bridged"``) or macvtap on a host interface (``nictype="macvlan"``,
  ``<interface type='direct'>``); routed NICs are not libvirt's and are refused. A
  running domain gets the NIC live and in its saved definition, a shut-off one in its
  definition (for the next start).
- Static addresses are honest only where libvirt hands them out: an IPv4 address of a
  NIC on a libvirt network is a DHCP host entry of that network (``virNetworkUpdate``,
  its MAC to the address, in the network's saved and running definition), which the
  guest gets at its next DHCP lease. The address must be in a subnet of the network that
  has DHCP, and not another host's. IPv6 (libvirt reserves DHCPv6 addresses by client ID
  or host name, not by MAC) and addresses of bridged or macvtap NICs (the guest's own or
  another DHCP server's) are refused in words; clearing them is a no-op. Removing a NIC
  removes its DHCP host entries too.
- A running guest must release a NIC removed live (ACPI hot-unplug): when it has not
  within a few seconds, corral says so (it is gone from the definition, and from the
  guest at its next start).
"""

from __future__ import annotations

import asyncio
import ipaddress
import random
import re
import xml.etree.ElementTree as ET

import libvirt

from ..base import Backend
from ..errors import Conflict, InvalidInput, NotFound, Unsupported
from ..models import InstanceRef
from .connection import Connection

LIVE, CONFIG = libvirt.VIR_DOMAIN_AFFECT_LIVE, libvirt.VIR_DOMAIN_AFFECT_CONFIG
NET_LIVE, NET_CONFIG = (libvirt.VIR_NETWORK_UPDATE_AFFECT_LIVE,
                        libvirt.VIR_NETWORK_UPDATE_AFFECT_CONFIG)
DHCP_HOST = libvirt.VIR_NETWORK_SECTION_IP_DHCP_HOST
NAME = re.compile(r"^[A-Za-z0-9_-]{1,60}$")
KINDS = {"bridge": "bridged", "direct": "macvlan"}


def nic_name(iface: ET.Element) -> str:
    alias = iface.find("alias")
    if alias is not None and alias.get("name", "").startswith("ua-"):
        return alias.get("name", "")[3:]
    mac = iface.find("mac")
    return mac.get("address", "?") if mac is not None else "?"


def interfaces(xml: str) -> dict[str, ET.Element]:
    return {nic_name(i): i for i in ET.fromstring(xml).iterfind("devices/interface")}


def mac_of(iface: ET.Element) -> str:
    mac = iface.find("mac")
    return (mac.get("address", "") if mac is not None else "").lower()


def describe(iface: ET.Element) -> dict[str, str]:
    kind = iface.get("type", "")
    source = iface.find("source")
    model = iface.find("model")
    out = {"type": "nic", "hwaddr": mac_of(iface)}
    if model is not None:
        out["model"] = model.get("type", "")
    if kind == "network" and source is not None:
        out["network"] = source.get("network", "")
    elif kind in KINDS and source is not None:
        out["nictype"] = KINDS[kind]
        out["parent"] = source.get("bridge") or source.get("dev") or ""
    else:
        out["nictype"] = kind
    return out


def dhcp_hosts(net_xml: str) -> list[tuple[int, ET.Element, ET.Element]]:
    """Every ``(index of its <ip>, the <ip>, the <host>)`` of a network's DHCP."""
    out = []
    for n, ip in enumerate(ET.fromstring(net_xml).iterfind("ip")):
        for host in ip.iterfind("dhcp/host"):
            out.append((n, ip, host))
    return out


def subnet_index(net_xml: str, address: str) -> int | None:
    """The index of the network's ``<ip>`` with DHCP whose subnet holds ``address``."""
    wanted = ipaddress.ip_address(address)
    for n, ip in enumerate(ET.fromstring(net_xml).iterfind("ip")):
        if ip.find("dhcp") is None or not ip.get("address"):
            continue
        prefix = ip.get("prefix") or ip.get("netmask") or ("24" if wanted.version == 4
                                                           else "64")
        try:
            subnet = ipaddress.ip_interface(f"{ip.get('address')}/{prefix}").network
        except ValueError:
            continue
        if wanted in subnet and wanted not in (subnet.network_address,
                                               subnet.broadcast_address,
                                               ipaddress.ip_address(ip.get("address", ""))):
            return n
    return None


def new_mac(taken: set[str]) -> str:
    while True:
        mac = "52:54:00:" + ":".join(f"{random.randrange(256):02x}" for _ in range(3))
        if mac not in taken:
            return mac


def net_xml(net: libvirt.virNetwork) -> str:
    """The network's saved definition (the running one's when it is transient; blocks)."""
    return net.XMLDesc(libvirt.VIR_NETWORK_XML_INACTIVE if net.isPersistent() else 0)


def _text(element: ET.Element) -> str:
    return ET.tostring(element, encoding="unicode")


class Nics(Backend):
    """The NICs of a libvirt domain."""

    lv: Connection

    async def _read(self, ref: InstanceRef) -> tuple[libvirt.virDomain, bool, bool, str, str]:
        """The domain, whether it runs and is persistent, its live and saved XML."""
        dom = await self.lv.domain(ref)

        def read() -> tuple[bool, bool, str, str]:
            active, persistent = bool(dom.isActive()), bool(dom.isPersistent())
            live = dom.XMLDesc(0)
            saved = dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE) if persistent else live
            return active, persistent, live, saved

        return (dom, *await self.lv.call(read, what=f"reading the NICs of {ref.name}"))

    async def _network(self, name: str) -> libvirt.virNetwork:
        conn = await self.lv.live()

        def find() -> libvirt.virNetwork | None:
            try:
                return conn.networkLookupByName(name)
            except libvirt.libvirtError as e:
                if e.get_error_code() == libvirt.VIR_ERR_NO_NETWORK:
                    return None
                raise

        net = await self.lv.call(find, what=f"finding network {name}")
        if net is None:
            raise NotFound(f"There is no libvirt network named '{name}' on "
                           f"{self.remote.name}.")
        return net

    async def list_nics(self, ref: InstanceRef) -> dict[str, dict[str, str]]:
        _dom, _active, _persistent, _live, saved = await self._read(ref)
        conn = await self.lv.live()
        found = {name: describe(iface) for name, iface in interfaces(saved).items()}

        def reservations() -> dict[str, str]:
            out: dict[str, str] = {}
            for net in {d["network"] for d in found.values() if d.get("network")}:
                try:
                    xml = conn.networkLookupByName(net).XMLDesc(0)
                except libvirt.libvirtError:
                    continue
                for _n, _ip, host in dhcp_hosts(xml):
                    if host.get("mac") and host.get("ip"):
                        out[host.get("mac", "").lower()] = host.get("ip", "")
            return out

        fixed = await self.lv.call(reservations, what="reading DHCP host entries")
        for dev in found.values():
            if dev.get("network") and dev["hwaddr"] in fixed:
                dev["ipv4.address"] = fixed[dev["hwaddr"]]
        return found

    async def add_nic(self, ref: InstanceRef, name: str, *, network: str = "",
                      nictype: str = "", parent: str = "", ipv4: str = "",
                      ipv6: str = "") -> None:
        """Add a virtio NIC (see the module docstring); with ``ipv4``, its DHCP host entry.

        Raises:
            InvalidInput: a bad name or address, or neither a network nor a parent.
            Conflict: the name is taken.
            Unsupported: a routed NIC, IPv6, or an address on a NIC not on a network.
        """
        name, ipv4, ipv6 = name.strip(), ipv4.strip(), ipv6.strip()
        if not NAME.match(name):
            raise InvalidInput("A NIC name of letters, digits, '-' or '_' is needed (at most "
                               "60; libvirt's device aliases take no other characters).")
        if network:
            kind, source = "network", {"network": network}
        elif nictype == "bridged" and parent:
            kind, source = "bridge", {"bridge": parent}
        elif nictype == "macvlan" and parent:
            kind, source = "direct", {"dev": parent, "mode": "bridge"}
        elif nictype in ("bridged", "macvlan"):
            raise InvalidInput(f"A {nictype} NIC needs the host interface it is on.")
        elif nictype:
            raise Unsupported(f"libvirt has no {nictype} NICs: connect {name} to a libvirt "
                              f"network, a host bridge or (macvlan) a host interface.")
        else:
            raise InvalidInput("Say what the NIC is connected to: a network or a host "
                               "interface.")
        self._refuse_addresses(name, ipv6, network, ipv4)
        dom, active, persistent, live, saved = await self._read(ref)
        if name in interfaces(saved) or name in interfaces(live):
            raise Conflict(f"{ref} already has a NIC named {name}.")
        net = await self._network(network) if network else None
        mac = new_mac({mac_of(i) for i in (*interfaces(saved).values(),
                                           *interfaces(live).values())})
        iface = ET.Element("interface", type=kind)
        ET.SubElement(iface, "mac", address=mac)
        ET.SubElement(iface, "source", source)
        ET.SubElement(iface, "model", type="virtio")
        ET.SubElement(iface, "alias", name=f"ua-{name}")
        flags = (CONFIG if persistent else 0) | (LIVE if active else 0)
        reserve = await self._reservation(net, mac, ipv4) if net is not None and ipv4 else None

        def attach() -> None:
            dom.attachDeviceFlags(_text(iface), flags)
            if reserve is None:
                return
            try:
                reserve()
            except libvirt.libvirtError:
                try:
                    dom.detachDeviceFlags(_text(iface), flags)
                except libvirt.libvirtError:
                    pass
                raise

        await self.lv.call(attach, what=f"adding NIC {name} to {ref.name}", within=60)

    def _refuse_addresses(self, name: str, ipv6: str, network: str, ipv4: str,
                          parent: str = "") -> None:
        if ipv6:
            raise Unsupported("libvirt reserves IPv6 addresses by DHCPv6 client ID or host "
                              "name, not by MAC address: corral sets IPv4 ones only. Set "
                              "an IPv6 address inside the guest.")
        if ipv4 and not network:
            where = f" ({parent})" if parent else ""
            raise Unsupported(f"{name} is not on a libvirt network{where}: its address is "
                              f"the guest's own or another DHCP server's, which libvirt "
                              f"does not manage. Set it inside the guest.")
        if ipv4:
            try:
                if ipaddress.ip_address(ipv4).version != 4:
                    raise ValueError
            except ValueError:
                raise InvalidInput(f"'{ipv4}' is not an IPv4 address.") from None

    async def _reservation(self, net: libvirt.virNetwork, mac: str, ipv4: str,
                           replacing: ET.Element | None = None):
        """A blocking function that gives ``mac`` the address ``ipv4`` in ``net``'s DHCP
        (replacing the host entry ``replacing``), every check made first."""
        def read() -> tuple[str, str, bool, bool]:
            return net.name(), net_xml(net), bool(net.isActive()), bool(net.isPersistent())

        name, xml, active, persistent = await self.lv.call(read, what="reading the network")
        index = subnet_index(xml, ipv4)
        if index is None:
            raise InvalidInput(f"{ipv4} is not a host address of a subnet of network {name} "
                               f"that has DHCP (libvirt hands out reserved addresses by "
                               f"DHCP).")
        for _n, _ip, host in dhcp_hosts(xml):
            if host.get("ip") == ipv4 and host.get("mac", "").lower() != mac:
                raise Conflict(f"{ipv4} is reserved for {host.get('mac') or host.get('name')}"
                               f" in network {name}.")
        flags = (NET_CONFIG if persistent else 0) | (NET_LIVE if active else 0)
        entry = _text(ET.Element("host", mac=mac, ip=ipv4))

        def change() -> None:
            if replacing is not None:
                net.update(libvirt.VIR_NETWORK_UPDATE_COMMAND_DELETE, DHCP_HOST, -1,
                           _text(replacing), flags)
            try:
                net.update(libvirt.VIR_NETWORK_UPDATE_COMMAND_ADD_LAST, DHCP_HOST, index,
                           entry, flags)
            except libvirt.libvirtError:
                if replacing is not None:  # put the old entry back
                    net.update(libvirt.VIR_NETWORK_UPDATE_COMMAND_ADD_LAST, DHCP_HOST,
                               -1, _text(replacing), flags)
                raise

        return change

    async def _nic(self, ref: InstanceRef, name: str):
        dom, active, persistent, live, saved = await self._read(ref)
        saved_ifaces, live_ifaces = interfaces(saved), interfaces(live) if active else {}
        iface = saved_ifaces.get(name) or live_ifaces.get(name)
        if iface is None:
            raise NotFound(f"{ref} has no NIC named {name}.")
        mac = mac_of(iface)
        in_live = any(mac_of(i) == mac for i in live_ifaces.values())
        in_saved = persistent and any(mac_of(i) == mac for i in saved_ifaces.values())
        return dom, iface, (CONFIG if in_saved else 0) | (LIVE if in_live else 0)

    async def remove_nic(self, ref: InstanceRef, name: str) -> None:
        dom, iface, flags = await self._nic(ref, name)
        mac, network = mac_of(iface), describe(iface).get("network", "")
        await self.lv.call(dom.detachDeviceFlags, _text(iface), flags,
                           what=f"removing NIC {name} from {ref.name}", within=60)
        if network:
            await self._forget(network, mac)
        if flags & LIVE and not await self._released(dom, mac):
            raise Conflict(f"{name} is removed from {ref}'s definition, but the running "
                           f"guest has not released it yet (it needs the guest's ACPI "
                           f"hot-unplug); it is gone at the next start.")

    async def _released(self, dom: libvirt.virDomain, mac: str) -> bool:
        for _ in range(10):
            live = await self.lv.call(dom.XMLDesc, 0, what="reading the domain")
            if all(mac_of(i) != mac for i in interfaces(live).values()):
                return True
            await asyncio.sleep(0.5)
        return False

    async def _forget(self, network: str, mac: str) -> None:
        """Remove ``mac``'s DHCP host entries from ``network`` (it may be gone: then
        nothing)."""
        conn = await self.lv.live()

        def forget() -> None:
            try:
                net = conn.networkLookupByName(network)
                persistent, active = net.isPersistent(), net.isActive()
                xml = net_xml(net)
                flags = (NET_CONFIG if persistent else 0) | (NET_LIVE if active else 0)
                for _n, _ip, host in dhcp_hosts(xml):
                    if host.get("mac", "").lower() == mac:
                        net.update(libvirt.VIR_NETWORK_UPDATE_COMMAND_DELETE, DHCP_HOST, -1,
                                   _text(host), flags)
            except libvirt.libvirtError:
                pass  # the NIC is gone; a stale host entry reserves an unused address

        await self.lv.call(forget, what=f"updating network {network}")

    async def set_nic_addresses(self, ref: InstanceRef, name: str, ipv4: str = "",
                                ipv6: str = "") -> None:
        """Reserve (or with "" release) the NIC's IPv4 address in its network's DHCP."""
        ipv4, ipv6 = ipv4.strip(), ipv6.strip()
        _dom, iface, _flags = await self._nic(ref, name)
        info = describe(iface)
        network, mac = info.get("network", ""), mac_of(iface)
        self._refuse_addresses(name, ipv6, network, ipv4, info.get("parent", ""))
        if not network:
            return  # nothing to clear: libvirt keeps no address for it
        net = await self._network(network)
        xml = await self.lv.call(net_xml, net, what=f"reading network {network}")
        current = [h for _n, _ip, h in dhcp_hosts(xml) if h.get("mac", "").lower() == mac]
        if ipv4 and current and current[0].get("ip") == ipv4:
            return
        if not ipv4:
            await self._forget(network, mac)
            return
        change = await self._reservation(net, mac, ipv4, current[0] if current else None)
        await self.lv.call(change, what=f"reserving {ipv4} for {name}")
