"""The name an instance had when it was backed up, read from the backup itself.

LXD/Incus backups start with ``backup/index.yaml`` (``name:``), corral's QEMU exports with
``vm.json`` (``"name"``), LXC exports with ``config`` (``lxc.uts.name``), libvirt exports
with ``manifest.json`` (``"name"``). Only the first
few members are read, so a big archive costs next to nothing.
"""

from __future__ import annotations

import json
import tarfile

import yaml

from .work import Worker, in_thread

_LOOK_AT = 8
"""Members read before giving up (the metadata comes first in every format above)."""
_MAX_META = 1 << 20


def _read(worker: Worker, path: str) -> str | None:
    try:
        with tarfile.open(path, "r|*") as tar:
            for count, member in enumerate(tar):
                worker.check()
                if count >= _LOOK_AT:
                    return None
                name = member.name.removeprefix("./")
                if not member.isfile() or member.size > _MAX_META or name not in (
                        "backup/index.yaml", "vm.json", "config", "manifest.json"):
                    continue
                f = tar.extractfile(member)
                text = f.read().decode(errors="replace") if f else ""
                if name == "backup/index.yaml":
                    data = yaml.safe_load(text)
                    found = data.get("name") if isinstance(data, dict) else None
                elif name in ("vm.json", "manifest.json"):
                    data = json.loads(text)
                    found = data.get("name") if isinstance(data, dict) else None
                else:
                    found = None
                    for line in text.splitlines():
                        key, sep, value = line.partition("=")
                        if sep and key.strip() == "lxc.uts.name":
                            found = value.strip()
                return str(found) if found else None
    except (OSError, tarfile.TarError, yaml.YAMLError, ValueError, EOFError):
        return None
    return None


async def original_name(path: str) -> str | None:
    """The instance name recorded in the backup at ``path``, or None when it has none (or
    is not a backup corral knows)."""
    return await in_thread(_read, path)
