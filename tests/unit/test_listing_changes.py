"""A remote's listing says which rows changed: all of them the first time, then only the
rows that changed (the listing after each reconnect is hundreds of rows, mostly the same,
and the table, the details and the remotes pane each looked at every one of them)."""

from __future__ import annotations

from dataclasses import replace

from backends.models import Instance, InstanceRef, InstanceStatus, InstanceType, Remote
from tui.services.state import InventoryState


def inst(name, status=InstanceStatus.STOPPED, **kw):
    kw.setdefault("config", {"limits.cpu": "1"})
    return Instance(ref=InstanceRef("r", name), type=InstanceType.CONTAINER, status=status,
                    image="busybox", **kw)


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
    state.apply_listing("r", [inst("c0"), inst("c1", description="web"), inst("c2"),
                              inst("c3"), inst("new")])
    assert said == [{rows[1].ref, rows[4].ref, InstanceRef("r", "new")}]
    assert InstanceRef("r", "c4") not in state.instances
    assert state.instances[rows[1].ref].description == "web"


def test_fields_left_out_of_equality_count_too_and_a_row_that_runs_now_is_sampled():
    said: list[set | None] = []
    state = InventoryState([Remote(name="r", kind="lxd", address="/x.sock")],
                           lambda remote, refs: said.append(refs))
    state.apply_listing("r", [inst("a"), inst("b", extra={"reason": "QEMU exited"})])
    said.clear()
    # a limit and a reason changed (config, extra: not part of Instance's ==)
    state.apply_listing("r", [inst("a", config={"limits.cpu": "2"}), inst("b")])
    assert said == [{InstanceRef("r", "a"), InstanceRef("r", "b")}]
    said.clear()
    state.apply_listing("r", [inst("a", config={"limits.cpu": "2"}),  # (same as before)
                              inst("b", InstanceStatus.RUNNING)])
    assert said == [None]  # every row: the screen samples usage after such a listing
