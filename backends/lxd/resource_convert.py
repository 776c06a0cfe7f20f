"""Pure conversions of LXD/Incus profile, network, storage and project JSON into
:class:`~backends.models.Resource` rows (no I/O; tested on captured answers)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from ..models import Resource, ResourceKind
from ..units import human_size

_USER_KINDS = {
    "instances": "instance", "containers": "instance", "virtual-machines": "instance",
    "profiles": "profile", "networks": "network", "images": "image",
    "storage-pools": "storage pool", "projects": "project", "network-acls": "network ACL",
}


def user_of(url: str) -> str:
    """``/1.0/instances/web1?project=p`` -> ``instance web1 (project p)``;
    ``/1.0/storage-pools/default/volumes/custom/v1`` -> ``volume default/v1``."""
    parsed = urlparse(url)
    parts = [unquote(p) for p in parsed.path.split("/") if p]
    if parts and parts[0] == "1.0":
        parts = parts[1:]
    project = parse_qs(parsed.query).get("project", [""])[0]
    text = url
    if len(parts) >= 5 and parts[0] == "storage-pools" and parts[2] == "volumes":
        text = f"{parts[3]} volume {parts[1]}/{parts[4]}"
    elif len(parts) >= 4 and parts[0] == "instances" and parts[2] == "snapshots":
        text = f"snapshot {parts[1]}/{parts[3]}"
    elif len(parts) >= 2:
        kind = _USER_KINDS.get(parts[0], parts[0].rstrip("s"))
        name = parts[1][:12] if parts[0] == "images" else parts[1]
        text = f"{kind} {name}"
    if project and project != "default":
        text += f" (project {project})"
    return text


def human(n: int) -> str:
    """Bytes as the CLIs print them (``25.08GiB``)."""
    return human_size(n, decimals=2, sep="")


def users(data: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(user_of(str(u)) for u in data.get("used_by") or ())


def instance_users(data: Mapping[str, Any]) -> tuple[str, ...]:
    """Only the instances among the users (what blocks deleting a profile)."""
    return tuple(u for u in users(data) if u.startswith("instance "))


def _config(data: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in (data.get("config") or {}).items()}


def to_profile(data: Mapping[str, Any], remote: str, project: str) -> Resource:
    used = users(data)
    devices = data.get("devices") or {}
    return Resource(
        ResourceKind.PROFILE, remote, str(data.get("name") or ""), project,
        description=str(data.get("description") or ""), used_by=used,
        fields=(("used_by", str(len(used))), ("devices", ", ".join(sorted(devices))),
                ("config", str(len(data.get("config") or {})))),
        config=_config(data), devices=devices)


def to_network(data: Mapping[str, Any], remote: str, project: str) -> Resource:
    config = _config(data)
    managed = bool(data.get("managed"))
    used = users(data)
    nat = [f"v{v}" for v in ("4", "6") if config.get(f"ipv{v}.nat") == "true"]
    return Resource(
        ResourceKind.NETWORK, remote, str(data.get("name") or ""), project,
        description=str(data.get("description") or ""), used_by=used,
        fields=(("type", str(data.get("type") or "")), ("managed", "yes" if managed else "no"),
                ("ipv4", config.get("ipv4.address", "")),
                ("ipv6", config.get("ipv6.address", "")),
                ("nat", ",".join(nat) or ("no" if managed else "")),
                ("used_by", str(len(used))), ("status", str(data.get("status") or ""))),
        read_only=not managed, config=config)


def to_pool(data: Mapping[str, Any], resources: Mapping[str, Any] | None, remote: str,
            project: str) -> Resource:
    space = (resources or {}).get("space") or {}
    used, total = space.get("used"), space.get("total")
    used_by = users(data)
    return Resource(
        ResourceKind.POOL, remote, str(data.get("name") or ""), project,
        description=str(data.get("description") or ""), used_by=used_by,
        fields=(("driver", str(data.get("driver") or "")),
                ("status", str(data.get("status") or "")),
                ("used", human(int(used)) if isinstance(used, int) else ""),
                ("total", human(int(total)) if isinstance(total, int) and total else ""),
                ("used_by", str(len(used_by)))),
        config=_config(data), extra={"used_bytes": used, "total_bytes": total})


def to_volume(data: Mapping[str, Any], pool: str, remote: str, project: str) -> Resource:
    config = _config(data)
    used = users(data)
    return Resource(
        ResourceKind.VOLUME, remote, str(data.get("name") or ""),
        str(data.get("project") or project), parent=pool,
        description=str(data.get("description") or ""), used_by=used,
        fields=(("pool", pool), ("type", str(data.get("type") or "custom")),
                ("content", str(data.get("content_type") or "filesystem")),
                ("size", config.get("size", "")), ("used_by", str(len(used)))),
        config=config)


def to_project(data: Mapping[str, Any], remote: str) -> Resource:
    config = _config(data)
    features = sorted(k.removeprefix("features.") for k, v in config.items()
                      if k.startswith("features.") and v == "true")
    used = users(data)
    return Resource(
        ResourceKind.PROJECT, remote, str(data.get("name") or ""), str(data.get("name") or ""),
        description=str(data.get("description") or ""), used_by=used,
        fields=(("features", ", ".join(features)), ("used_by", str(len(used)))),
        config=config)
