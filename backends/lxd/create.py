"""Pure helpers for creating LXD/Incus instances and for snapshot settings: name rules,
cloud-init checks, the ``POST /1.0/instances`` body, progress texts from operations."""

from __future__ import annotations

import re
from typing import Any, Mapping

import yaml

from ..errors import InvalidInput
from ..models import CreateRequest, InstanceType
from ..units import format_size

_NAME_CHARS = re.compile(r"^[A-Za-z0-9-]+$")
_FINGERPRINT = re.compile(r"^[0-9a-f]{12,64}$")


def name_problem(name: str) -> str | None:
    """LXD's instance name rules (``shared/instance.go: ValidName`` / hostname rules), in
    words; None when the name is fine."""
    if not name:
        return "A name is needed."
    if len(name) > 63:
        return f"At most 63 characters ({len(name)} given)."
    if not _NAME_CHARS.match(name):
        bad = sorted({c for c in name if not (c.isascii() and (c.isalnum() or c == "-"))})
        shown = " ".join(repr(c) for c in bad[:5])
        return f"Only letters, digits and hyphens are allowed (not {shown})."
    if name[0].isdigit():
        return "The name must not start with a digit."
    if name[0] == "-":
        return "The name must not start with a hyphen."
    if name[-1] == "-":
        return "The name must not end with a hyphen."
    return None


def check_user_data(text: str) -> str:
    """cloud-init user-data as corral accepts it: ``#cloud-config`` on the first line, then a
    YAML mapping. Returns the text; raises InvalidInput in words."""
    if not text.strip():
        return ""
    first = text.lstrip("\ufeff").splitlines()[0].strip()
    if first != "#cloud-config":
        raise InvalidInput("User data must start with a '#cloud-config' line "
                           f"(the first line is '{first[:40]}').")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise InvalidInput(f"User data is not valid YAML{where}: {problem}.") from None
    if data is not None and not isinstance(data, dict):
        raise InvalidInput("User data must be a YAML mapping (keys like 'packages:', "
                           "'runcmd:').")
    return text


def image_source(value: str) -> dict[str, str]:
    value = value.strip()
    if _FINGERPRINT.match(value):
        return {"type": "image", "fingerprint": value}
    return {"type": "image", "alias": value}


def create_body(request: CreateRequest, *, root: tuple[str, dict[str, Any]] | None,
                nic_names: list[str]) -> dict[str, Any]:
    """The ``POST /1.0/instances`` body for ``request``.

    ``root`` is the root disk device the chosen profiles give (name, device), ``nic_names``
    the profiles' NIC device names (a "none" network turns them off).
    """
    src = request.source
    if src.kind == "image":
        if not src.value:
            raise InvalidInput("No image chosen.")
        source = image_source(src.value)
    elif src.kind == "empty-vm":
        source = {"type": "none"}
    else:
        raise InvalidInput(f"LXD cannot create an instance from a '{src.kind}' source.")
    vm = src.type is InstanceType.VM or src.kind == "empty-vm"
    config: dict[str, str] = {}
    if request.cpus is not None:
        if request.cpus < 1:
            raise InvalidInput("CPUs: at least 1.")
        config["limits.cpu"] = str(request.cpus)
    if request.memory is not None:
        if request.memory < 1024 * 1024:
            raise InvalidInput("Memory: at least 1MiB.")
        config["limits.memory"] = format_size(request.memory)
    if request.user_data.strip():
        config["cloud-init.user-data"] = check_user_data(request.user_data)
    devices: dict[str, dict[str, str]] = {}
    if request.storage_pool or request.disk:
        name, dev = root if root is not None else ("root", {})
        pool = request.storage_pool or dev.get("pool", "")
        if not pool:
            raise InvalidInput("No storage pool: choose one (the profiles give no root disk).")
        new = {"type": "disk", "path": "/", "pool": pool}
        if request.disk:
            if request.disk < 1024 * 1024:
                raise InvalidInput("Disk: at least 1MiB.")
            new["size"] = format_size(request.disk)
        elif dev.get("size") and dev.get("pool") == pool:
            new["size"] = dev["size"]
        devices[name] = new
    if request.network == "none":
        for name in nic_names:
            devices[name] = {"type": "none"}
    elif request.network:
        devices["eth0"] = {"type": "nic", "network": request.network, "name": "eth0"}
    body: dict[str, Any] = {
        "name": request.name,
        "type": "virtual-machine" if vm else "container",
        "source": source,
        "config": config,
        "devices": devices,
    }
    if request.profiles:
        body["profiles"] = list(request.profiles)
    description = (request.options or {}).get("description")
    if description:
        body["description"] = description
    return body


_STAGES = {
    "create_instance_from_image_unpack": "unpacking image",
    "create_instance_from_image_download": "downloading image",
    "metadata_download": "downloading image metadata",
    "rootfs_download": "downloading image",
    "create_instance_from_image": "unpacking image",
}


def progress_text(meta: Mapping[str, Any] | None) -> str:
    """A short progress text from an operation's ``metadata`` ("unpacking image 45%")."""
    if not isinstance(meta, Mapping):
        return ""
    prog = meta.get("progress")
    if isinstance(prog, Mapping) and prog.get("stage"):
        stage = str(prog["stage"])
        label = _STAGES.get(stage) or stage.replace("_progress", "").replace("_", " ")
        pct = prog.get("percent")
        return f"{label} {pct}%" if pct not in (None, "") else label
    for key, value in meta.items():
        if key.endswith("_progress") and isinstance(value, str):
            stage = key[: -len("_progress")]
            label = _STAGES.get(stage)
            m = re.search(r"(\d+)%", value)
            if label and m:
                return f"{label} {m.group(1)}%"
            return value
    return ""


# Snapshot settings -------------------------------------------------------------------------

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
