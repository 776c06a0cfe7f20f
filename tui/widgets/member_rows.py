"""The rows of a cluster remote's members in the remotes pane, and what is shown under the
pane when one is selected. Row keys are ``remote`` + :data:`SEP` + ``member``."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from backends.members import ClusterMember, MemberStatus

from ..format import external, external_text

SEP = "\x1f"

STATE_VAR = {
    MemberStatus.ONLINE: "status-running",
    MemberStatus.OFFLINE: "status-error",
    MemberStatus.EVACUATED: "status-stopped",
    MemberStatus.BLOCKED: "status-error",
    MemberStatus.UNKNOWN: "status-stopped",
}

ROLE_SHORT = {"leader": "lead", "voter": "vote", "standby": "stby", "spare": "spare"}


def member_key(remote: str, member: str) -> str:
    return f"{remote}{SEP}{member}"


def split_key(key: str) -> tuple[str, str | None]:
    """(remote, member or None) of a row key of the remotes pane."""
    remote, _, member = key.partition(SEP)
    return remote, member or None


def member_cells(m: ClusterMember, colors: dict[str, str]) -> tuple[Text, ...]:
    color = colors.get(STATE_VAR[m.status]) or None
    role = ROLE_SHORT.get(m.role_text.split(",")[0], m.role_text[:5])
    return (
        external(f"  └ {m.name[:9]}" + ("…" if len(m.name) > 9 else ""), no_wrap=True),
        external(role, "dim"),
        external(m.status.value, Style(color=color), no_wrap=True, overflow="ellipsis"),
        external(f"{m.instances} ", justify="right"),
    )


def describe_member(m: ClusterMember, error_style: str) -> Text:
    """The lines under the pane for one member: URL, roles, architecture, failure domain,
    state with the daemon's words, groups."""
    text = Text()
    text.append(f"{m.remote} member {m.name}", style="bold")
    text.append(f"  {m.url}\n")
    text.append(f"{m.role_text} · {m.architecture or '?'} · failure domain "
                f"{m.failure_domain or '—'}\n")
    text.append(f"{m.instances} instances")
    if m.groups:
        text.append(f" · groups {', '.join(m.groups)}")
    text.append("\n")
    style = "" if m.status is MemberStatus.ONLINE else error_style
    text.append(f"{m.status.value}: {m.message or '—'}", style=style)
    if m.description:
        text.append(f"\n{m.description}")
    return external_text(text)
