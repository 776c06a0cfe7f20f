"""Parsers for the ``lxc-*`` tools' text output and for container configs (pure functions,
tested on captured output)."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Iterator

from ..models import InstanceStatus

_STATUS = {
    "RUNNING": InstanceStatus.RUNNING,
    "STOPPED": InstanceStatus.STOPPED,
    "FROZEN": InstanceStatus.FROZEN,
    "FREEZING": InstanceStatus.FROZEN,
    "THAWED": InstanceStatus.RUNNING,
    "STARTING": InstanceStatus.STARTING,
    "STOPPING": InstanceStatus.STOPPING,
    "ABORTING": InstanceStatus.STOPPING,
}

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def status_of(text: str) -> InstanceStatus:
    return _STATUS.get(text.strip().upper(), InstanceStatus.UNKNOWN)


def fancy_table(text: str) -> list[dict[str, str]]:
    """``lxc-ls --fancy -F A,B,...``: a fixed-width table whose header gives the columns.

    Values may contain ", " (several addresses), so columns are cut at the header offsets
    rather than split on whitespace.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = lines[0]
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    names = header.split()
    rows = []
    for line in lines[1:]:
        row = {}
        for i, name in enumerate(names):
            end = starts[i + 1] if i + 1 < len(starts) else None
            row[name] = line[starts[i]:end].strip()
        rows.append(row)
    return rows


def addresses(value: str) -> tuple[str, ...]:
    if not value or value == "-":
        return ()
    return tuple(a.strip() for a in value.split(",") if a.strip())


def info(text: str) -> dict[str, str]:
    """``lxc-info -H``: ``Key: value`` lines (IP may repeat)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "IP":
            out["IP"] = f"{out['IP']},{value}" if "IP" in out else value
        else:
            out[key] = value
    return out


_MONITOR_RE = re.compile(r"^'(?P<name>[^']+)' changed state to \[(?P<state>[A-Z]+)\]")


def monitor_line(line: str) -> tuple[str, str] | None:
    """``'c1' changed state to [STOPPED]`` -> (``c1``, ``STOPPED``)."""
    m = _MONITOR_RE.match(line.strip())
    return (m.group("name"), m.group("state")) if m else None


_SNAP_RE = re.compile(
    r"^(?P<name>\S+)\s+\((?P<dir>[^)]*)\)\s+(?P<date>\d{4}:\d{2}:\d{2} \d{2}:\d{2}:\d{2})$"
)


def snapshots(text: str) -> Iterator[tuple[str, datetime | None, str]]:
    """``lxc-snapshot -L -C``: ``snap0 (/path/snaps) 2026:11:29 17:15:51`` lines, each
    optionally followed by its comment lines. Yields (name, date, comment)."""
    current: list = []
    for line in text.splitlines():
        m = _SNAP_RE.match(line.strip())
        if m:
            if current:
                yield current[0], current[1], "\n".join(current[2]).strip()
            try:
                when = datetime.strptime(m.group("date"), "%Y:%m:%d %H:%M:%S")
            except ValueError:
                when = None
            current = [m.group("name"), when, []]
        elif current and line.strip() and line.strip() != "No snapshots":
            current[2].append(line)
    if current:
        yield current[0], current[1], "\n".join(current[2]).strip()


def config_value(config_text: str, key: str) -> str | None:
    """Last ``key = value`` of an LXC config file."""
    value = None
    for line in config_text.splitlines():
        k, sep, v = line.partition("=")
        if sep and k.strip() == key:
            value = v.strip()
    return value


def template_of(config_text: str) -> str:
    """The template named in the comment lxc-create writes at the top of the config."""
    m = re.search(r"Template used to create this container: \S*lxc-(\S+)", config_text)
    return m.group(1) if m else ""


DESCRIPTION = "# corral.description:"
"""The comment line a container's description is kept in (LXC has no field for one)."""


def description_of(config_text: str) -> str:
    """The description corral keeps as a comment line in the config (LXC has no field for
    one; lxc-copy, renames and snapshots copy the config text, comments included)."""
    for line in reversed(config_text.splitlines()):
        if line.startswith(DESCRIPTION):
            try:
                value = json.loads(line[len(DESCRIPTION):].strip())
            except ValueError:
                return ""
            return value if isinstance(value, str) else ""
    return ""


def rootfs(config_text: str) -> tuple[str, str]:
    """(backing store, path) of ``lxc.rootfs.path``: ``dir`` for ``dir:/x`` and ``/x``;
    ``overlay`` (path: ``lower:upper``), ``btrfs``, ``lvm``, ... otherwise."""
    value = (config_value(config_text, "lxc.rootfs.path") or "").strip()
    if value.startswith("/"):
        return "dir", value
    kind, _, path = value.partition(":")
    return (kind, path) if path else ("", value)
