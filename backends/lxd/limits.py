"""Resource limits of LXD/Incus instances: the fields corral edits, where each lives in the
instance (config key, root disk device, NIC device), how values are checked before anything
is sent, and whether a change applies live.

Pure functions over the instance JSON (``GET /1.0/instances/<n>``) so they can be tested
without a daemon; :class:`Limits` (``get_limits``/``set_limits``) does the I/O.

Live or restart, and where that comes from:

* ``GET /1.0/metadata/configuration`` (API extension ``metadata_configuration``) gives a
  ``liveupdate`` flag per instance key. Incus 6.0 serves it; LXD 5.0.2 does not (404). Its
  flag is not per instance type (it says ``yes`` for ``limits.memory``, which holds for
  containers only), so it is used for containers.
* Otherwise (LXD 5.0.2), and for every VM rule, :data:`CONTAINER_LIVE` and
  :func:`applies` below are the table, taken from LXD's ``doc/reference/instance_options.md``
  ("Live update" column) and the API extensions: ``cpu_hotplug`` lets a running VM take a new
  CPU *count* (not a pinned set); neither LXD 5.0.2 nor Incus 6.0 has memory hotplug, so a
  VM's ``limits.memory`` applies at the next start; a VM's root disk size and I/O limits are
  applied by QEMU at start.
* A stopped instance: everything applies at its next start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..base import Backend
from ..errors import BackendError, InvalidInput, OperationFailed, Unsupported
from ..models import InstanceRef, InstanceStatus, LimitField
from ..units import format_size, is_whole, parse_size
from . import convert
from .known import Known
from .lazy import pylxd_exc
from .ops import Ops
from .rest import Rest


@dataclass(frozen=True)
class Spec:
    key: str
    label: str
    hint: str
    where: str
    """``config`` (instance config key), ``root`` (root disk device key) or ``nic``."""
    name: str
    """The LXD key: ``limits.memory``, or the device key ``size``, ``limits.read``..."""
    containers_only: bool = False


SPECS: tuple[Spec, ...] = (
    Spec("cpus", "CPUs", "a count (2) or a CPU set (0-1,3)", "config", "limits.cpu"),
    Spec("cpu_allowance", "CPU allowance", "50% (share under load) or 25ms/100ms (hard cap)",
         "config", "limits.cpu.allowance", containers_only=True),
    Spec("memory", "Memory", "a size (512MiB, 2GiB) or a share of the host (50%)", "config",
         "limits.memory"),
    Spec("processes", "Processes", "most processes at once (e.g. 500)", "config",
         "limits.processes", containers_only=True),
    Spec("disk", "Root disk size", "a size (10GiB); it can only grow", "root", "size"),
    Spec("disk_read", "Disk read", "bytes/s (10MB) or operations/s (100iops)", "root",
         "limits.read"),
    Spec("disk_write", "Disk write", "bytes/s (10MB) or operations/s (100iops)", "root",
         "limits.write"),
    Spec("disk_priority", "Disk priority", "0 (lowest) to 10 (highest)", "config",
         "limits.disk.priority"),
    Spec("net_ingress", "Network in", "bits/s (10Mbit, 1Gbit)", "nic", "limits.ingress"),
    Spec("net_egress", "Network out", "bits/s (10Mbit, 1Gbit)", "nic", "limits.egress"),
    Spec("net_priority", "Network priority", "0 (lowest) to 10 (highest)", "config",
         "limits.network.priority"),
)
BY_KEY = {s.key: s for s in SPECS}

# LXD doc/reference/instance_options.md, "Live update" column (LXD 5.0): every limit corral
# edits is live on a running container.
CONTAINER_LIVE = {s.name: True for s in SPECS}

_LXD_SIZE = re.compile(r"^[0-9]{1,15}(B|kB|MB|GB|TB|PB|EB|KiB|MiB|GiB|TiB|PiB|EiB)?$")
_BITS = re.compile(r"^[0-9]{1,15}(k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?bit$")
_CPUSET = re.compile(r"^[0-9]{1,15}(-[0-9]{1,15})?(,[0-9]{1,15}(-[0-9]{1,15})?)*$")
_ALLOWANCE = re.compile(r"^([0-9]{1,15})%$|^([0-9]{1,15})ms/([0-9]{1,15})ms$")


def root_device(data: Mapping[str, Any]) -> tuple[str, dict[str, str]] | None:
    """(name, device) of the root disk in the expanded devices."""
    devices = data.get("expanded_devices") or data.get("devices") or {}
    for name, dev in sorted(devices.items()):
        if dev.get("type") == "disk" and dev.get("path") == "/":
            return name, dict(dev)
    return None


def nic_device(data: Mapping[str, Any]) -> tuple[str, dict[str, str]] | None:
    """(name, device) of the instance's first NIC (``eth0`` first)."""
    devices = data.get("expanded_devices") or data.get("devices") or {}
    nics = [(n, d) for n, d in devices.items() if d.get("type") == "nic"]
    if not nics:
        return None
    nics.sort(key=lambda item: (item[0] != "eth0", item[0]))
    name, dev = nics[0]
    return name, dict(dev)


