"""Pure display formatting. The only module that imports ``humanize``."""

from __future__ import annotations

from datetime import datetime, timezone

import humanize

from backends.models import InstanceState, InstanceType


_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def size(n: int | None) -> str:
    """Bytes in at most three significant digits: ``512B``, ``420KiB``, ``23.4MiB``,
    ``1.25GiB`` (narrow columns, and figures that do not flicker in the last digit)."""
    if n is None:
        return ""
    value, unit = float(n), 0
    while value >= 1024 and unit < len(_UNITS) - 1:
        value /= 1024
        unit += 1
    if unit == 0:
        return f"{int(value)}B"
    if value >= 100:
        return f"{value:.0f}{_UNITS[unit]}"
    if value >= 10:
        return f"{value:.1f}{_UNITS[unit]}"
    return f"{value:.2f}{_UNITS[unit]}"


def memory(state: InstanceState | None, limit: int | None) -> str:
    if state is None:
        return ""
    lim = limit
    used = size(state.memory_usage)
    if state.memory_is_allocation:
        return f"{used} given"  # the guest reports no use: the allocation, said so
    return f"{used}/{size(lim)}" if lim else used


def cpu(state: InstanceState | None) -> str:
    if state is None or state.cpu_percent is None:
        return ""
    return f"{state.cpu_percent:.1f}%"


def disk(state: InstanceState | None) -> str:
    if state is None or not state.disk_usage:
        return ""
    return size(state.disk_usage)


def itype(t: InstanceType) -> str:
    return "VM" if t is InstanceType.VM else "CT"


def ago(when: datetime | None) -> str:
    if when is None:
        return ""
    if when.tzinfo is None:  # LXC and qemu-img give local times without a zone
        when = when.astimezone()
    return humanize.naturaltime(datetime.now(timezone.utc) - when)


_DURATION_UNITS = {"M": 60, "H": 3600, "d": 86400, "w": 7 * 86400, "m": 30 * 86400,
                   "y": 365 * 86400}


def parse_duration(text: str) -> float:
    """LXD's expiry syntax (``2d``, ``1w 3d``, ``12H``, ``30M``: M minutes, H hours, d days,
    w weeks, m months, y years) → seconds.

    Raises:
        ValueError: in words.
    """
    total = 0.0
    parts = text.split()
    if not parts:
        raise ValueError("An expiry is needed (e.g. 2d, 1w, 12H).")
    for part in parts:
        number, unit = part[:-1], part[-1:]
        if unit not in _DURATION_UNITS or not number.isdigit():
            raise ValueError(f"'{part}' is not a duration: use a number and one of M (minutes), "
                             f"H (hours), d, w, m (months), y — e.g. 2d or 1w 3d.")
        total += int(number) * _DURATION_UNITS[unit]
    return total
