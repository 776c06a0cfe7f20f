"""Resource limits of LXD/Incus instances: the fields corral edits, where each lives in the
instance (config key, root disk device, NIC device), how values are checked before anything
is sent, and whether a change applies live.

Pure functions over the instance JSON (``GET /1.0/instances/<n>``) so they can be tested
without a daemon; the backend does the I/O.

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

from ..errors import InvalidInput
from ..units import format_size, parse_size


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

_LXD_SIZE = re.compile(r"^\d+(B|kB|MB|GB|TB|PB|EB|KiB|MiB|GiB|TiB|PiB|EiB)?$")
_BITS = re.compile(r"^\d+(k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?bit$")
_CPUSET = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")
_ALLOWANCE = re.compile(r"^(\d+)%$|^(\d+)ms/(\d+)ms$")


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
    return value.strip().isdigit()


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
            if not number.isdigit() or not 1 <= int(number) <= 100:
                raise InvalidInput(f"{label}: a percentage from 1% to 100%.")
            return f"{int(number)}%"
        return size_text(label, text, minimum=1024 * 1024)
    if spec.key == "processes":
        if not text.isdigit() or int(text) < 1:
            raise InvalidInput(f"{label}: a whole number of at least 1 ('{text}' is not).")
        return str(int(text))
    if spec.key == "disk":
        return size_text(label, text, minimum=1024 * 1024)
    if spec.key in ("disk_read", "disk_write"):
        if text.lower().endswith("iops"):
            number = text[:-4].strip()
            if not number.isdigit() or int(number) < 1:
                raise InvalidInput(f"{label}: '{text}' is not a number of operations (100iops).")
            return f"{int(number)}iops"
        return size_text(label, text, minimum=1)
    if spec.key in ("disk_priority", "net_priority"):
        if not text.isdigit() or not 0 <= int(text) <= 10:
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
