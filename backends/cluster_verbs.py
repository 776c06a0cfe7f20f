"""The optional verbs of cluster remotes (``Capability.CLUSTER``): members, placement at
launch, moves between members, evacuate/restore.

:class:`ClusterVerbs` is a base of :class:`~backends.base.Backend`; every verb raises
:class:`~backends.errors.Unsupported` unless a backend implements it (the models are in
:mod:`backends.members`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .errors import Unsupported
from .models import Instance, InstanceRef

if TYPE_CHECKING:
    from .members import ClusterMember, Placement


class ClusterVerbs:
    """The cluster part of the backend contract."""

    _unsupported: Callable[[str], Unsupported]
    """Provided by :class:`~backends.base.Backend`."""


    async def list_members(self) -> list["ClusterMember"]:
        """The cluster's members with roles, state (the daemon's, or ``offline`` as soon
        as corral saw one stop answering) and instance counts (as of the last listing).
        Changes arrive from ``watch`` as ``EventKind.CLUSTER`` events."""
        raise self._unsupported("show cluster members")

    async def placements(self) -> list["Placement"]:
        """Where a new instance may go: the cluster's choice first, then members and
        cluster groups. The wizard passes the chosen ``value`` as
        ``CreateRequest.options["target"]``."""
        raise self._unsupported("place instances on cluster members")

    async def move_to_member(self, ref: InstanceRef, member: str, *,
                             progress: Callable[[str], None] | None = None) -> Instance:
        """Move a stopped instance to another member (cancelling the coroutine cancels
        the migration where the daemon allows it).

        Raises:
            Conflict: it is running (``live_move_problem`` says whether a live move is
                possible; otherwise stop it first).
        """
        raise self._unsupported("move instances between members")

    def live_move_problem(self, instance: Instance) -> str | None:
        """Why a running ``instance`` cannot move between members while it runs (None:
        it can)."""
        return "this remote cannot move running instances"

    async def cluster_instances(self) -> list[Instance]:
        """Every instance of the cluster in every project, those of the remote's project
        first (evacuating or restoring a member stops or moves them all, not only those of
        the project shown)."""
        raise self._unsupported("list the instances of every project")

    async def evacuate_member(self, member: str, *,
                              progress: Callable[[str], None] | None = None) -> None:
        """Stop or migrate every instance of ``member`` and mark it evacuated."""
        raise self._unsupported("evacuate cluster members")

    async def restore_member(self, member: str, *,
                             progress: Callable[[str], None] | None = None) -> None:
        """Bring an evacuated member back, with its instances."""
        raise self._unsupported("restore cluster members")
