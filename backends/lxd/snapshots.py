"""Snapshots of LXD/Incus instances: list, count, take (stateful, with an expiry), rename,
restore, delete, and the automatic snapshot settings (schedule, expiry, name pattern) with
their checks, done before anything is sent."""

from __future__ import annotations

import asyncio
import re
from datetime import datetime
from typing import Any
from urllib.parse import quote

from ..base import Backend
from ..errors import InvalidInput
from ..models import InstanceRef, Snapshot
from . import convert
from .ops import Ops
from .rest import Rest


class Snapshots(Backend):
    """The snapshot verbs of :class:`~backends.lxd.backend.LXDBackend`."""

    rest: Rest
    ops: Ops

    async def list_snapshots(self, ref: InstanceRef) -> list[Snapshot]:
        client = self.rest.client
        items = await self.rest.call(
            lambda: client.api.instances[ref.name].snapshots.get(
                params={"recursion": 1}).json()["metadata"] or []
        )
        return sorted((convert.to_snapshot(d, ref) for d in items),
                      key=lambda s: (s.created_at is None, s.created_at or 0, s.name))

    async def snapshot_counts(self, refs: list[InstanceRef]) -> dict[InstanceRef, int]:
        """On the fast GET path (``GET /1.0/instances/<n>/snapshots``: their URLs): the
        visible rows ask for it as soon as a remote connects, and it must not wait for (nor
        start) the pylxd client's build."""
        async def _one(ref: InstanceRef) -> int:
            return len(await self.rest.get("instances", ref.name, "snapshots") or ())

        results = await asyncio.gather(*(_one(r) for r in refs), return_exceptions=True)
        return {r: n for r, n in zip(refs, results) if isinstance(n, int)}

    async def create_snapshot(self, ref: InstanceRef, name: str, *, stateful: bool = False,
                              expires_at: datetime | None = None) -> Snapshot:
        """Take a snapshot; ``expires_at`` (LXD ``expires_at``, extension
        ``snapshot_expiry_creation``) makes the daemon delete it at that time. A naive
        datetime is local time."""
        rest = self.rest
        client = rest.client
        body: dict[str, Any] = {"name": name, "stateful": stateful}
        if expires_at is not None:
            body["expires_at"] = convert.rfc3339(expires_at)

        def _do() -> None:
            r = client.api.instances[ref.name].snapshots.post(json=body)
            self.ops.wait(r, 300)

        await rest.call(_do, timeout=330)
        data = await rest.call(
            lambda: client.api.instances[ref.name].snapshots[quote(name, safe="")]
            .get().json()["metadata"])
        return convert.to_snapshot(data, ref)

    async def rename_snapshot(self, snapshot: Snapshot, new_name: str) -> Snapshot:
        """``POST /1.0/instances/<n>/snapshots/<s> {"name": new}``."""
        rest = self.rest
        client = rest.client
        ref = snapshot.ref
        problem = convert.snapshot_name_problem(new_name)
        if problem:
            raise InvalidInput(problem)

        def _do() -> dict[str, Any]:
            node = client.api.instances[ref.name].snapshots
            self.ops.wait(node[quote(snapshot.name, safe="")].post(json={"name": new_name}), 120)
            return node[new_name].get().json()["metadata"]

        return convert.to_snapshot(await rest.call(_do, timeout=150), ref)

    async def restore_snapshot(self, snapshot: Snapshot) -> None:
        rest = self.rest
        client = rest.client
        ref = snapshot.ref

        def _do() -> None:
            # what `lxc restore` sends: the other fields are ignored when restoring
            body = {"restore": snapshot.name, "stateful": snapshot.stateful}
            self.ops.wait(client.api.instances[ref.name].put(json=body), 300)

        await rest.call(_do, timeout=330)

    async def delete_snapshot(self, snapshot: Snapshot) -> None:
        rest = self.rest
        client = rest.client
        ref = snapshot.ref

        def _do() -> None:
            node = client.api.instances[ref.name].snapshots[quote(snapshot.name, safe="")]
            self.ops.wait(node.delete(), 120)

        await rest.call(_do, timeout=150)

    # Automatic snapshots -------------------------------------------------------------

    async def snapshot_settings(self, ref: InstanceRef) -> dict[str, str]:
        """``snapshots.schedule``, ``snapshots.expiry``, ``snapshots.pattern`` as in effect
        (the expanded config: profiles included); empty when unset."""
        data = await self.rest.instance(ref.name)
        config = data.get("expanded_config") or data.get("config") or {}
        return {key: str(config.get(key) or "") for key in SNAPSHOT_KEYS}

    async def set_snapshot_settings(self, ref: InstanceRef, values: dict[str, str]) -> None:
        """Set any of the three keys on the instance ("" removes the instance's own value,
        so a profile's applies again). Everything is checked before anything is sent.

        Raises:
            InvalidInput: an unknown key or a malformed schedule/expiry/pattern.
        """
        checks = {"snapshots.schedule": check_schedule,
                  "snapshots.expiry": check_expiry,
                  "snapshots.pattern": check_pattern}
        clean: dict[str, str] = {}
        for key, value in values.items():
            if key not in checks:
                raise InvalidInput(f"Unknown snapshot setting '{key}' "
                                   f"(known: {', '.join(SNAPSHOT_KEYS)}).")
            clean[key] = checks[key](value or "")

        def change(data: dict[str, Any]) -> None:
            config = data["config"]
            for key, value in clean.items():
                if value:
                    config[key] = value
                else:
                    config.pop(key, None)

        await self.ops.update_instance(ref, change)


