"""What a cluster is made of, as the UI sees it: members, their state, and the places a new
instance may go. Frozen and hashable like everything in :mod:`backends.models`."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class MemberStatus(str, enum.Enum):
    """A member's state, as the daemon reports it (or as corral saw it first: a member
    that stopped answering is ``offline`` before the cluster's own heartbeat notices)."""

    ONLINE = "online"
    OFFLINE = "offline"
    EVACUATED = "evacuated"
    BLOCKED = "blocked"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class ClusterMember:
    """One member of a cluster remote (``GET /1.0/cluster/members?recursion=1``)."""

    remote: str
    name: str
    url: str = ""
    roles: tuple[str, ...] = ()
    """``database-leader``, ``database`` (a voter), ``database-standby``, … as the daemon
    names them."""
    architecture: str = ""
    failure_domain: str = ""
    status: MemberStatus = MemberStatus.UNKNOWN
    message: str = ""
    """The daemon's words about the state ("Fully operational"), or corral's when it saw
    the member stop answering first."""
    description: str = ""
    groups: tuple[str, ...] = ()
    instances: int = 0
    """How many instances (of the remote's project) live on it."""

    @property
    def role_text(self) -> str:
        """Roles in words: ``leader``, ``voter``, ``standby``, ``spare``."""
        words = []
        if "database-leader" in self.roles:
            words.append("leader")
        if "database" in self.roles:
            words.append("voter")
        if "database-standby" in self.roles:
            words.append("standby")
        if not words:
            words.append("spare")
        words += [r for r in self.roles
                  if r not in ("database-leader", "database", "database-standby")]
        return ", ".join(words)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where the launch wizard may put a new instance on a cluster remote."""

    value: str
    """``""`` (the cluster chooses), a member name, or ``@group``."""
    label: str
    detail: str = ""


AUTO_PLACEMENT = Placement("", "let the cluster place it", "the daemon picks the member")
