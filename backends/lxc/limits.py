"""Resource limits of LXC containers through cgroups (v1 and v2 key names): the table of
limits and their conversions (pure), and the verbs ``get_limits``/``set_limits``.

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

from ..base import Backend
from ..errors import InvalidInput, OperationFailed
from ..models import InstanceRef, InstanceStatus, LimitField
from ..units import is_whole
from ..units import size_or_none as parse_size
from . import parse
from .tools import LXCTools, words

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
        if not is_whole(value) or not low <= int(value) <= high:
            raise InvalidInput(f"{name} must be a whole number from {low} to {high}.")
        return int(value)
    return check


_weight = _int_range("CPU weight", 1, 10000)
_io_weight = _int_range("IO weight", 1, 10000)
_pids = _int_range("Process limit", 1, 4194304)


def _quota(value: str) -> int | None:
    if value in ("", "max", "unlimited"):
        return None
    if not re.fullmatch(r"[0-9]{1,15}(\.[0-9]{1,15})?", value) or float(value) <= 0:
        raise InvalidInput("CPU quota is a percentage of one CPU, e.g. 50 or 200.")
    return max(1000, int(float(value) / 100 * PERIOD))


def _cpuset(value: str) -> str:
    if value == "":
        return ""
    if not re.fullmatch(r"[0-9]{1,15}(-[0-9]{1,15})?(,[0-9]{1,15}(-[0-9]{1,15})?)*", value):
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
          lambda t: str(int(t[0]) * 100 // 1024) if is_whole(t[0]) else "", lambda v: v),
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
          lambda t: str(int(t[0]) * 10) if is_whole(t[0]) else "",
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


def config_prefix(version: int) -> str:
    """How a container's config names the cgroup files of ``version``."""
    return "lxc.cgroup." if version == 1 else "lxc.cgroup2."


def cgroup_pairs(key: str, value: str, version: int) -> tuple[tuple[str, str], ...]:
    """The cgroup files (of cgroup ``version``) and values that set the limit ``key`` to
    ``value``.

    Raises:
        InvalidInput: an unknown limit, one this host's cgroups lack, or a bad value.
    """
    limit = BY_KEY.get(key)
    if limit is None:
        raise InvalidInput(f"Unknown limit '{key}' (known: {', '.join(BY_KEY)}).")
    if not host_supports(key, version):
        raise InvalidInput(f"{limit.label} cannot be limited on this host "
                           f"(cgroup v{version} lacks it).")
    if version == 1:
        return tuple(zip(limit.v1, limit.to_v1(value)))
    return ((limit.v2, limit.to_v2(value)),)


