"""One event of a connected remote's stream applied to the inventory: an operation's
progress, a lifecycle change shown at once and confirmed by a read, a listing when
something was created or removed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from backends.models import BackendEvent, ConnectionState, EventKind, InstanceRef, InstanceStatus

from .fetching import Fetches
from .state import InventoryState

IMPLIED_STATUS = {
    "instance-started": InstanceStatus.RUNNING,
    "instance-restarted": InstanceStatus.RUNNING,
    "instance-resumed": InstanceStatus.RUNNING,
    "instance-stopped": InstanceStatus.STOPPED,
    "instance-shutdown": InstanceStatus.STOPPED,
    "instance-paused": InstanceStatus.FROZEN,
}
"""Lifecycle actions whose outcome is known: shown at once, then confirmed by a fetch."""


class Events:
    """Applies events to ``state``; what they do not carry is read again by ``fetches``."""

    def __init__(self, state: InventoryState, fetches: Fetches) -> None:
        self.state = state
        self.fetches = fetches
        self.on_resource: Callable[[str, BackendEvent], None] | None = None
        """Told of every lifecycle and operation event (the resource views follow them)."""

    def apply(self, name: str, event: BackendEvent) -> None:
        """Apply ``event`` of remote ``name``'s stream."""
        st = self.state
        if event.kind is EventKind.CONNECTION:
            st.statuses[name].operations.clear()
            st.set_connection(name, ConnectionState.NOT_RESPONDING if event.action ==
                              "not-responding" else ConnectionState.DISCONNECTED, event.message)
            return
        if self.on_resource is not None and event.kind in (EventKind.LIFECYCLE,
                                                           EventKind.OPERATION):
            self.on_resource(name, event)  # the views follow them (tui/views/pane.py)
        if event.kind is EventKind.OPERATION and event.operation is not None:
            ops = st.statuses[name].operations
            op = event.operation
            if op.done or op.id not in ops:
                for inst_name in op.instances:
                    op_ref = InstanceRef(name, inst_name, st.remotes[name].project)
                    what = op.description + (f": {op.status}" if op.done else "")
                    if op.error:
                        what += f" ({op.error})"
                    st.remember(op_ref, what, event.timestamp)
            if op.interactive:  # an open console/shell: not "busy"
                return
            if op.done:
                ops.pop(op.id, None)
            else:
                ops[op.id] = op
            st.rows_changed(name, set())
            return
        if event.action == "remote-changed":  # something was created/removed: list again
            self.fetches.refresh_soon(name)
            return
        ref = event.ref
        if ref is None:
            return
        if ref.project != st.remotes[name].project:
            return
        action = event.action
        if action.startswith("instance-"):
            st.remember(ref, action.removeprefix("instance-").replace("-", " "),
                        event.timestamp)
        if action == "instance-deleted":
            st.drop(ref)
            self.fetches.dropped(ref)  # the fetch in flight must not bring it back
            st.rows_changed(name, {ref})
        elif action == "instance-renamed":
            self.fetches.refresh_soon(name)
        elif action.startswith("instance-snapshot-"):
            self.fetches.count_snapshots_soon(ref)
        elif action.startswith("instance-"):
            implied = IMPLIED_STATUS.get(action)
            inst = st.instances.get(ref)
            if implied is not None and inst is not None and inst.status is not implied:
                st.instances[ref] = replace(inst, status=implied)
                if implied is not InstanceStatus.RUNNING:
                    st.states.pop(ref, None)
                st.rows_changed(name, {ref})
            self.fetches.fetch_soon(ref)
