"""The launch wizard's placement choice on a cluster remote: let the cluster place the new
instance (the default), or a chosen member, or a cluster group."""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Select

from backends.base import Backend
from backends.errors import BackendError
from backends.members import AUTO_PLACEMENT
from backends.models import Capability

from ..format import external

AUTO = "\x00cluster"
"""The Select value of "let the cluster place it" (Select needs a non-empty value)."""
AUTO_LABEL = AUTO_PLACEMENT.label


async def load_placements(screen: Screen, backend: Backend,
                          caps: frozenset[Capability]) -> None:
    """Fill ``#wizard-target`` with the remote's placements; hidden when it is no cluster
    (or its members cannot be read now: the cluster then places the instance)."""
    places = []
    if Capability.CLUSTER in caps:
        try:
            places = await backend.placements()
        except BackendError:
            places = []
    target = screen.query_one("#wizard-target", Select)
    target.set_options([(external(f"{p.label} ({p.detail})" if p.detail and p.value
                                  else p.label), p.value or AUTO) for p in places]
                       or [(AUTO_LABEL, AUTO)])
    target.value = AUTO
    target.display = bool(places)
    screen.query_one("#wizard-target-label").display = bool(places)


def chosen_target(screen: Screen) -> str | None:
    """The member or group the user chose (None: the cluster places it, or no cluster)."""
    target = screen.query_one("#wizard-target", Select)
    if target.display and isinstance(target.value, str) and target.value != AUTO:
        return target.value
    return None
