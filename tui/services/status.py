"""What the remotes pane shows for one remote."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from backends.models import ConnectionState, Operation, Remote, ServerInfo


@dataclass
class RemoteStatus:
    """What the remotes pane shows for one remote."""

    remote: Remote
    state: ConnectionState = ConnectionState.CONNECTING
    message: str = ""
    server: ServerInfo | None = None
    listed: bool = False
    """The first listing arrived (until then, rows are the last run's: stale)."""
    cached_at: float | None = None
    """Unix time of the last run's listing shown until the first one of this run."""
    operations: dict[str, Operation] = field(default_factory=dict)
    results: deque[Operation] = field(default_factory=lambda: deque(maxlen=200))
    """What corral itself did here row by row (bulk actions), newest last, as finished
    operations: the operations view lists them beside the daemon's."""
