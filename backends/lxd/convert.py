"""LXD/Incus JSON -> corral models, texts and names. Pure functions, tested against captured
responses."""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Mapping
from urllib.parse import parse_qs, unquote, urlparse

from .. import units
from ..errors import AuthError
from ..members import ClusterMember, MemberStatus
from ..models import (
    BackendEvent,
    EventKind,
    ImageInfo,
    Instance,
    InstanceRef,
    InstanceState,
    InstanceStatus,
    InstanceType,
    Operation,
    Remote,
    ServerInfo,
    Snapshot,
)

log = logging.getLogger(__name__)

_STATUS = {
    "running": InstanceStatus.RUNNING,
    "stopped": InstanceStatus.STOPPED,
    "frozen": InstanceStatus.FROZEN,
    "freezing": InstanceStatus.FROZEN,
    "thawed": InstanceStatus.RUNNING,
    "starting": InstanceStatus.STARTING,
    "stopping": InstanceStatus.STOPPING,
    "aborting": InstanceStatus.STOPPING,
    "error": InstanceStatus.ERROR,
    "ready": InstanceStatus.RUNNING,
}

_NAME_CHARS = re.compile(r"^[A-Za-z0-9-]+$")

parse_size = units.size_or_none
"""LXD size strings in bytes, read by the one parser of every backend."""


def parse_time(text: str | None) -> datetime | None:
    """LXD timestamps have nanoseconds and a ``Z``; the zero time means 'never'."""
    if not text or text.startswith("0001-01-01"):
        return None
    t = text.replace("Z", "+00:00")
    t = re.sub(r"\.(\d{6})\d+", r".\1", t)
    try:
        return datetime.fromisoformat(t)
    except ValueError:
        return None


def status_of(text: str | None) -> InstanceStatus:
    return _STATUS.get((text or "").lower(), InstanceStatus.UNKNOWN)


def image_of(config: Mapping[str, str]) -> str:
    desc = config.get("image.description")
    if desc:
        return desc
    parts = [config.get("image.os", ""), config.get("image.release", "")]
    return " ".join(p for p in parts if p)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def server_info(meta: Mapping[str, Any]) -> ServerInfo:
    """``GET /1.0``: what the server says about itself."""
    env = meta.get("environment") or {}
    return ServerInfo(
        server=str(env.get("server") or "lxd"),
        version=str(env.get("server_version") or ""),
        api_extensions=frozenset(meta.get("api_extensions") or ()),
        auth=str(meta.get("auth") or ""),
        server_name=str(env.get("server_name") or ""),
    )


def check_trusted(meta: Mapping[str, Any], remote: Remote) -> None:
    """``GET /1.0`` of a server that does not trust this client: say what to do.

    Raises:
        AuthError: the server does not trust corral's certificate.
    """
    if meta.get("auth") != "trusted":
        raise AuthError(
            f"'{remote.name}' does not trust this client's certificate "
            f"({remote.client_cert}). Add it with `lxc config trust add` or "
            f"re-add the remote with a trust token."
        )


def to_instance(data: Mapping[str, Any], remote: str) -> Instance:
    """One entry of ``GET /1.0/instances?recursion=1``.

    Raises:
        ValueError, TypeError: the entry is not an instance (no name, wrong shapes).
    """
    if not isinstance(data, Mapping):
        raise TypeError("the entry is not an object")
    name = data.get("name")
    if not isinstance(name, str) or not name or not name.isprintable():
        raise ValueError(f"its name {name!r} is not a name")
    config = _mapping(data.get("config"))
    expanded = _mapping(data.get("expanded_config")) or config
    data = dict(data)
    for key in ("description", "architecture", "location", "project"):
        if not isinstance(data.get(key), (str, type(None))):
            data[key] = ""
    itype = InstanceType.VM if data.get("type") == "virtual-machine" else InstanceType.CONTAINER
    snaps = data.get("snapshots")
    return Instance(
        ref=InstanceRef(remote, name, data.get("project") or "default"),
        type=itype,
        status=status_of(data.get("status")),
        image=image_of(config),
        description=data.get("description") or "",
        architecture=data.get("architecture") or "",
        created_at=parse_time(data.get("created_at")),
        snapshot_count=len(snaps) if isinstance(snaps, list) else None,
        profiles=tuple(p for p in data.get("profiles") or () if isinstance(p, str)),
        location=location if (location := data.get("location") or "") != "none" else "",
        cpu_limit=str(expanded.get("limits.cpu") or ""),
        memory_limit=parse_size(expanded.get("limits.memory")),
        config=dict(expanded),
        devices=data.get("expanded_devices") or data.get("devices") or {},
        extra={"status_code": data.get("status_code"), "stateful": data.get("stateful")},
    )


