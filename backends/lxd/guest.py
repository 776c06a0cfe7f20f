"""Settings inside and around a running LXD/Incus instance: a user's password (``chpasswd``
over exec stdin, never in an argv, log or message) and its network interfaces (NICs on a
managed network or a host interface, with checked static addresses). The input checks are
pure and run before anything is sent."""

from __future__ import annotations

import ipaddress
from typing import Any, Callable

from ..base import Backend
from ..errors import Conflict, InvalidInput, NotFound, OperationFailed, Unsupported
from ..models import InstanceRef
from .consoles import exec_with_input, require_running
from .ops import Ops
from .rest import Rest
from .sockets import Sockets


class Guest(Backend):
    """Passwords and NICs of :class:`~backends.lxd.backend.LXDBackend`."""

    rest: Rest
    ops: Ops
    sockets: Sockets

    async def set_password(self, ref: InstanceRef, user: str, password: str) -> None:
        """Set ``user``'s password inside the running instance with ``chpasswd``, the
        ``user:password`` line on its stdin (never in a command line, log or message).

        Raises:
            InvalidInput: ':' or a line break in user or password, an empty password.
            Conflict: the instance is not running.
            Unsupported: the image has no chpasswd.
            OperationFailed: chpasswd failed (its own words, e.g. an unknown user).
        """
        line = check_credentials_text(user, password)
        await require_running(self, ref, "password")
        code, _out, err = await exec_with_input(self.sockets, ref, ["chpasswd"], line)
        secret = password.encode()
        text = err.replace(secret, b"***").decode(errors="replace").strip()
        if code == 127 or (code is None and "not found" in text.lower()):
            raise Unsupported(f"{ref} has no chpasswd, so corral cannot set passwords in it "
                              f"(install the 'passwd' or shadow tools in the image).")
        if code != 0:
            raise OperationFailed(f"chpasswd in {ref} failed (exit {code}) for user "
                                  f"'{user}': {text or 'no message'}.")

    # NICs ----------------------------------------------------------------------------

    async def list_nics(self, ref: InstanceRef) -> dict[str, dict[str, str]]:
        """The instance's NICs as in effect (profiles included): name -> device."""
        data = await self.rest.instance(ref.name)
        devices = data.get("expanded_devices") or data.get("devices") or {}
        return {n: dict(d) for n, d in sorted(devices.items()) if d.get("type") == "nic"}

    async def _check_on_network(self, network: str, v4: str, v6: str) -> None:
        """Static addresses ``v4``/``v6`` fit the managed ``network``'s subnets."""
        subnets = await self._network_subnets(network)
        for family, addresses in ((4, v4), (6, v6)):
            for a in filter(None, addresses.split(",")):
                subnet = subnets.get(family)
                if subnet is None:
                    raise InvalidInput(f"Network '{network}' has no IPv{family} subnet, so a "
                                       f"static IPv{family} address cannot be given.")
                if ipaddress.ip_address(a) not in subnet:
                    raise InvalidInput(f"{a} is not in {network}'s subnet {subnet}.")

    async def _network_subnets(self, network: str) -> dict[int, Any]:
        client = self.rest.client
        try:
            net = await self.rest.call(
                lambda: client.api.networks[network].get().json()["metadata"])
        except NotFound:
            raise InvalidInput(f"There is no network '{network}' on "
                               f"'{self.remote.name}'.") from None
        if not net.get("managed"):
            raise InvalidInput(f"'{network}' is not a network {self.rest.product} manages; "
                               f"attach to it as a bridged NIC with parent={network}.")
        out: dict[int, Any] = {}
        cfg = net.get("config") or {}
        for family, key in ((4, "ipv4.address"), (6, "ipv6.address")):
            value = str(cfg.get(key) or "")
            if value and value not in ("none", "auto"):
                try:
                    out[family] = ipaddress.ip_interface(value).network
                except ValueError:
                    pass
        return out

    async def _change_nic(self, ref: InstanceRef, change: Callable[[dict[str, Any]], None],
                          what: str) -> None:
        """Apply ``change`` to the instance; a refusal names ``what`` was refused."""
        try:
            await self.ops.update_instance(ref, change)
        except OperationFailed as e:
            raise OperationFailed(f"{self.rest.product} refused {what} on {ref}: "
                                  f"{e.message}") from e

    async def add_nic(self, ref: InstanceRef, name: str, *, network: str = "",
                      nictype: str = "", parent: str = "", ipv4: str = "",
                      ipv6: str = "") -> None:
        """Add a NIC: on a managed ``network``, or of ``nictype`` (bridged, macvlan,
        routed, ...) on the host interface ``parent``; optional static addresses (routed
        takes comma lists).

        Raises:
            InvalidInput: bad names/addresses, unknown network (nothing sent).
            Conflict: the instance already has a device of that name.
        """
        check_device_name(name)
        v4, v6 = static_addresses(ipv4, ipv6, routed=nictype == "routed")
        dev: dict[str, str] = {"type": "nic", "name": name}
        if network:
            if nictype or parent:
                raise InvalidInput("Give either a managed network, or a NIC type with a "
                                   "parent interface, not both.")
            await self._check_on_network(network, v4, v6)
            dev["network"] = network
        else:
            if not nictype:
                raise InvalidInput("Give a managed network, or a NIC type (bridged, macvlan, "
                                   "routed) and a parent interface.")
            if nictype not in _NIC_TYPES:
                raise InvalidInput(f"Unknown NIC type '{nictype}' (known: "
                                   f"{', '.join(_NIC_TYPES)}).")
            if not parent and nictype in ("bridged", "macvlan", "physical", "ipvlan", "sriov"):
                raise InvalidInput(f"A {nictype} NIC needs a parent interface on the host.")
            if nictype in ("macvlan", "physical", "sriov", "p2p") and (v4 or v6):
                raise InvalidInput(f"A {nictype} NIC cannot have a static address set by "
                                   f"{self.rest.product}; configure it inside the instance.")
            dev["nictype"] = nictype
            if parent:
                dev["parent"] = parent
        if v4:
            dev["ipv4.address"] = v4
        if v6:
            dev["ipv6.address"] = v6

        def change(data: dict[str, Any]) -> None:
            expanded = data.get("expanded_devices") or {}
            if name in data["devices"] or name in expanded:
                raise Conflict(f"{ref} already has a device named '{name}'.")
            data["devices"][name] = dev

        await self._change_nic(ref, change, f"the NIC '{name}'")

    async def remove_nic(self, ref: InstanceRef, name: str) -> None:
        def change(data: dict[str, Any]) -> None:
            dev = data["devices"].get(name)
            expanded = (data.get("expanded_devices") or {}).get(name)
            if dev is None and expanded is None:
                raise NotFound(f"{ref} has no device '{name}'.")
            if (dev or expanded or {}).get("type") != "nic":
                raise InvalidInput(f"'{name}' of {ref} is not a NIC.")
            if dev is None:
                profiles = ", ".join(data.get("profiles") or ()) or "a profile"
                raise Conflict(f"The NIC '{name}' of {ref} comes from its profiles "
                               f"({profiles}): change the profile, or override the device "
                               f"in the instance first.")
            del data["devices"][name]

        await self.ops.update_instance(ref, change)

    async def set_nic_addresses(self, ref: InstanceRef, name: str,
                                ipv4: str = "", ipv6: str = "") -> None:
        """Set (or with "" clear) the static addresses of NIC ``name``. A NIC from a
        profile is first copied into the instance (an override), so the profile stays
        as it is."""
        nics = await self.list_nics(ref)
        if name not in nics:
            raise NotFound(f"{ref} has no NIC '{name}'.")
        current = nics[name]
        kind = current.get("nictype", "")
        v4, v6 = static_addresses(ipv4, ipv6, routed=kind == "routed")
        if current.get("network"):
            await self._check_on_network(current["network"], v4, v6)
        elif kind in ("macvlan", "physical", "sriov", "p2p") and (v4 or v6):
            raise InvalidInput(f"A {kind} NIC cannot have a static address set by "
                               f"{self.rest.product}.")

        def change(data: dict[str, Any]) -> None:
            dev = data["devices"].get(name) or dict(
                (data.get("expanded_devices") or {}).get(name) or current)
            for key, value in (("ipv4.address", v4), ("ipv6.address", v6)):
                if value:
                    dev[key] = value
                else:
                    dev.pop(key, None)
            data["devices"][name] = dev

        await self._change_nic(ref, change, f"the addresses of '{name}'")


