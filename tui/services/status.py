"""What the remotes pane shows for one remote, and the words it (and ``:remotes``) says a
connection's state in."""

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


STATE_WORDS = {
    ConnectionState.CONNECTED: "connected",
    ConnectionState.CONNECTING: "connecting",
    ConnectionState.DISCONNECTED: "offline",
    ConnectionState.NOT_RESPONDING: "no answer",
    ConnectionState.UNTRUSTED: "untrusted",
    ConnectionState.ERROR: "error",
}
"""One word per state, short enough for the narrow pane; the remotes pane and the
``:remotes`` view both say these (the full reason is shown beside them)."""


def state_word(status: RemoteStatus) -> str:
    """The state of ``status`` in :data:`STATE_WORDS`; a read-only remote's connection says
    ``read-only`` (it only watches)."""
    if status.state is ConnectionState.CONNECTED and status.remote.read_only:
        return "read-only"
    return STATE_WORDS[status.state]


class RetryReports:
    """The remotes the user asked to reconnect (``R``): each one's attempt is reported once
    it ends (connected, or the state it is left in and why)."""

    def __init__(self) -> None:
        self._connecting: dict[str, bool] = {}

    def asked(self, name: str) -> None:
        self._connecting[name] = False

    def changed(self, status: RemoteStatus) -> tuple[str, str] | None:
        """(message, severity) once the attempt asked for ``status``'s remote has ended."""
        name = status.remote.name
        if name not in self._connecting:
            return None
        if status.state is ConnectionState.CONNECTING:
            self._connecting[name] = True
            return None
        if not self._connecting[name]:
            return None  # a change from before the attempt started
        del self._connecting[name]
        if status.state is ConnectionState.CONNECTED:
            return f"{name}: {state_word(status)}.", "information"
        why = f": {status.message}" if status.message else ""
        return f"{name}: still {state_word(status)}{why}", "warning"