# Checks of the settings (pure) -------------------------------------------------------------

SNAPSHOT_KEYS = ("snapshots.schedule", "snapshots.expiry", "snapshots.pattern")
_SCHEDULE_ALIASES = {"@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@annually",
                     "@yearly", "@startup", "@never"}
_CRON_FIELD = re.compile(r"^[0-9A-Za-z*/,\-]+$")
_EXPIRY = re.compile(r"^\d+[MHdwmy]$")


def check_schedule(text: str) -> str:
    """``snapshots.schedule``: empty, a 5-field cron expression, an alias (@daily, ...), or
    a comma-separated list of aliases/cron expressions (as LXD accepts)."""
    text = text.strip()
    if not text:
        return ""
    parts = [p.strip() for p in text.split(",")] if text.startswith("@") else [text]
    for part in parts:
        if part.startswith("@"):
            if part not in _SCHEDULE_ALIASES:
                raise InvalidInput(f"Snapshot schedule: unknown alias '{part}' (use @hourly, "
                                   f"@daily, @weekly, @monthly, @startup or @never).")
            continue
        fields = part.split()
        if len(fields) != 5 or not all(_CRON_FIELD.match(f) for f in fields):
            raise InvalidInput(f"Snapshot schedule: '{part}' is not a cron expression with 5 "
                               f"fields (minute hour day month weekday, e.g. '0 6 * * *').")
    return text


def check_expiry(text: str) -> str:
    """``snapshots.expiry``: empty, or space-separated amounts of M (minutes), H (hours),
    d, w, m (months), y: ``2d``, ``1w 3d``, ``6H``."""
    text = " ".join(text.split())
    if not text:
        return ""
    for part in text.split(" "):
        if not _EXPIRY.match(part):
            raise InvalidInput(f"Snapshot expiry: '{part}' is not an amount with a unit "
                               f"(M minutes, H hours, d days, w weeks, m months, y years; "
                               f"e.g. '2d' or '1w 3d').")
    return text


def check_pattern(text: str) -> str:
    text = text.strip()
    if any(c in text for c in "/ "):
        raise InvalidInput("Snapshot name pattern: no slashes or spaces (e.g. 'snap%d').")
    return text
