"""Resource limits of LXC containers through cgroups (v1 and v2 key names).

User-facing units are the same on both versions: memory in bytes (``512MiB`` accepted),
CPU weight 1-10000 (cgroup v2 semantics; v1 ``cpu.shares`` = weight x 1024 / 100), CPU quota
as a percentage of one CPU (``150`` = one and a half), cpuset as a CPU list, IO weight
1-10000 (v1 ``blkio.weight`` takes 10-1000), process count.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Callable

from ..errors import InvalidInput
from ..units import size_or_none as parse_size

PERIOD = 100_000


def cgroup_version() -> int:
    return 2 if os.path.exists("/sys/fs/cgroup/cgroup.controllers") else 1


@dataclass(frozen=True)
class Limit:
    key: str
    label: str
    hint: str
    v1: tuple[str, ...]
    v2: str
    to_v1: Callable[[str], tuple[str, ...]]
    to_v2: Callable[[str], str]
    from_v1: Callable[[tuple[str, ...]], str]
    from_v2: Callable[[str], str]


def _memory(value: str) -> int | None:
    if value in ("", "max", "unlimited"):
        return None
    n = parse_size(value)
    if n is None or n < 4 * 1024 * 1024:
        raise InvalidInput(f"Memory '{value}' is not a size of at least 4MiB (e.g. 512MiB, 2GiB).")
    return n


def _int_range(name: str, low: int, high: int) -> Callable[[str], int | None]:
    def check(value: str) -> int | None:
        if value in ("", "max", "default"):
            return None
        if not value.isdigit() or not low <= int(value) <= high:
            raise InvalidInput(f"{name} must be a whole number from {low} to {high}.")
        return int(value)
    return check


_weight = _int_range("CPU weight", 1, 10000)
_io_weight = _int_range("IO weight", 1, 10000)
_pids = _int_range("Process limit", 1, 4194304)


def _quota(value: str) -> int | None:
    if value in ("", "max", "unlimited"):
        return None
    if not re.fullmatch(r"\d+(\.\d+)?", value) or float(value) <= 0:
        raise InvalidInput("CPU quota is a percentage of one CPU, e.g. 50 or 200.")
    return max(1000, int(float(value) / 100 * PERIOD))


def _cpuset(value: str) -> str:
    if value == "":
        return ""
    if not re.fullmatch(r"\d+(-\d+)?(,\d+(-\d+)?)*", value):
        raise InvalidInput("CPU set is a list like 0-1 or 0,2.")
    ncpu = os.cpu_count() or 1
    for part in re.split(r"[,-]", value):
        if int(part) >= ncpu:
            raise InvalidInput(f"CPU {part} does not exist (this host has {ncpu}: 0-{ncpu - 1}).")
    return value


def _unlimited(v: str) -> str:
    return "" if v in ("max", "-1", "9223372036854771712", "") else v


LIMITS: tuple[Limit, ...] = (
    Limit("memory", "Memory", "bytes or 512MiB/2GiB; empty = unlimited",
          ("memory.limit_in_bytes",), "memory.max",
          lambda v: (str(_memory(v) or -1),), lambda v: str(_memory(v) or "max"),
          lambda t: _unlimited(t[0]), _unlimited),
    Limit("cpu_weight", "CPU weight", "1-10000 (100 = default)",
          ("cpu.shares",), "cpu.weight",
          lambda v: (str(max(2, (_weight(v) or 100) * 1024 // 100)),),
          lambda v: str(_weight(v) or 100),
          lambda t: str(int(t[0]) * 100 // 1024) if t[0].isdigit() else "", lambda v: v),
    Limit("cpu_quota", "CPU quota %", "percent of one CPU (150 = 1.5 CPUs); empty = none",
          ("cpu.cfs_quota_us", "cpu.cfs_period_us"), "cpu.max",
          lambda v: (str(_quota(v) or -1), str(PERIOD)),
          lambda v: f"{_quota(v) or 'max'} {PERIOD}",
          lambda t: "" if t[0] in ("-1", "") else f"{int(t[0]) * 100 // int(t[1] or PERIOD)}",
          lambda v: "" if v.startswith("max") else
          f"{int(v.split()[0]) * 100 // int(v.split()[1])}"),
    Limit("cpuset", "CPU set", "CPUs it may run on, e.g. 0-1", ("cpuset.cpus",), "cpuset.cpus",
          lambda v: (_cpuset(v),), _cpuset, lambda t: t[0], lambda v: v),
    Limit("io_weight", "IO weight", "1-10000 (100 = default)", ("blkio.weight",), "io.weight",
          lambda v: (str(min(1000, max(10, (_io_weight(v) or 100) // 10))),),
          lambda v: str(_io_weight(v) or 100),
          lambda t: str(int(t[0]) * 10) if t[0].isdigit() else "",
          lambda v: v.split()[-1] if v else ""),
    Limit("pids", "Processes", "max number of processes; empty = unlimited", ("pids.max",),
          "pids.max", lambda v: (str(_pids(v) or "max"),), lambda v: str(_pids(v) or "max"),
          lambda t: _unlimited(t[0]), _unlimited),
)
BY_KEY = {limit.key: limit for limit in LIMITS}


def host_supports(key: str, version: int | None = None) -> bool:
    """Whether this host's cgroups have the file(s) behind a limit (a key that does not
    exist in the config makes ``lxc-start`` fail, so it is never written)."""
    limit = BY_KEY[key]
    version = version or cgroup_version()
    if version == 2:
        try:
            controllers = open("/sys/fs/cgroup/cgroup.controllers").read().split()
        except OSError:
            return False
        return limit.v2.split(".")[0] in controllers
    file = limit.v1[0]
    base = os.path.join("/sys/fs/cgroup", file.split(".")[0])
    if os.path.exists(os.path.join(base, file)):
        return True
    try:
        children = [e.path for e in os.scandir(base) if e.is_dir()]
    except OSError:
        return False
    return any(os.path.exists(os.path.join(child, file)) for child in children)
