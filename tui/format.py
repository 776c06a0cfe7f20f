"""Pure display formatting. The only module that imports ``humanize``."""

from __future__ import annotations

from datetime import datetime, timezone

import humanize

from backends.models import InstanceState, InstanceType


def size(n: int | None) -> str:
    if n is None:
        return ""
    return humanize.naturalsize(n, binary=True, format="%.1f").replace(" ", "")


def memory(state: InstanceState | None, limit: int | None) -> str:
    if state is None:
        return ""
    lim = limit
    used = size(state.memory_usage)
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
    return humanize.naturaltime(datetime.now(timezone.utc) - when)
