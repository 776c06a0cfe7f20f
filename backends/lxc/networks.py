"""The host's bridges as LXC sees them: read-only networks (LXC manages none itself).
Each lists its IPv4/IPv6 addresses and the containers of this lxcpath whose config puts
a veth on it."""

from __future__ import annotations

import fcntl
import ipaddress
import os
import socket
import struct

from ..base import Backend
from ..models import Resource, ResourceKind
from ..work import in_thread
from .tools import LXCTools


def _ipv4(name: str) -> list[str]:
    """The bridge's primary IPv4 address with its prefix (SIOCGIFADDR/SIOCGIFNETMASK)."""
    packed = struct.pack("256s", name.encode()[:15])
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            addr = socket.inet_ntoa(fcntl.ioctl(s.fileno(), 0x8915, packed)[20:24])
            mask = socket.inet_ntoa(fcntl.ioctl(s.fileno(), 0x891B, packed)[20:24])
    except OSError:
        return []  # no IPv4 address
    return [f"{addr}/{ipaddress.IPv4Network(f'0.0.0.0/{mask}').prefixlen}"]


def _addresses(name: str) -> tuple[list[str], list[str]]:
    """The bridge's IPv4 and IPv6 addresses with prefixes."""
    v6: list[str] = []
    try:
        with open("/proc/net/if_inet6", encoding="ascii") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and parts[5] == name:
                    addr = ipaddress.IPv6Address(bytes.fromhex(parts[0]))
                    v6.append(f"{addr}/{int(parts[2], 16)}")
    except OSError:
        pass
    return _ipv4(name), v6


def _bridges(lxcpath: str) -> list[tuple[str, str, list[str], list[str], list[str]]]:
    users: dict[str, list[str]] = {}
    try:
        entries = list(os.scandir(lxcpath))
    except OSError:
        entries = []
    for entry in entries:
        config = os.path.join(entry.path, "config")
        try:
            with open(config, encoding="utf-8", errors="replace") as f:
                for line in f:
                    key, _, value = line.partition("=")
                    if key.strip().endswith(".link"):
                        users.setdefault(value.strip(), []).append(entry.name)
        except OSError:
            continue
    out = []
    for name in sorted(os.listdir("/sys/class/net")):
        if not os.path.isdir(f"/sys/class/net/{name}/bridge"):
            continue
        try:
            with open(f"/sys/class/net/{name}/operstate", encoding="ascii") as f:
                state = f.read().strip()
        except OSError:
            state = ""
        v4, v6 = _addresses(name)
        out.append((name, state, v4, v6, sorted(users.get(name, []))))
    return out


class Networks(Backend):
    """``list_networks`` of :class:`~backends.lxc.backend.LXCBackend`."""

    lxc: LXCTools

    async def list_networks(self) -> list[Resource]:
        found = await in_thread(lambda _w: _bridges(self.lxc.path))
        host = socket.gethostname()
        return [Resource(
            ResourceKind.NETWORK, self.remote.name, name, "default",
            description=f"host bridge on {host}",
            used_by=tuple(f"container {u}" for u in users),
            fields=(("type", "bridge"), ("managed", "no"), ("ipv4", ", ".join(v4)),
                    ("ipv6", ", ".join(v6)), ("nat", ""), ("used_by", str(len(users))),
                    ("status", state)),
            read_only=True) for name, state, v4, v6, users in found]
