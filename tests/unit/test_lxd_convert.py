"""The pure LXD/Incus converters (``backends.lxd.convert``) on real answers of LXD 5.0 and
Incus 6.0, captured from the lab by ``tests/unit/data/capture_lxd.py``: two busybox
containers, ``c1`` running with ``limits.memory=512MiB``, ``limits.cpu=1``, a description
and snapshots ``snap0`` and ``snap1`` (expiring 2099-01-01), ``c2`` stopped."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from backends.lxd import convert
from backends.models import (
    EventKind,
    InstanceRef,
    InstanceState,
    InstanceStatus,
    InstanceType,
)

DATA = Path(__file__).parent / "data"
KINDS = ["lxd", "incus"]
REMOTE = "r1"
MiB = 1024**2


def envelope(kind: str, what: str):
    return json.loads((DATA / f"{kind}-{what}.json").read_text())


def metadata(kind: str, what: str):
    body = envelope(kind, what)
    assert body["type"] == "sync" and body["status_code"] == 200, body
    return body["metadata"]


def by_name(items):
    return {i.name: i for i in items}


@pytest.fixture(params=KINDS)
def kind(request):
    return request.param


# Instances ---------------------------------------------------------------------------------


def test_instances_of_a_listing(kind):
    listed = by_name(convert.to_instance(d, REMOTE) for d in metadata(kind, "instances-recursion1"))
    assert set(listed) == {"c1", "c2"}
    c1, c2 = listed["c1"], listed["c2"]
    assert c1.ref == InstanceRef(REMOTE, "c1", "default")
    assert (c1.status, c2.status) == (InstanceStatus.RUNNING, InstanceStatus.STOPPED)
    assert c1.type is c2.type is InstanceType.CONTAINER
    assert c1.image == c2.image == "busybox (corral test image)"
    assert (c1.description, c2.description) == ("captured by corral", "")
    assert c1.architecture == "x86_64"
    assert c1.profiles == ("default",)
    assert (c1.memory_limit, c1.cpu_limit) == (512 * MiB, "1")
    assert (c2.memory_limit, c2.cpu_limit) == (None, "")
    assert c1.snapshot_count is None  # recursion=1 does not list snapshots: counted later
    assert c1.config["limits.memory"] == "512MiB"
    assert c1.devices["root"] == {"path": "/", "pool": "default", "type": "disk"}
    # created_at: the daemon's nanoseconds cut to microseconds, in UTC
    raw = next(d for d in metadata(kind, "instances-recursion1") if d["name"] == "c1")
    created = c1.created_at
    assert created is not None and created.utcoffset() == timedelta(0)
    assert created.isoformat().startswith(raw["created_at"][:26])
    assert created < c2.created_at


def test_recursion_2_counts_snapshots_and_is_otherwise_the_same(kind):
    one = by_name(convert.to_instance(d, REMOTE) for d in metadata(kind, "instances-recursion1"))
    two = by_name(convert.to_instance(d, REMOTE) for d in metadata(kind, "instances-recursion2"))
    assert two["c1"].snapshot_count == 2
    assert two["c2"].snapshot_count in (0, None)  # the daemon sends null for "none"
    for name in ("c1", "c2"):
        assert replace(two[name], snapshot_count=None) == one[name]


def test_instance_names_from_the_plain_listing(kind):
    urls = metadata(kind, "instances")
    assert sorted(convert.url_name(u) for u in urls) == ["c1", "c2"]
    assert sorted(convert.instance_name_from_source(u) for u in urls) == ["c1", "c2"]


def test_a_virtual_machine_and_odd_values(kind):
    data = dict(next(d for d in metadata(kind, "instances-recursion1") if d["name"] == "c2"))
    data.update(type="virtual-machine", status="Frozen", project="web",
                created_at="0001-01-01T00:00:00Z",
                expanded_config={**data["expanded_config"], "limits.memory": "50%"})
    inst = convert.to_instance(data, REMOTE)
    assert inst.type is InstanceType.VM and inst.status is InstanceStatus.FROZEN
    assert inst.ref == InstanceRef(REMOTE, "c2", "web")
    assert inst.created_at is None  # the zero time means never
    assert inst.memory_limit is None  # a percentage is no size
    data["status"] = "Something new"
    assert convert.to_instance(data, REMOTE).status is InstanceStatus.UNKNOWN


# State -------------------------------------------------------------------------------------


def test_state_of_a_running_container(kind):
    data = metadata(kind, "state-running")
    state = convert.to_state(data, sampled_at=100.0)
    assert state.memory_usage == data["memory"]["usage"] > 0
    assert state.cpu_usage_ns == data["cpu"]["usage"] > 0
    assert state.cpu_percent is None  # one sample gives no percentage
    assert state.processes == data["processes"] >= 1
    assert state.pid == data["pid"] > 0
    assert (state.ipv4, state.ipv6) == ((), ())  # only lo, no NIC in the lab
    assert (state.rx_bytes, state.tx_bytes) == (0, 0)  # lo is not counted
    assert state.sampled_at == 100.0
    if "total" in data["memory"]:  # Incus reports the limit it enforces
        assert state.memory_limit == data["memory"]["total"] == 512 * MiB
    else:
        assert state.memory_limit is None
    assert convert.to_state(data, sampled_at=1.0, memory_limit=256 * MiB).memory_limit \
        == 256 * MiB


def test_cpu_percent_from_two_samples(kind):
    data = metadata(kind, "state-running")
    used = data["cpu"]["usage"]
    previous = InstanceState(cpu_usage_ns=used - 250_000_000, sampled_at=10.0)
    state = convert.to_state(data, sampled_at=11.0, previous=previous)
    assert state.cpu_percent == pytest.approx(25.0)
    # a restarted instance (the counter went back) or the same moment: no percentage
    later = InstanceState(cpu_usage_ns=used + 1, sampled_at=10.0)
    assert convert.to_state(data, sampled_at=11.0, previous=later).cpu_percent is None
    assert convert.to_state(data, sampled_at=10.0, previous=previous).cpu_percent is None


def test_state_of_a_stopped_container(kind):
    state = convert.to_state(metadata(kind, "state-stopped"), sampled_at=1.0)
    assert (state.memory_usage, state.cpu_usage_ns, state.processes) == (0, 0, 0)
    assert state.pid is None
    assert (state.ipv4, state.ipv6, state.rx_bytes) == ((), (), 0)


def test_state_with_addresses_and_counters(kind):
    data = json.loads(json.dumps(metadata(kind, "state-running")))
    data["network"]["eth0"] = {
        "addresses": [
            {"family": "inet", "address": "10.1.2.3", "netmask": "24", "scope": "global"},
            {"family": "inet6", "address": "fd42::3", "netmask": "64", "scope": "global"},
            {"family": "inet6", "address": "fe80::1", "netmask": "64", "scope": "link"},
        ],
        "counters": {"bytes_received": 1000, "bytes_sent": 2000},
    }
    data["disk"] = {"root": {"usage": 4096, "total": 10 * 1024**3}}
    state = convert.to_state(data, sampled_at=1.0)
    assert (state.ipv4, state.ipv6) == (("10.1.2.3",), ("fd42::3",))
    assert (state.rx_bytes, state.tx_bytes) == (1000, 2000)
    assert (state.disk_usage, state.disk_limit) == (4096, 10 * 1024**3)


# Snapshots ---------------------------------------------------------------------------------


def test_snapshots(kind):
    ref = InstanceRef(REMOTE, "c1")
    snaps = by_name(convert.to_snapshot(d, ref) for d in metadata(kind, "snapshots-recursion1"))
    assert set(snaps) == {"snap0", "snap1"}
    s0, s1 = snaps["snap0"], snaps["snap1"]
    assert s0.ref == s1.ref == ref
    assert not s0.stateful and not s1.stateful
    assert s0.expires_at is None  # the zero time: never
    assert s1.expires_at == datetime(2099, 1, 1, tzinfo=timezone.utc)
    assert s0.created_at is not None and s0.created_at <= s1.created_at
    assert s0.size is None  # the daemon says -1: unknown


def test_snapshot_names_from_the_recursion_2_listing(kind):
    c1 = next(d for d in metadata(kind, "instances-recursion2") if d["name"] == "c1")
    ref = InstanceRef(REMOTE, "c1")
    assert sorted(convert.to_snapshot(d, ref).name for d in c1["snapshots"]) \
        == ["snap0", "snap1"]


# Operations --------------------------------------------------------------------------------


def test_an_operation_as_started_and_as_finished(kind):
    body = envelope(kind, "operation-running")
    assert body["type"] == "async"
    started = convert.to_operation(body["metadata"], REMOTE)
    assert convert.operation_id(body) == started.id == body["metadata"]["id"]
    assert started.status == "Running" and not started.done
    assert started.description == "Snapshotting instance"
    assert started.instances == ("c1",)
    assert started.remote == REMOTE
    assert not started.may_cancel and not started.interactive
    assert started.error == "" and started.progress == ""
    assert started.created_at is not None
    done = convert.to_operation(metadata(kind, "operation-done"), REMOTE)
    assert done.id == started.id and done.status == "Success" and done.done
    assert done.instances == ("c1",)


def test_a_failed_operation_carries_the_daemons_words(kind):
    failed = convert.to_operation(metadata(kind, "operation-failed"), REMOTE)
    assert failed.status == "Failure" and failed.done
    assert "stateful" in failed.error.lower()
    assert failed.instances == ("c1",)


def test_the_operations_list(kind):
    groups = metadata(kind, "operations-recursion1")
    assert {"success", "failure"} <= set(groups)
    for status, items in groups.items():
        for data in items:
            op = convert.to_operation(data, REMOTE)
            assert op.status == status.capitalize() and op.done
            assert op.id == data["id"] and op.description == data["description"]
            assert not op.interactive
    snapshotting = [convert.to_operation(d, REMOTE) for d in groups["success"]
                    if d["description"] == "Snapshotting instance"]
    assert snapshotting and all(op.instances == ("c1",) for op in snapshotting)


def test_a_websocket_operation_is_interactive(kind):
    data = dict(metadata(kind, "operation-done"), **{"class": "websocket"})
    assert convert.to_operation(data, REMOTE).interactive


def test_progress_texts(kind):
    assert convert.progress_text(metadata(kind, "operation-done")["metadata"]) == ""
    assert convert.progress_text(
        {"create_instance_from_image_unpack_progress": "Unpack: 45% (3.20MB/s)"}) \
        == "unpacking image 45%"
    assert convert.progress_text(
        {"progress": {"stage": "create_instance_from_image_unpack", "percent": "45"}}) \
        == "unpacking image 45%"


# Events ------------------------------------------------------------------------------------


def test_events_of_a_stop_and_a_start(kind):
    frames = envelope(kind, "events")
    events = [convert.to_event(f, REMOTE) for f in frames]
    assert None not in events
    ref = InstanceRef(REMOTE, "c1", "default")
    lifecycle = [e for e in events if e.kind is EventKind.LIFECYCLE]
    assert [(e.action, e.ref) for e in lifecycle] == [
        ("instance-stopped", ref), ("instance-started", ref)]
    assert all(e.remote == REMOTE and e.timestamp is not None for e in events)
    ops = [e for e in events if e.kind is EventKind.OPERATION]
    assert ops and all(e.operation.instances == ("c1",) for e in ops)
    assert all(e.action == e.operation.status for e in ops)
    assert {e.operation.description for e in ops} == {"Stopping instance", "Starting instance"}
    assert [e.action for e in ops][-1] == "Success"
    stop = [e.action for e in ops if e.operation.description == "Stopping instance"]
    assert stop[-1] == "Success" and "Running" in stop


def test_events_corral_ignores_and_other_projects(kind):
    frame = next(f for f in envelope(kind, "events") if f["type"] == "lifecycle")
    assert convert.to_event(dict(frame, type="logging"), REMOTE) is None
    moved = json.loads(json.dumps(frame))
    moved["metadata"]["source"] = "/1.0/instances/web1?project=shop"
    moved["metadata"].pop("project", None)
    moved["project"] = ""
    assert convert.to_event(moved, REMOTE).ref == InstanceRef(REMOTE, "web1", "shop")
    other = json.loads(json.dumps(frame))
    other["metadata"].update(action="network-updated", source="/1.0/networks/br0")
    event = convert.to_event(other, REMOTE)
    assert event.kind is EventKind.LIFECYCLE and event.ref is None


# Images ------------------------------------------------------------------------------------


def test_images(kind):
    images = [convert.to_image(d) for d in metadata(kind, "images-recursion1")]
    assert len(images) == 1
    image = images[0]
    raw = metadata(kind, "images-recursion1")[0]
    assert image.fingerprint == raw["fingerprint"] and len(image.fingerprint) == 64
    assert image.aliases == ("busybox",)
    assert image.description == "busybox (corral test image)"
    assert image.size == raw["size"] > 0
    assert image.type == "container" and image.architecture == "x86_64"
    assert not image.public
    # the lab builds the image with a fixed creation date: 1700000000
    assert image.created_at == datetime.fromtimestamp(1700000000, timezone.utc)
    assert image.uploaded_at is not None and image.uploaded_at > image.created_at


# Times -------------------------------------------------------------------------------------


def test_times():
    assert convert.parse_time("2026-12-01T11:51:34.311932371Z") == datetime(
        2026, 12, 1, 11, 51, 34, 311932, tzinfo=timezone.utc)
    assert convert.parse_time("2026-12-01T11:51:34Z") == datetime(
        2026, 12, 1, 11, 51, 34, tzinfo=timezone.utc)
    assert convert.parse_time("2026-12-01T12:51:34.5+01:00") == datetime(
        2026, 12, 1, 11, 51, 34, 500000, tzinfo=timezone.utc)
    for never in ("0001-01-01T00:00:00Z", "", None, "yesterday"):
        assert convert.parse_time(never) is None
