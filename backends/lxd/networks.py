"""Networks of an LXD/Incus remote: list (managed and the host's own, read-only), create
and delete bridges, DHCP leases."""

from __future__ import annotations

import ipaddress
from urllib.parse import quote

from ..base import Backend
from ..errors import Conflict, InvalidInput, NotFound
from ..models import Resource
from . import resource_convert as rc
from .objects import change, check_name, metadata
from .rest import Rest


def _address(value: str, version: int) -> str:
    value = value.strip() or ("auto" if version == 4 else "none")
    if value in ("auto", "none"):
        return value
    try:
        iface = ipaddress.ip_interface(value)
    except ValueError:
        raise InvalidInput(f"'{value}' is not an IPv{version} address with a prefix "
                           f"(e.g. {'10.10.0.1/24' if version == 4 else 'fd42::1/64'}), "
                           f"auto or none.") from None
    if iface.version != version or "/" not in value:
        raise InvalidInput(f"'{value}' is not an IPv{version} address with a prefix.")
    return value


class Networks(Backend):
    """The network verbs of :class:`~backends.lxd.backend.LXDBackend`."""

    rest: Rest

    async def list_networks(self) -> list[Resource]:
        items = await self.rest.get("networks", recursion="1") or []
        return sorted((rc.to_network(d, self.remote.name, self.remote.project) for d in items),
                      key=lambda r: (r.read_only, r.name))

    async def _network(self, name: str) -> Resource:
        client = self.rest.client
        try:
            data = await self.rest.call(
                lambda: metadata(client.api.networks[quote(name, safe="")].get()))
        except NotFound:
            raise NotFound(f"There is no network '{name}' on '{self.remote.name}'.") from None
        return rc.to_network(data, self.remote.name, self.remote.project)

    async def create_network(self, name: str, *, ipv4: str = "auto", ipv6: str = "none",
                             nat: bool = True, description: str = "") -> Resource:
        check_name("network", name)
        if len(name) > 15:
            raise InvalidInput(f"'{name}': a bridge name has at most 15 characters.")
        config = {"ipv4.address": _address(ipv4, 4), "ipv6.address": _address(ipv6, 6)}
        if config["ipv4.address"] != "none":
            config["ipv4.nat"] = "true" if nat else "false"
        if config["ipv6.address"] != "none":
            config["ipv6.nat"] = "true" if nat else "false"
        body = {"name": name, "type": "bridge", "description": description, "config": config}
        client = self.rest.client
        await change(self.rest, f"network {name}", lambda: client.api.networks.post(json=body))
        return await self._network(name)

    async def delete_network(self, name: str) -> None:
        net = await self._network(name)
        if net.read_only:
            raise InvalidInput(f"'{name}' is not managed by {self.rest.product} (it belongs "
                               f"to the host); it cannot be deleted here.")
        if net.used_by:
            raise Conflict(f"Network '{name}' is used by {', '.join(net.used_by)}; nothing "
                           f"was changed.", title="Network in use")
        client = self.rest.client
        await change(self.rest, f"network {name}",
                     lambda: client.api.networks[quote(name, safe="")].delete())

    async def network_leases(self, name: str) -> list[dict[str, str]]:
        net = await self._network(name)
        if net.read_only:
            raise InvalidInput(f"'{name}' is not managed by {self.rest.product}: it has no "
                               f"DHCP leases here.")
        client = self.rest.client
        items = await self.rest.call(
            lambda: metadata(client.api.networks[quote(name, safe="")].leases.get()) or [])
        return [{k: str(d.get(k) or "") for k in ("hostname", "address", "hwaddr", "type",
                                                   "location")} for d in items]
