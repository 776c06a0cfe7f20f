"""The project each LXD/Incus remote is shown in: switched from the projects view,
remembered per remote between runs (``$CORRAL_STATE_DIR`` or
``$XDG_STATE_HOME/corral/projects.json``)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from backends.models import Remote
from backends.paths import UntrustedFile, read_owned

from .inventory import Inventory


def state_file(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("CORRAL_STATE_DIR"):
        return Path(env["CORRAL_STATE_DIR"]) / "projects.json"
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "corral" / "projects.json"


def remembered(path: Path | None = None) -> dict[str, str]:
    path = path or state_file()
    try:
        data = json.loads(read_owned(path))
    except (OSError, ValueError, UntrustedFile):  # (a planted file: as if none)
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def remember(remote: str, project: str, path: Path | None = None) -> None:
    path = path or state_file()
    data = remembered(path)
    if project == "default":
        data.pop(remote, None)
    else:
        data[remote] = project
    from backends.trust import write_private

    write_private(path, json.dumps(data, indent=1, sort_keys=True).encode(), mode=0o600)


def apply_remembered(remotes: list[Remote], path: Path | None = None) -> list[Remote]:
    """The remotes with the project each was last shown in (only remotes that have
    projects are ever remembered: the projects view offers no others)."""
    known = remembered(path)
    return [replace(r, project=known[r.name]) if r.name in known else r for r in remotes]


def switch(inventory: Inventory, remote: str, project: str, *, keep: bool = True) -> None:
    """Show ``remote`` in ``project`` from now on: it reconnects there (its rows are
    listed again) and, with ``keep``, the choice is remembered."""
    current = inventory.remotes[remote]
    if current.project == project:
        return
    changed = replace(current, project=project)
    inventory.remotes[remote] = changed
    inventory.statuses[remote].remote = changed
    inventory.retry(remote)
    if keep:
        remember(remote, project)