def instances(items: Any, remote: str) -> tuple[Instance, ...]:
    """Every instance of an answer to ``GET /1.0/instances?recursion=1``; a malformed
    entry is left out (and logged), hiding nothing else."""
    out = []
    for d in items if isinstance(items, list) else ():
        try:
            out.append(to_instance(d, remote))
        except Exception as e:
            log.warning("%s: skipped a malformed instance entry (%s: %s): %.200r",
                        remote, type(e).__name__, e, d)
    return tuple(out)


def to_state(
    data: Mapping[str, Any],
    *,
    sampled_at: float,
    previous: InstanceState | None = None,
    memory_limit: int | None = None,
) -> InstanceState:
    """``GET /1.0/instances/<n>/state``. CPU % needs the previous sample."""
    cpu_ns = int((data.get("cpu") or {}).get("usage") or 0)
    percent = None
    if previous is not None and sampled_at > previous.sampled_at and cpu_ns >= previous.cpu_usage_ns:
        percent = (cpu_ns - previous.cpu_usage_ns) / ((sampled_at - previous.sampled_at) * 1e9) * 100
    mem = data.get("memory") or {}
    disks = data.get("disk") or {}
    root = disks.get("root") or {}
    disk_usage = sum(int((d or {}).get("usage") or 0) for d in disks.values()) if disks else None
    disk_total = int(root.get("total") or 0) or None
    ipv4: list[str] = []
    ipv6: list[str] = []
    rx = tx = 0
    for ifname, nic in (data.get("network") or {}).items():
        if ifname == "lo" or not nic:
            continue
        counters = nic.get("counters") or {}
        rx += int(counters.get("bytes_received") or 0)
        tx += int(counters.get("bytes_sent") or 0)
        for a in nic.get("addresses") or ():
            if a.get("scope") != "global":
                continue
            (ipv4 if a.get("family") == "inet" else ipv6).append(a.get("address", ""))
    total = int(mem.get("total") or 0) or None
    return InstanceState(
        cpu_usage_ns=cpu_ns,
        cpu_percent=percent,
        memory_usage=int(mem.get("usage") or 0),
        memory_limit=memory_limit or total,
        disk_usage=disk_usage,
        disk_limit=disk_total,
        ipv4=tuple(ipv4),
        ipv6=tuple(ipv6),
        processes=data.get("processes"),
        pid=data.get("pid") or None,
        rx_bytes=rx,
        tx_bytes=tx,
        sampled_at=sampled_at,
    )


def to_snapshot(data: Mapping[str, Any], ref: InstanceRef) -> Snapshot:
    size = data.get("size")
    return Snapshot(
        ref=ref,
        name=data["name"].split("/")[-1],
        created_at=parse_time(data.get("created_at")),
        stateful=bool(data.get("stateful")),
        expires_at=parse_time(data.get("expires_at")),
        size=size if isinstance(size, int) and size >= 0 else None,
    )


def to_operation(data: Mapping[str, Any], remote: str) -> Operation:
    resources = data.get("resources") or {}
    names: list[str] = []
    for url in (resources.get("instances") or resources.get("containers") or ()):
        name = instance_name_from_source(url)
        if name and name not in names:
            names.append(name)
    progress = ""
    meta = data.get("metadata") or {}
    if isinstance(meta, dict):
        for key, value in meta.items():
            if key.endswith("_progress") and isinstance(value, str):
                progress = value
                break
    return Operation(
        id=str(data.get("id", "")),
        remote=remote,
        description=str(data.get("description") or ""),
        status=str(data.get("status") or ""),
        progress=progress,
        may_cancel=bool(data.get("may_cancel")),
        error=str(data.get("err") or ""),
        instances=tuple(names),
        interactive=data.get("class") == "websocket",
        created_at=parse_time(data.get("created_at")),
    )


def instance_name_from_source(source: str) -> str | None:
    """``/1.0/instances/c1/snapshots/s0?project=p`` -> ``c1``."""
    path = urlparse(source).path
    parts = [unquote(p) for p in path.split("/") if p]
    for i, part in enumerate(parts[:-1]):
        if part in ("instances", "containers", "virtual-machines") and i >= 1:
            return parts[i + 1]
    return None


def project_from_source(source: str) -> str | None:
    qs = parse_qs(urlparse(source).query)
    return qs.get("project", [None])[0]


def to_event(data: Mapping[str, Any], remote: str) -> BackendEvent | None:
    """One frame of ``/1.0/events``; ``None`` for event types corral ignores.

    Raises:
        ValueError, TypeError: the frame is not an event of the shape LXD sends.
    """
    if not isinstance(data, Mapping):
        raise TypeError("the frame is not an object")
    etype = data.get("type")
    meta = _mapping(data.get("metadata"))
    ts = parse_time(data.get("timestamp"))
    if etype == "lifecycle":
        source = str(meta.get("source") or "")
        action = str(meta.get("action") or "")
        ref = None
        if action.startswith("instance-"):
            name = instance_name_from_source(source) or meta.get("name")
            if name is not None and not isinstance(name, str):
                raise TypeError(f"the instance name {name!r} is not text")
            if name:
                project = (
                    meta.get("project") or data.get("project") or project_from_source(source)
                    or "default"
                )
                ref = InstanceRef(remote, name, project)
        return BackendEvent(EventKind.LIFECYCLE, remote, action=action, ref=ref, timestamp=ts,
                            message=str(source))
    if etype == "operation":
        op = to_operation(meta, remote)
        return BackendEvent(EventKind.OPERATION, remote, action=op.status, operation=op,
                            timestamp=ts)
    return None


