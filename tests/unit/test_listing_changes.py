"""A remote's listing says which rows changed: all of them the first time, then only the
rows that changed (the listing after each reconnect is hundreds of rows, mostly the same,
and the table, the details and the remotes pane each looked at every one of them)."""

from __future__ import annotations

from dataclasses import replace

from backends.models import Instance, InstanceRef, InstanceStatus, InstanceType, Remote
from tui.services.state import InventoryState


def inst(name, status=InstanceStatus.STOPPED, **kw):
    return Instance(ref=InstanceRef("r", name), type=InstanceType.CONTAINER, status=status,
                    image="busybox", config={"limits.cpu": "1"}, **kw)


def test_a_listing_says_which_rows_changed():
    said: list[set | None] = []
    state = InventoryState([Remote(name="r", kind="lxd", address="/x.sock")],
                           lambda remote, refs: said.append(refs))
    rows = [inst(f"c{i}") for i in range(5)]
    state.apply_listing("r", rows)
    assert said == [None]  # the first listing: every row
    state.instances[rows[0].ref] = replace(rows[0], snapshot_count=2)  # counted since
    said.clear()
    state.apply_listing("r", [replace(r) for r in rows])  # the same, read again
    assert said == [set()]
    assert state.instances[rows[0].ref].snapshot_count == 2  # kept
    said.clear()
    state.apply_listing("r", [inst("c0"), inst("c1", InstanceStatus.RUNNING), inst("c2"),
                              inst("c3"), inst("new")])
    assert said == [{rows[1].ref, rows[4].ref, InstanceRef("r", "new")}]
    assert InstanceRef("r", "c4") not in state.instances
    assert state.instances[rows[1].ref].status is InstanceStatus.RUNNING
