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
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from backends.models import Instance, InstanceRef, InstanceStatus, InstanceType, Remote
from backends.paths import UntrustedFile, check_owned, read_owned

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


def refusal(env: Mapping[str, str], config_path: Path) -> str | None:
    """Why this configuration's cache file will not be read (another user's, a link, a
    FIFO…), for the problems shown at start-up; None: it will be, or there is none."""
    problem = check_owned(cache_path(env, config_path))
    return f"The inventory cache was not used: {problem}" if problem else None


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

    def text(key: str) -> str:  # a short string, else the field's default ("")
        value = row.get(key)
        return value if isinstance(value, str) and len(value) <= 255 else ""

    return Instance(ref=InstanceRef(remote.name, name, remote.project), type=itype,
                    status=istatus, location=text("location"), image=text("image"),
                    architecture=text("architecture"))


class InventoryCache:
    """Reads and writes the last inventory of one configuration."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, dict] = {}
        self._seen: dict[str, tuple[Instance, ...]] = {}
        """The instance objects each entry was made from (rows unchanged are the same
        objects: the inventory replaces an instance only when it changes)."""
        self.problem: str | None = None
        """Why the file was refused (another user's, a link, a FIFO…), in words."""

    def load(self, remotes: Iterable[Remote]) -> dict[str, CachedRemote]:
        """The cached rows of those remotes that are still configured the same way.

        Never raises: a missing, foreign or damaged file means no cached rows (a file
        that is not this user's own, :func:`~backends.paths.read_owned`, is not even read,
        and :attr:`problem` says why).
        """
        try:
            data = json.loads(read_owned(self.path, limit=MAX_BYTES))
        except FileNotFoundError:
            return {}
        except UntrustedFile as e:
            self.problem = f"The inventory cache was not used: {e.message}"
            log.warning("%s", self.problem)
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

    def update(self, remote: Remote, instances: Iterable[Instance]) -> bool:
        """Remember a remote's current rows (written by :meth:`write`); True when they
        differ from the rows remembered (usage figures, which change every few seconds,
        are not kept: a remote whose rows are the same needs no new file)."""
        instances = tuple(instances)
        old = self._entries.get(remote.name)
        if old is not None and old.get("identity") == identity(remote):
            seen = self._seen.get(remote.name, ())
            if len(seen) == len(instances) and all(a is b for a, b in zip(seen, instances)):
                old["saved_at"] = time.time()  # the very rows (a usage sample): no JSON
                return False
        self._seen[remote.name] = instances
        rows = [_to_json(i) for i in instances]
        same = old is not None and old.get("identity") == identity(remote) \
            and old.get("instances") == rows
        self._entries[remote.name] = {
            "identity": identity(remote),
            "saved_at": time.time(),
            "instances": rows,
        }
        return not same

    def forget_except(self, names: Iterable[str]) -> bool:
        """Drop remotes that are not configured any more; True when there were some."""
        keep = set(names)
        gone = [n for n in self._entries if n not in keep]
        for name in gone:
            del self._entries[name]
            self._seen.pop(name, None)
        return bool(gone)

    def write(self) -> None:
        """Write the file atomically, private to this user, in a checked directory
        (:func:`~backends.trust.write_private`; blocking: call from a thread). A
        directory another user could change is not written in: logged, not raised."""
        from backends.trust import write_private

        payload = json.dumps({"version": VERSION, "remotes": self._entries},
                             separators=(",", ":")).encode()
        try:
            write_private(self.path, payload, mode=0o600)
        except UntrustedFile as e:
            self.problem = f"The inventory cache was not saved: {e.message}"
            log.warning("%s", self.problem)