# Input checks (pure) ---------------------------------------------------------------------

_NIC_TYPES = ("bridged", "macvlan", "routed", "ipvlan", "physical", "p2p", "sriov")


def check_device_name(name: str) -> str:
    if not name or not name.strip():
        raise InvalidInput("A device name is needed (e.g. eth1).")
    if name != name.strip() or any(c in name for c in "/ \t\n") or len(name) > 64:
        raise InvalidInput(f"Device name '{name}': no slashes or spaces, at most 64 "
                           f"characters.")
    return name


def check_addresses(text: str, family: int, *, many: bool, label: str) -> str:
    """One address (or, with ``many``, a comma list) of ``family`` (4/6), as LXD wants it
    (no prefix length). Empty stays empty."""
    text = (text or "").strip()
    if not text:
        return ""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) > 1 and not many:
        raise InvalidInput(f"{label}: one address only (a comma list is for routed NICs).")
    out = []
    for part in parts:
        try:
            addr = ipaddress.ip_address(part)
        except ValueError:
            raise InvalidInput(f"{label}: '{part}' is not an IPv{family} address"
                               + (" (give it without a /prefix)" if "/" in part else "")
                               + ".") from None
        if addr.version != family:
            raise InvalidInput(f"{label}: '{part}' is an IPv{addr.version} address, not "
                               f"IPv{family}.")
        out.append(str(addr))
    return ",".join(out)


def static_addresses(ipv4: str, ipv6: str, *, routed: bool) -> tuple[str, str]:
    """The checked static addresses of a NIC (a routed NIC takes comma lists)."""
    return (check_addresses(ipv4, 4, many=routed, label="IPv4 address"),
            check_addresses(ipv6, 6, many=routed, label="IPv6 address"))


def check_credentials_text(user: str, password: str) -> bytes:
    """``user:password\\n`` for chpasswd; the password never appears in a message."""
    if not user or any(c in user for c in ":\n\r\0") or user != user.strip():
        raise InvalidInput("The user name must be non-empty, without ':', spaces at the "
                           "ends or line breaks.")
    if not password:
        raise InvalidInput("The password must not be empty.")
    if any(c in password for c in ":\n\r\0"):
        raise InvalidInput("The password must not contain ':' or a line break "
                           "(chpasswd reads 'user:password' lines).")
    return f"{user}:{password}\n".encode()