def to_image(data: Mapping[str, Any]) -> ImageInfo:
    """One entry of ``GET /1.0/images?recursion=1``."""
    props = data.get("properties") or {}
    size = data.get("size")
    return ImageInfo(
        fingerprint=str(data.get("fingerprint") or ""),
        aliases=tuple(a.get("name") for a in data.get("aliases") or () if a.get("name")),
        description=str(props.get("description") or ""),
        size=size if isinstance(size, int) and size >= 0 else None,
        public=bool(data.get("public")),
        type=str(data.get("type") or "container"),
        architecture=str(data.get("architecture") or ""),
        created_at=parse_time(data.get("created_at")),
        uploaded_at=parse_time(data.get("uploaded_at")),
        cached=bool(data.get("cached")),
        last_used_at=parse_time(data.get("last_used_at")),
    )


def url_name(url: str) -> str:
    """The last part of a resource URL: ``/1.0/instances/c1?project=p`` -> ``c1``."""
    return url.rstrip("/").split("/")[-1].split("?")[0]


def operation_id(body: Mapping[str, Any]) -> str:
    """The operation a response to an asynchronous request started."""
    meta = body.get("metadata") or {}
    return str(meta.get("id") or url_name(str(body.get("operation", ""))))


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
            known = _STAGES.get(stage)
            m = re.search(r"(\d+)%", value)
            if known and m:
                return f"{known} {m.group(1)}%"
            return value
    return ""


def copied_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """The instance fields a copy takes along (volatile keys stay behind, except the base
    image, which lets the target start from its own copy of that image)."""
    config = {k: v for k, v in (data.get("config") or {}).items()
              if not k.startswith("volatile.") or k == "volatile.base_image"}
    return {"type": data.get("type") or "container",
            "architecture": data.get("architecture"),
            "config": config,
            "devices": data.get("devices") or {},
            "profiles": list(data.get("profiles") or []),
            "ephemeral": bool(data.get("ephemeral")),
            "description": data.get("description") or ""}


# Names -------------------------------------------------------------------------------------


def name_problem(name: str) -> str | None:
    """LXD's instance name rules (``ValidName`` in LXD's source, ``shared/instance.go``, and
    the hostname rules), in words; None when the name is fine."""
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


def snapshot_name_problem(name: str) -> str | None:
    if not name or not name.strip():
        return "A snapshot name is needed."
    if "/" in name or name != name.strip() or " " in name:
        return f"Snapshot name '{name}': no slashes or spaces."
    if len(name) > 255:
        return "Snapshot name: at most 255 characters."
    return None


# Texts -------------------------------------------------------------------------------------

MiB = 1024 * 1024


def mib(n: int) -> str:
    """Transfer progress: ``12.5 MiB``."""
    return f"{n / MiB:.1f} MiB"




def rfc3339(when: datetime) -> str:
    """A time as LXD takes it (UTC, whole seconds); a naive datetime is local time."""
    if when.tzinfo is None:
        when = when.astimezone()  # naive: local time
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


_MEMBER_STATUS = {"online": MemberStatus.ONLINE, "offline": MemberStatus.OFFLINE,
                  "evacuated": MemberStatus.EVACUATED, "blocked": MemberStatus.BLOCKED}


def to_member(data: Mapping[str, Any], remote: str, instances: int = 0) -> ClusterMember:
    """One entry of ``GET /1.0/cluster/members?recursion=1``."""
    return ClusterMember(
        remote=remote,
        name=str(data.get("server_name") or ""),
        url=str(data.get("url") or ""),
        roles=tuple(str(r) for r in data.get("roles") or ()),
        architecture=str(data.get("architecture") or ""),
        failure_domain=str(data.get("failure_domain") or ""),
        status=_MEMBER_STATUS.get(str(data.get("status") or "").lower(),
                                  MemberStatus.UNKNOWN),
        message=str(data.get("message") or ""),
        description=str(data.get("description") or ""),
        groups=tuple(str(g) for g in data.get("groups") or ()),
        instances=instances,
    )


def on_offline_member(inst: Instance, offline: Mapping[str, str]) -> Instance:
    """``inst`` as unknown, with the reason, when it lives on a member of ``offline``
    (member name -> why)."""
    if inst.location in offline:
        reason = f"its member {inst.location} is offline: {offline[inst.location]}"
        return replace(inst, status=InstanceStatus.UNKNOWN,
                       extra={**inst.extra, "reason": reason})
    return inst