def current_value(spec: Spec, data: Mapping[str, Any]) -> str:
    if spec.where == "config":
        config = data.get("expanded_config") or data.get("config") or {}
        return str(config.get(spec.name) or "")
    found = root_device(data) if spec.where == "root" else nic_device(data)
    if found is None:
        return ""
    return str(found[1].get(spec.name) or "")


def is_cpu_count(value: str) -> bool:
    return is_whole(value.strip())


def applies(spec: Spec, *, vm: bool, running: bool, value: str, extensions: frozenset[str],
            live_keys: Mapping[str, bool] | None) -> str:
    """``live`` or ``restart`` for a supported field (see the module notes for sources)."""
    if not running:
        return "restart"
    if not vm:
        if live_keys is not None and spec.where == "config" and spec.name in live_keys:
            return "live" if live_keys[spec.name] else "restart"
        return "live" if CONTAINER_LIVE.get(spec.name, False) else "restart"
    if spec.name == "limits.cpu":
        # cpu_hotplug: a running VM takes a new count; a pinned set needs a restart
        return "live" if "cpu_hotplug" in extensions and (not value or is_cpu_count(value)) \
            else "restart"
    if spec.name == "limits.memory":
        return "restart"  # no memory hotplug in LXD 5.0 / Incus 6.0
    if spec.where == "root":
        return "restart"
    return "live"  # NIC limits (host side), disk/network priority (QEMU's cgroup)


def normalise(spec: Spec, value: str) -> str:
    """Check one new value and return it as LXD wants it ("" = remove the limit).

    Raises:
        InvalidInput: naming the field.
    """
    text = (value or "").strip()
    if not text:
        return ""
    label = spec.label
    if spec.key == "cpus":
        if is_cpu_count(text):
            if int(text) < 1:
                raise InvalidInput(f"{label}: at least 1.")
            return str(int(text))
        if _CPUSET.match(text):
            return text
        raise InvalidInput(f"{label}: '{text}' is neither a count (2) nor a CPU set (0-1,3).")
    if spec.key == "cpu_allowance":
        m = _ALLOWANCE.match(text)
        if not m:
            raise InvalidInput(f"{label}: '{text}' is neither a percentage (50%) nor a "
                               f"time slice (25ms/100ms).")
        if m.group(1) is not None and not 1 <= int(m.group(1)) <= 100:
            raise InvalidInput(f"{label}: a percentage from 1% to 100%.")
        if m.group(2) is not None and (int(m.group(2)) < 1 or int(m.group(3)) < 1):
            raise InvalidInput(f"{label}: both times must be at least 1ms.")
        return text
    if spec.key == "memory":
        if text.endswith("%"):
            number = text[:-1].strip()
            if not is_whole(number) or not 1 <= int(number) <= 100:
                raise InvalidInput(f"{label}: a percentage from 1% to 100%.")
            return f"{int(number)}%"
        return size_text(label, text, minimum=1024 * 1024)
    if spec.key == "processes":
        if not is_whole(text) or int(text) < 1:
            raise InvalidInput(f"{label}: a whole number of at least 1 ('{text}' is not).")
        return str(int(text))
    if spec.key == "disk":
        return size_text(label, text, minimum=1024 * 1024)
    if spec.key in ("disk_read", "disk_write"):
        if text.lower().endswith("iops"):
            number = text[:-4].strip()
            if not is_whole(number) or int(number) < 1:
                raise InvalidInput(f"{label}: '{text}' is not a number of operations (100iops).")
            return f"{int(number)}iops"
        return size_text(label, text, minimum=1)
    if spec.key in ("disk_priority", "net_priority"):
        if not is_whole(text) or not 0 <= int(text) <= 10:
            raise InvalidInput(f"{label}: a whole number from 0 to 10 ('{text}' is not).")
        return str(int(text))
    if spec.key in ("net_ingress", "net_egress"):
        if not _BITS.match(text):
            raise InvalidInput(f"{label}: '{text}' is not a bit rate (examples: 10Mbit, 1Gbit).")
        return text
    raise InvalidInput(f"Unknown limit '{spec.key}'.")  # pragma: no cover - SPECS is closed


