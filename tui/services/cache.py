"""The last inventory, kept between runs so the table can be painted before any remote answers.

One small JSON file per configuration under ``$XDG_CACHE_HOME/corral/`` (0600 in a 0700
directory) holds, per remote, what a row needs: name, type, status, location, image and
architecture — nothing secret (no config keys, no addresses of guests, no certificates).
An entry is used only for the same remote (same kind, address and project); a remote that
no longer exists or changed is ignored. Rows read from it are *stale* until their remote's
first listing of this run replaces them.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from backends.models import Instance, InstanceRef, InstanceStatus, InstanceType, Remote

from ..locations import cache_dir, config_digest

log = logging.getLogger(__name__)

VERSION = 1
MAX_BYTES = 16 * 1024 * 1024
"""A bigger file is not ours to parse (tens of thousands of rows stay far below this)."""


@dataclass(frozen=True, slots=True)
class CachedRemote:
    """One remote's rows from the last run."""

    saved_at: float
    """Unix time of the listing they came from."""
    instances: tuple[Instance, ...]


def cache_path(env: Mapping[str, str], config_path: Path) -> Path:
    """The file for one configuration (another config never sees these rows)."""
    return cache_dir(env) / f"inventory-{config_digest(config_path)}.json"


def identity(remote: Remote) -> str:
    """What must not change for a cached entry to still describe this remote."""
    return f"{remote.kind}|{remote.address}|{remote.project}"


def _to_json(inst: Instance) -> dict[str, str]:
    row = {"name": inst.name, "type": inst.type.value, "status": inst.status.value}
    for key in ("location", "image", "architecture"):
        value = getattr(inst, key)
        if value:
            row[key] = value
    return row


def _from_json(row: object, remote: Remote) -> Instance | None:
    if not isinstance(row, dict):
        return None
    name, kind, status = row.get("name"), row.get("type"), row.get("status")
    if not isinstance(name, str) or not name or len(name) > 255:
        return None
    try:
        itype, istatus = InstanceType(kind), InstanceStatus(status)
    except ValueError:
        return None
    extra = {k: v for k in ("location", "image", "architecture")
             if isinstance(v := row.get(k), str) and len(v) <= 255}
    return Instance(ref=InstanceRef(remote.name, name, remote.project), type=itype,
                    status=istatus, **extra)


class InventoryCache:
    """Reads and writes the last inventory of one configuration."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, dict] = {}

    def load(self, remotes: Iterable[Remote]) -> dict[str, CachedRemote]:
        """The cached rows of those remotes that are still configured the same way.

        Never raises: a missing, foreign or damaged file means no cached rows.
        """
        try:
            with open(self.path, "rb") as f:
                if os.fstat(f.fileno()).st_uid != os.geteuid():
                    return {}  # not ours: a file someone else put there
                data = json.loads(f.read(MAX_BYTES + 1)[:MAX_BYTES])
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            log.warning("ignoring the inventory cache %s: %s", self.path, e)
            return {}
        if not isinstance(data, dict) or data.get("version") != VERSION \
                or not isinstance(data.get("remotes"), dict):
            return {}
        out: dict[str, CachedRemote] = {}
        for remote in remotes:
            entry = data["remotes"].get(remote.name)
            if not isinstance(entry, dict) or entry.get("identity") != identity(remote):
                continue
            rows = entry.get("instances")
            saved = entry.get("saved_at")
            if not isinstance(rows, list) or not isinstance(saved, (int, float)):
                continue
            instances = tuple(i for r in rows if (i := _from_json(r, remote)) is not None)
            self._entries[remote.name] = entry
            out[remote.name] = CachedRemote(float(saved), instances)
        return out

    def update(self, remote: Remote, instances: Iterable[Instance]) -> None:
        """Remember a remote's current rows (written by :meth:`write`)."""
        self._entries[remote.name] = {
            "identity": identity(remote),
            "saved_at": time.time(),
            "instances": [_to_json(i) for i in instances],
        }

    def forget_except(self, names: Iterable[str]) -> None:
        """Drop remotes that are not configured any more."""
        keep = set(names)
        for name in [n for n in self._entries if n not in keep]:
            del self._entries[name]

    def write(self) -> None:
        """Write the file atomically, private to this user (blocking: call from a thread)."""
        payload = json.dumps({"version": VERSION, "remotes": self._entries},
                             separators=(",", ":")).encode()
        directory = self.path.parent
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = directory / f".{self.path.name}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(payload)
            os.replace(tmp, self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
