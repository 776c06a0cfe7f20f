"""The libvirt networks of a remote as the contract's networks (``list_networks``; the
``:networks`` view, and the names the NIC screen offers for ``add_nic(network=…)``).

One call in the remote's thread: ``listAllNetworks`` and each network's saved definition
(its forward mode, bridge, addresses and DHCP range), whether it is active and starts with
the host, and the domains whose saved definitions have an interface on it (``used_by``).
Creating and deleting networks is not offered (``NETWORK_MANAGE`` is not declared).
"""

from __future__ import annotations

import ipaddress
import xml.etree.ElementTree as ET
from typing import Iterable

import libvirt

from ..base import Backend
from ..models import Resource, ResourceKind
from .connection import Connection


def _ip(ip: ET.Element) -> tuple[str, str, str]:
    """``(family, address/prefix, DHCP range)`` of one ``<ip>`` of a network."""
    family = ip.get("family") or ("ipv6" if ":" in (ip.get("address") or "") else "ipv4")
    address = ip.get("address") or ""
    prefix = ip.get("prefix") or ""
    if not prefix and ip.get("netmask"):
        try:
            prefix = str(ipaddress.ip_network(f"0.0.0.0/{ip.get('netmask')}").prefixlen)
        except ValueError:
            prefix = ""
    cidr = f"{address}/{prefix}" if address and prefix else address
    ranges = [f"{r.get('start')}-{r.get('end')}" for r in ip.iterfind("dhcp/range")
              if r.get("start") and r.get("end")]
    return family, cidr, ", ".join(ranges)


def network(remote: str, xml: str, *, active: bool, autostart: bool,
            users: Iterable[str] = ()) -> Resource:
    """A network's saved definition as a Resource (a pure function of libvirt's XML)."""
    root = ET.fromstring(xml)
    name = root.findtext("name") or ""
    forward = root.find("forward")
    mode = (forward.get("mode") or "nat") if forward is not None else "isolated"
    bridge = root.find("bridge")
    bridge_name = bridge.get("name", "") if bridge is not None else ""
    v4: list[str] = []
    v6: list[str] = []
    dhcp: list[str] = []
    for ip in root.iterfind("ip"):
        family, cidr, ranges = _ip(ip)
        (v6 if family == "ipv6" else v4).append(cidr)
        if ranges:
            dhcp.append(ranges)
    used = tuple(f"instance {u}" for u in sorted(users))
    text = (root.findtext("description") or root.findtext("title") or "").strip()
    if not text:
        parts = [f"bridge {bridge_name}" if bridge_name else "",
                 f"DHCP {', '.join(dhcp)}" if dhcp else ""]
        text = " · ".join(p for p in parts if p)
    return Resource(
        ResourceKind.NETWORK, remote, name, "default", description=text, used_by=used,
        fields=(("type", mode), ("managed", "yes"), ("ipv4", ", ".join(v4)),
                ("ipv6", ", ".join(v6)), ("nat", "v4" if mode == "nat" else "no"),
                ("used_by", str(len(used))), ("status", "active" if active else "inactive"),
                ("bridge", bridge_name), ("dhcp", ", ".join(dhcp)),
                ("autostart", "yes" if autostart else "no")),
        extra={"uuid": root.findtext("uuid") or "", "bridge": bridge_name, "mode": mode,
               "active": active, "dhcp": tuple(dhcp)})


def _users(conn: libvirt.virConnect) -> dict[str, set[str]]:
    """Network name -> the domains with an interface on it (saved definitions; blocks)."""
    out: dict[str, set[str]] = {}
    for dom in conn.listAllDomains(0):
        try:
            flags = libvirt.VIR_DOMAIN_XML_INACTIVE if dom.isPersistent() else 0
            root = ET.fromstring(dom.XMLDesc(flags))
        except libvirt.libvirtError:  # gone meanwhile
            continue
        for source in root.iterfind("devices/interface[@type='network']/source"):
            if source.get("network"):
                out.setdefault(source.get("network", ""), set()).add(dom.name())
    return out


class Networks(Backend):
    """``list_networks`` of :class:`~backends.libvirt.backend.LibvirtBackend`."""

    lv: Connection

    async def list_networks(self) -> list[Resource]:
        conn = await self.lv.live()
        remote = self.remote.name

        def read() -> list[Resource]:
            users = _users(conn)
            out = []
            for net in conn.listAllNetworks(0):
                try:
                    flags = libvirt.VIR_NETWORK_XML_INACTIVE if net.isPersistent() else 0
                    xml, active, auto = net.XMLDesc(flags), net.isActive(), net.autostart()
                except libvirt.libvirtError:  # undefined meanwhile
                    continue
                out.append(network(remote, xml, active=bool(active), autostart=bool(auto),
                                   users=users.get(net.name(), ())))
            return sorted(out, key=lambda r: r.name)

        return await self.lv.call(read, what="listing networks")
