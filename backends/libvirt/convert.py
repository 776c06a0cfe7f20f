"""libvirt's numbers as corral's models: domain states, lifecycle events, statistics (pure
functions over the values libvirt returns; tested without a daemon)."""

from __future__ import annotations

import time
from typing import Mapping

import libvirt

from ..models import Instance, InstanceRef, InstanceState, InstanceStatus, InstanceType

STATUS = {
    libvirt.VIR_DOMAIN_NOSTATE: InstanceStatus.UNKNOWN,
    libvirt.VIR_DOMAIN_RUNNING: InstanceStatus.RUNNING,
    libvirt.VIR_DOMAIN_BLOCKED: InstanceStatus.RUNNING,
    libvirt.VIR_DOMAIN_PAUSED: InstanceStatus.FROZEN,
    libvirt.VIR_DOMAIN_SHUTDOWN: InstanceStatus.STOPPING,
    libvirt.VIR_DOMAIN_SHUTOFF: InstanceStatus.STOPPED,
    libvirt.VIR_DOMAIN_CRASHED: InstanceStatus.ERROR,
    libvirt.VIR_DOMAIN_PMSUSPENDED: InstanceStatus.FROZEN,
}

E = libvirt
LIFECYCLE = {
    E.VIR_DOMAIN_EVENT_STARTED: "instance-started",
    E.VIR_DOMAIN_EVENT_SUSPENDED: "instance-paused",
    E.VIR_DOMAIN_EVENT_RESUMED: "instance-resumed",
    E.VIR_DOMAIN_EVENT_STOPPED: "instance-stopped",
    E.VIR_DOMAIN_EVENT_SHUTDOWN: "instance-shutting-down",
    E.VIR_DOMAIN_EVENT_PMSUSPENDED: "instance-paused",
    E.VIR_DOMAIN_EVENT_CRASHED: "instance-crashed",
    E.VIR_DOMAIN_EVENT_UNDEFINED: "instance-deleted",
}
"""Domain lifecycle events as the inventory's actions (its ``_IMPLIED_STATUS`` knows the
started/stopped/paused/resumed ones; the others make it read the domain again)."""


def lifecycle_action(event: int, detail: int) -> str:
    """The inventory's action for a lifecycle event. A rename is an undefine of the old
    name and a define of the new one: both are ``instance-renamed`` (the remote is listed
    again), not a deletion and a creation."""
    if (event, detail) in ((E.VIR_DOMAIN_EVENT_DEFINED, E.VIR_DOMAIN_EVENT_DEFINED_RENAMED),
                           (E.VIR_DOMAIN_EVENT_UNDEFINED, E.VIR_DOMAIN_EVENT_UNDEFINED_RENAMED)):
        return "instance-renamed"
    if event == E.VIR_DOMAIN_EVENT_DEFINED:
        return ("instance-created" if detail == E.VIR_DOMAIN_EVENT_DEFINED_ADDED
                else "instance-updated")
    if event == E.VIR_DOMAIN_EVENT_SHUTDOWN and detail == E.VIR_DOMAIN_EVENT_SHUTDOWN_FINISHED:
        return "instance-shutting-down"
    return LIFECYCLE.get(event, "instance-updated")


Stats = Mapping[str, int | float | str]
"""One domain's record of ``getAllDomainStats``: its typed parameters by name (a bool is an
int; no value here is None)."""


def status_of(state: int) -> InstanceStatus:
    return STATUS.get(state, InstanceStatus.UNKNOWN)


def instance(remote: str, name: str, uuid: str, stats: Stats,
             description: str = "", vnc: bool = False, *, persistent: bool = True,
             snapshot_count: int | None = None) -> Instance:
    """A domain as an Instance, from its ``getAllDomainStats`` record (state, balloon, vcpu);
    ``vnc``: it has a VNC screen (``extra["vnc"]``)."""
    status = status_of(int(stats.get("state.state", 0)))
    maximum = stats.get("balloon.maximum")
    vcpus = stats.get("vcpu.current") or stats.get("vcpu.maximum")  # what it has now
    return Instance(
        ref=InstanceRef(remote, name), type=InstanceType.VM, status=status,
        description=description, snapshot_count=snapshot_count,
        cpu_limit=str(vcpus) if vcpus else "",
        memory_limit=int(maximum) * 1024 if maximum else None,
        extra={"uuid": uuid, "persistent": persistent, "vnc": vnc,
               "state_reason": int(stats.get("state.reason", 0))})


def _summed(stats: Stats, group: str, key: str) -> int | None:
    """The sum of ``<group>.<n>.<key>`` over the domain's disks or NICs (None: none)."""
    values = [int(v) for k, v in stats.items()
              if k.startswith(f"{group}.") and k.endswith(f".{key}")
              and k.split(".")[1].isdigit()]
    return sum(values) if values else None


def usage(stats: Stats, previous: tuple[int, float] | None) -> InstanceState:
    """Usage of a running domain from its ``domainListGetStats`` record (cpu-total,
    balloon, block, interface); ``previous`` is the last ``(cpu ns, monotonic time)`` for
    the percentage. The disk usage is the size of the disks' files on the host (each
    one's ``physical``: a qcow2 grows as its guest writes; the ``allocation`` where there
    is none), their ``capacity`` the limit, the network the bytes its NICs received and
    sent."""
    now = time.monotonic()
    cpu = int(stats.get("cpu.time", 0))
    percent = None
    if previous is not None and now > previous[1] and cpu >= previous[0]:
        percent = (cpu - previous[0]) / 1e9 / (now - previous[1]) * 100
    kib = {k.removeprefix("balloon."): int(v) for k, v in stats.items()
           if k.startswith("balloon.")}
    limit = kib.get("maximum")
    if "available" in kib and "unused" in kib:  # the guest's own figures (balloon driver)
        memory, given = (kib["available"] - kib["unused"]) * 1024, False
    else:
        memory, given = (kib.get("current") or kib.get("rss") or 0) * 1024, True
    return InstanceState(cpu_usage_ns=cpu, cpu_percent=percent, memory_usage=memory,
                         memory_limit=limit * 1024 if limit else None,
                         memory_is_allocation=given,
                         disk_usage=_summed(stats, "block", "physical")
                         or _summed(stats, "block", "allocation"),
                         disk_limit=_summed(stats, "block", "capacity") or None,
                         rx_bytes=_summed(stats, "net", "rx.bytes") or 0,
                         tx_bytes=_summed(stats, "net", "tx.bytes") or 0, sampled_at=now)