class Limits(Backend):
    """``get_limits``/``set_limits`` of :class:`~backends.lxc.backend.LXCBackend`."""

    lxc: LXCTools

    async def get_limits(self, ref: InstanceRef) -> list[LimitField]:
        """Limits of a stopped container come from its config (``restart``); of a running
        one from its cgroup (``live``), with ``pending`` when the config says otherwise
        (edited meanwhile, or a cleared CPU set, which only a restart undoes)."""
        inst = await self.get_instance(ref)
        running = inst.status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN)
        version = cgroup_version()
        config = self.lxc.config(ref.name)
        prefix = config_prefix(version)
        fields = []
        for limit in LIMITS:
            keys = limit.v1 if version == 1 else (limit.v2,)
            if not host_supports(limit.key, version):
                fields.append(LimitField(limit.key, limit.label, "", "unsupported",
                                         f"this host's cgroup v{version} has no {keys[0]}"))
                continue
            saved = [parse.config_value(config, prefix + k) or "" for k in keys]
            if running:
                live = []
                for key in keys:
                    rc, out, _ = await self.lxc.run("lxc-cgroup", "-n", ref.name, key)
                    live.append(out.strip() if rc == 0 else "")
                value = self._limit_value(limit, version, live)
                pending = ""
                if saved[0]:
                    # keys the config lacks (cpu.cfs_period_us) keep their running value
                    merged = [s or v for s, v in zip(saved, live)]
                    at_start = self._limit_value(limit, version, merged)
                    if not self._same(limit.key, at_start, value):
                        pending = at_start or "unlimited"
                elif limit.key == "cpuset" and value and not self._same(
                        "cpuset", self._all_cpus(), value):
                    pending = self._all_cpus()  # cleared while running: all CPUs at start
            else:
                value = self._limit_value(limit, version, saved)
                pending = ""
            fields.append(LimitField(limit.key, limit.label, value,
                                     "live" if running else "restart", limit.hint,
                                     pending=pending))
        return fields

    @staticmethod
    def _limit_value(limit: Limit, version: int, values: list[str]) -> str:
        try:
            return limit.from_v1(tuple(values)) if version == 1 else limit.from_v2(values[0])
        except (ValueError, IndexError, ZeroDivisionError):
            return ""

    @staticmethod
    def _same(key: str, saved: str, live: str) -> bool:
        """Whether a saved value is what the kernel shows (it rounds memory to pages and
        rewrites CPU lists: ``0,1`` → ``0-1``)."""
        if saved == live:
            return True
        if key == "memory" and is_whole(saved) and is_whole(live):
            return abs(int(saved) - int(live)) < os.sysconf("SC_PAGE_SIZE")
        if key == "cpuset":
            def cpus(text: str) -> set[int]:
                out: set[int] = set()
                for part in filter(None, text.split(",")):
                    low, _, high = part.partition("-")
                    if int(high or low) - int(low) > 65536:
                        raise ValueError("not a CPU list of this world")
                    out.update(range(int(low), int(high or low) + 1))
                return out
            try:
                return cpus(saved) == cpus(live)
            except ValueError:
                return False
        return False

    @staticmethod
    def _all_cpus() -> str:
        """The CPUs a container without a CPU set gets (those corral may run on), as a
        list like ``0-3`` or ``0,2-3``."""
        try:
            cpus = sorted(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpus = list(range(os.cpu_count() or 1))
        parts: list[str] = []
        start = prev = cpus[0]
        for c in cpus[1:] + [-2]:
            if c != prev + 1:
                parts.append(str(start) if start == prev else f"{start}-{prev}")
                start = c
            prev = c
        return ",".join(parts)

    async def set_limits(self, ref: InstanceRef, changes: dict[str, str]) -> dict[str, str]:
        """Validate everything first, apply live (running containers), then persist in the
        container's config so the limits survive a restart."""
        inst = await self.get_instance(ref)
        running = inst.status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN)
        version = cgroup_version()
        planned = [(key, cgroup_pairs(key, value.strip(), version))
                   for key, value in changes.items()]
        if running:
            for _key, pairs in planned:
                for cg_key, cg_value in pairs:
                    if cg_value == "":
                        continue  # an empty cpuset means "leave as is" live
                    rc, _, err = await self.lxc.run("lxc-cgroup", "-n", ref.name, cg_key,
                                                    cg_value)
                    if rc != 0:
                        raise OperationFailed(f"Setting {cg_key} = {cg_value} on {ref} failed: "
                                              f"{words(err)}")
        self._persist(ref.name, version, [pair for _, pairs in planned for pair in pairs])
        # a cleared CPU set is not applied live (see above): it takes effect at next start
        return {key: "live" if running and not (key == "cpuset" and not pairs[0][1])
                else "restart" for key, pairs in planned}

    def _persist(self, name: str, version: int, pairs: list[tuple[str, str]]) -> None:
        prefix = config_prefix(version)
        keys = {prefix + k for k, _ in pairs}
        lines = [line for line in self.lxc.config(name).splitlines()
                 if line.partition("=")[0].strip() not in keys]
        lines += [f"{prefix}{k} = {v}" for k, v in pairs if v not in ("", "-1", "max")]
        self.lxc.write_config(name, lines)
