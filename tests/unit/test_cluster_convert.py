"""Cluster pieces that need no daemon: member JSON (as LXD 5.0.2 answers it), role words,
which event frames are member hints, and ``location=`` in the filter."""

from __future__ import annotations

from backends.lxd import LXDBackend
from backends.lxd.cluster import host_port, to_member
from backends.members import ClusterMember, MemberStatus
from backends.models import (
    EventKind,
    Instance,
    InstanceRef,
    InstanceStatus,
    InstanceType,
    Remote,
)
from tui.filter import matches, parse

MEMBER = {
    "architecture": "x86_64", "config": {}, "database": True, "description": "",
    "failure_domain": "default", "groups": ["default"], "message": "Fully operational",
    "roles": ["database-leader", "database"], "server_name": "m1", "status": "Online",
    "url": "https://127.0.0.1:59311",
}


def test_member_from_the_daemons_json():
    m = to_member(MEMBER, "clu", instances=3)
    assert m == ClusterMember(
        remote="clu", name="m1", url="https://127.0.0.1:59311",
        roles=("database-leader", "database"), architecture="x86_64",
        failure_domain="default", status=MemberStatus.ONLINE, message="Fully operational",
        groups=("default",), instances=3)
    assert m.role_text == "leader, voter"
    evacuated = to_member({**MEMBER, "status": "Evacuated", "roles": [],
                           "message": "Unavailable due to maintenance"}, "clu")
    assert evacuated.status is MemberStatus.EVACUATED and evacuated.role_text == "spare"
    assert to_member({**MEMBER, "status": "Weird"}, "clu").status is MemberStatus.UNKNOWN
    assert to_member({**MEMBER, "roles": ["database-standby"]}, "clu").role_text == "standby"
    assert host_port("https://127.0.0.1:8443/") == "127.0.0.1:8443"


def _backend() -> LXDBackend:
    """A backend that never connects: only its event-frame judgement is used."""
    b = LXDBackend(Remote("clu", "lxd", "https://127.0.0.1:59311"))
    b.cluster.members = {"m2": to_member({**MEMBER, "server_name": "m2",
                                          "url": "https://127.0.0.1:57887"}, "clu")}
    return b


def _log(message: str, **context: str) -> dict:
    return {"type": "logging", "location": "m1",
            "metadata": {"level": "warning", "message": message, "context": context}}


def test_which_frames_say_a_member_came_or_went():
    b = _backend()
    hint = b._cluster_frame(_log("Failed heartbeat", remote="127.0.0.1:57887",
                                 err="connection refused"))
    assert hint.kind is EventKind.CLUSTER and hint.message == "m2"
    assert b._cluster_frame(_log("Failed heartbeat", remote="127.0.0.1:1")) is None
    assert b._cluster_frame(_log("Cluster member state has changed")).message == ""
    assert b._cluster_frame(_log("Event listener server handler stopped",
                                 remote="127.0.0.1:39240")).message == ""
    assert b._cluster_frame(_log("Matched trusted cert")) is None
    lifecycle = {"type": "lifecycle", "metadata": {
        "action": "cluster-member-updated", "source": "/1.0/cluster/members/m3"}}
    assert b._cluster_frame(lifecycle).message == "m3"
    started = {"type": "lifecycle", "metadata": {
        "action": "instance-started", "source": "/1.0/instances/c1"}}
    assert b._cluster_frame(started) is None


def test_location_in_the_filter():
    inst = Instance(InstanceRef("clu", "web1"), InstanceType.CONTAINER,
                    InstanceStatus.RUNNING, location="m2")
    assert matches(parse("location=m2"), inst, None)
    assert not matches(parse("location=m3"), inst, None)
    assert matches(parse("!location=m3 web"), inst, None)
    plain = Instance(InstanceRef("lab2", "web1"), InstanceType.CONTAINER,
                     InstanceStatus.RUNNING)
    assert not matches(parse("location=m2"), plain, None)


def test_an_instance_on_an_offline_member_reads_unknown_with_the_reason():
    """The first listing and the backend's listings mark them alike (one function)."""
    from backends.lxd.convert import on_offline_member

    inst = Instance(InstanceRef("clu", "c1"), InstanceType.CONTAINER, InstanceStatus.RUNNING,
                    location="m3")
    offline = {"m3": "No heartbeat for 30s"}
    marked = on_offline_member(inst, offline)
    assert marked.status is InstanceStatus.UNKNOWN
    assert marked.extra["reason"] == "its member m3 is offline: No heartbeat for 30s"
    assert on_offline_member(inst, {"m2": "gone"}) is inst