def size_text(label: str, text: str, *, minimum: int = 0) -> str:
    """A size as LXD parses it: kept as typed when LXD reads it that way, else exact bytes
    in the shortest binary unit (LXD takes neither ``1.5G`` nor a bare ``M``)."""
    try:
        size = parse_size(text)
    except ValueError as e:
        raise InvalidInput(f"{label}: {e}") from None
    if size < minimum:
        raise InvalidInput(f"{label}: at least {format_size(minimum)}.")
    compact = text.replace(" ", "")
    return compact if _LXD_SIZE.match(compact) else format_size(size)


def size_bytes(text: str) -> int | None:
    try:
        return parse_size(text) if text else None
    except ValueError:
        return None


class Limits(Backend):
    """The resource limit verbs of :class:`~backends.lxd.backend.LXDBackend`."""

    rest: Rest
    ops: Ops
    known: Known

    async def _config_metadata(self) -> dict[str, bool] | None:
        """``liveupdate`` per instance key from ``GET /1.0/metadata/configuration`` (Incus;
        LXD 5.0.2 has no such endpoint: None, and :data:`CONTAINER_LIVE` is used)."""
        rest = self.rest
        if self.known.config_live is not False:
            return self.known.config_live  # type: ignore[return-value]
        if self.known.info is not None and "metadata_configuration" not in self.known.extensions:
            self.known.config_live = None
            return None
        client = rest.client

        def _do() -> dict[str, bool] | None:
            try:
                meta = client.api.metadata.configuration.get().json()["metadata"]
            except (pylxd_exc.LXDAPIException, ValueError, KeyError):
                return None
            out: dict[str, bool] = {}
            sections = ((meta.get("configs") or {}).get("instance") or {})
            for section in sections.values():
                for entry in section.get("keys") or ():
                    for key, info in entry.items():
                        out[key] = str(info.get("liveupdate") or "").lower() == "yes"
            return out or None

        self.known.config_live = await rest.call(_do)
        return self.known.config_live

    async def _pool_driver(self, pool: str) -> str:
        rest = self.rest
        if pool not in self.known.pool_drivers:
            client = rest.client
            try:
                data = await rest.call(
                    lambda: client.api.storage_pools[pool].get().json()["metadata"])
                self.known.pool_drivers[pool] = str(data.get("driver") or "")
            except BackendError:
                return ""
        return self.known.pool_drivers[pool]

    async def _limit_context(self, ref: InstanceRef) -> tuple[dict[str, Any], dict[str, Any]]:
        """The instance's JSON, and what deciding support needs: run state, type, metadata,
        root pool driver and whether the root disk reports usage (a dir pool with project
        quotas)."""
        rest = self.rest
        data = await rest.instance(ref.name)
        status = convert.status_of(data.get("status"))
        self.known.saw_status(ref, status)
        vm = data.get("type") == "virtual-machine"
        live = await self._config_metadata()
        root = root_device(data)
        driver = await self._pool_driver(root[1].get("pool", "")) if root else ""
        quota = True
        if root and driver == "dir" and not vm:
            client = rest.client
            try:
                state = await rest.call(
                    lambda: client.api.instances[ref.name].state.get().json()["metadata"])
                quota = bool((state.get("disk") or {}).get(root[0]))
            except BackendError:
                quota = False
        return data, {"running": status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN),
                      "vm": vm, "live": live, "root": root, "driver": driver, "quota": quota,
                      "nic": nic_device(data)}

    def _limit_problem(self, spec: Spec, ctx: dict[str, Any]) -> str:
        """Why this instance cannot have ``spec`` (empty: it can)."""
        rest = self.rest
        if spec.containers_only and ctx["vm"]:
            return "containers only"
        if spec.key in self.known.host_unsupported:
            return self.known.host_unsupported[spec.key]
        if spec.where == "root" and ctx["root"] is None:
            return "no root disk device"
        if spec.where == "nic" and ctx["nic"] is None:
            return "no network interface"
        if spec.where == "nic" and ctx["nic"][1].get("nictype", "") in ("physical", "sriov",
                                                                      "ipvlan") \
                and not ctx["nic"][1].get("network"):
            return f"not for a {ctx['nic'][1]['nictype']} NIC"
        if spec.key == "disk" and ctx["driver"] == "dir" and not ctx["vm"] \
                and not ctx["quota"]:
            return ("the 'dir' storage pool here cannot limit a container's disk: its "
                    "filesystem has no project quotas, and LXD accepts a size but skips it "
                    "(its log: \"The backing filesystem doesn't support quotas, skipping set "
                    "quota\")")
        live = ctx["live"]
        if spec.where == "config" and live is not None and spec.name not in live:
            return f"{rest.product} has no '{spec.name}' setting"
        return ""

    async def get_limits(self, ref: InstanceRef) -> list[LimitField]:
        data, ctx = await self._limit_context(ref)
        pending = self.known.pending.get(ref, {})
        fields = []
        for spec in SPECS:
            value = current_value(spec, data)
            why = self._limit_problem(spec, ctx)
            if why:
                fields.append(LimitField(spec.key, spec.label, value, "unsupported", why))
                continue
            how = applies(spec, vm=ctx["vm"], running=ctx["running"], value=value,
                          extensions=self.known.extensions, live_keys=ctx["live"])
            hint = spec.hint if ctx["running"] else f"{spec.hint}; applies at next start"
            waiting = ""
            if spec.key in pending:
                before, saved = pending[spec.key]
                if saved == value:
                    value, waiting = before, saved
            fields.append(LimitField(spec.key, spec.label, value, how, hint, waiting))
        return fields

    async def set_limits(self, ref: InstanceRef, changes: dict[str, str]) -> dict[str, str]:
        """Check every change, then write them in one ETag-guarded PUT.

        Raises:
            InvalidInput: an unknown key or a malformed value (nothing changed).
            Unsupported: a key this instance cannot limit (nothing changed).
            OperationFailed: the daemon refused (it keeps the old values).
        """
        unknown = [k for k in changes if k not in BY_KEY]
        if unknown:
            raise InvalidInput(f"Unknown limit '{unknown[0]}' (known: "
                               f"{', '.join(BY_KEY)}).")
        clean = {k: normalise(BY_KEY[k], v) for k, v in changes.items()}
        rest = self.rest
        exts = self.known.extensions
        outcome: dict[str, str] = {}
        effective: dict[str, str] = {}

        def change(data: dict[str, Any]) -> None:
            # runs in the pool thread with fresh data (again after a 412)
            outcome.clear()
            effective.clear()
            for key, value in clean.items():
                spec = BY_KEY[key]
                why = self._limit_problem(spec, ctx)
                if why:
                    raise Unsupported(f"{spec.label} of {ref}: {why}.")
                old = current_value(spec, data)
                effective[key] = old
                if spec.key == "disk" and value and old:
                    before, after = size_bytes(old), size_bytes(value)
                    if before and after is not None and after < before:
                        raise InvalidInput(f"{spec.label}: it can only grow (now {old}).")
                if spec.where == "config":
                    if value:
                        data["config"][spec.name] = value
                    else:
                        data["config"].pop(spec.name, None)
                else:
                    found = ctx["root"] if spec.where == "root" else ctx["nic"]
                    dev_name = found[0]
                    # a device from a profile is copied into the instance (an override)
                    dev = data["devices"].get(dev_name) or dict(
                        (data.get("expanded_devices") or {}).get(dev_name) or found[1])
                    if value:
                        dev[spec.name] = value
                    else:
                        dev.pop(spec.name, None)
                    data["devices"][dev_name] = dev
                outcome[key] = applies(
                    spec, vm=ctx["vm"], running=ctx["running"], value=value or old,
                    extensions=exts, live_keys=ctx["live"])

        _, ctx = await self._limit_context(ref)
        try:
            await self.ops.update_instance(ref, change)
        except OperationFailed as e:
            self._learn_unsupported(clean, e.message)
            raise OperationFailed(f"{rest.product} refused the new limits of {ref}: "
                                  f"{e.message}") from e
        if ctx["running"]:
            waiting = self.known.pending.setdefault(ref, {})
            for key, how in outcome.items():
                if how != "restart":
                    continue
                before = waiting[key][0] if key in waiting else effective.get(key, "")
                if clean[key] == before:
                    waiting.pop(key, None)  # back to what is in effect
                else:
                    waiting[key] = (before, clean[key])
            if not waiting:
                self.known.pending.pop(ref, None)
        return outcome

    def _learn_unsupported(self, changes: dict[str, str], message: str) -> None:
        """Remember limits this host cannot apply at all (seen on the lab machines: no
        ``blkio.weight`` cgroup file, no ``act_police`` tc module)."""
        if "limits.disk.priority" in message and "cgroup controller is missing" in message:
            self.known.host_unsupported["disk_priority"] = (
                f"this host cannot: {message.split(': ', 1)[-1]}")
        if "ingress tc filter" in message and "net_egress" in changes:
            self.known.host_unsupported["net_egress"] = (
                "this host cannot police outgoing traffic (the kernel's tc police action "
                "is missing)")
