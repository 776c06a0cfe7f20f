"""Snapshots of libvirt domains: libvirt's internal snapshots, kept inside the domain's
qcow2 disks (``virDomainSnapshotCreateXML``, ``listAllSnapshots``, ``revertToSnapshot``,
``virDomainSnapshotDelete``).

- Every writable disk of the domain must be qcow2: a domain with another (a raw disk, a
  block device without qcow2) is refused in words before libvirt is asked, so nothing is
  half made; the snapshot is taken with ``ATOMIC`` besides.
- A shut-off domain's snapshot holds its disks; a running (or paused) domain's holds its
  memory too, whatever ``stateful`` says: libvirt's internal snapshots of a running domain
  always do (as QEMU's own, see ``backends/qemu/snapshots.py``). ``stateful`` is refused
  for a shut-off domain (there is no memory to keep).
- Restoring a snapshot with memory brings the domain back running as it was then (also
  from shut off: libvirt's revert); one without memory is restored on a shut-off domain
  only (libvirt would force a running one off: corral says so instead). A restore also
  brings back the domain's definition as it was then (memory, vCPUs, description).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import datetime, timezone

import libvirt

from ..base import Backend
from ..errors import Conflict, InvalidInput, NotFound, Unsupported
from ..models import InstanceRef, InstanceStatus, Snapshot
from .connection import Connection
from .convert import status_of

SLOW = 600
"""Seconds a snapshot call may take (a running domain's memory is written or read)."""
WRITABLE = ("disk", "lun")


def snapshot_of(ref: InstanceRef, xml: str) -> Snapshot:
    """A ``<domainsnapshot>`` as a Snapshot."""
    root = ET.fromstring(xml)
    created = root.findtext("creationTime")
    memory = root.find("memory")
    stateful = (memory is not None and memory.get("snapshot") in ("internal", "external")) \
        or root.findtext("state") in ("running", "paused", "blocked", "pmsuspended")
    return Snapshot(ref=ref, name=root.findtext("name") or "",
                    created_at=(datetime.fromtimestamp(int(created), timezone.utc)
                                if created and created.isdigit() else None),
                    stateful=stateful, comment=(root.findtext("description") or "").strip())


def not_qcow2(ref: InstanceRef, xml: str) -> str | None:
    """Why the domain (its XML) cannot have internal snapshots, or None."""
    writable = []
    for disk in ET.fromstring(xml).iterfind("devices/disk"):
        if disk.get("device", "disk") not in WRITABLE or disk.find("readonly") is not None:
            continue
        target = disk.find("target")
        dev = target.get("dev", "?") if target is not None else "?"
        driver = disk.find("driver")
        fmt = driver.get("type", "") if driver is not None else ""
        writable.append((dev, fmt))
    if not writable:
        return f"{ref} has no disk: there is nothing to snapshot."
    other = [f"{dev} ({fmt or 'format not stated'})" for dev, fmt in writable if fmt != "qcow2"]
    if other:
        return (f"{ref} has a disk that is not qcow2: {', '.join(other)}. libvirt keeps "
                f"internal snapshots inside qcow2 disks only; convert it to qcow2 first.")
    return None


def check_name(name: str) -> None:
    if not name or any(c.isspace() or c == "/" or ord(c) < 32 for c in name):
        raise InvalidInput("A snapshot name is needed, without spaces or slashes.")
    if len(name) > 200:
        raise InvalidInput("A snapshot name has at most 200 characters.")


class Snapshots(Backend):
    """``list_snapshots``, ``snapshot_counts``, ``create/restore/delete_snapshot``."""

    lv: Connection

    async def list_snapshots(self, ref: InstanceRef) -> list[Snapshot]:
        dom = await self.lv.domain(ref)

        def read() -> list[str]:
            return [s.getXMLDesc(0) for s in dom.listAllSnapshots(0)]

        xmls = await self.lv.call(read, what=f"listing the snapshots of {ref.name}")
        found = [snapshot_of(ref, x) for x in xmls]
        oldest = datetime.min.replace(tzinfo=timezone.utc)
        return sorted(found, key=lambda s: (s.created_at or oldest, s.name))

    async def snapshot_counts(self, refs: list[InstanceRef]) -> dict[InstanceRef, int]:
        if not refs:
            return {}
        conn = await self.lv.live()

        def count() -> dict[InstanceRef, int]:
            out = {}
            for ref in refs:
                try:
                    out[ref] = conn.lookupByName(ref.name).snapshotNum(0)
                except libvirt.libvirtError:  # gone meanwhile: left out
                    continue
            return out

        return await self.lv.call(count, what="counting snapshots")

    async def create_snapshot(self, ref: InstanceRef, name: str, *, stateful: bool = False,
                              expires_at: datetime | None = None) -> Snapshot:
        """A shut-off domain: its disks; running or paused: its disks and memory.

        Raises:
            Unsupported: a disk is not qcow2 (or ``expires_at``: snapshots here do not
                expire).
            Conflict: the name is taken, or ``stateful`` for a shut-off domain.
            InvalidInput: a bad name, or no disk.
        """
        if expires_at is not None:
            raise self._unsupported("give snapshots an expiry date")
        check_name(name)
        dom = await self.lv.domain(ref)

        def look() -> tuple[int, str, bool]:
            try:
                dom.snapshotLookupByName(name, 0)
                taken = True
            except libvirt.libvirtError as e:
                if e.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN_SNAPSHOT:
                    raise
                taken = False
            return dom.state()[0], dom.XMLDesc(0), taken

        state, xml, taken = await self.lv.call(look, what=f"reading {ref.name}")
        problem = not_qcow2(ref, xml)
        if problem:
            if "no disk" in problem:
                raise InvalidInput(problem)
            raise Unsupported(problem)
        if taken:
            raise Conflict(f"{ref} already has a snapshot named '{name}'.")
        running = status_of(state) is not InstanceStatus.STOPPED  # paused too: it has memory
        if stateful and not running:
            raise Conflict(f"{ref} is not running: a snapshot of it has no memory to keep.")
        root = ET.Element("domainsnapshot")
        ET.SubElement(root, "name").text = name
        ET.SubElement(root, "memory", snapshot="internal" if running else "no")
        text = ET.tostring(root, encoding="unicode")

        def take() -> str:
            snap = dom.snapshotCreateXML(text, libvirt.VIR_DOMAIN_SNAPSHOT_CREATE_ATOMIC)
            return snap.getXMLDesc(0)

        made = await self.lv.call(take, what=f"taking a snapshot of {ref.name}", within=SLOW)
        return snapshot_of(ref, made)

    async def _snapshot(self, snapshot: Snapshot) -> tuple[libvirt.virDomain,
                                                           libvirt.virDomainSnapshot]:
        dom = await self.lv.domain(snapshot.ref)
        try:
            snap = await self.lv.call(dom.snapshotLookupByName, snapshot.name, 0,
                                      what=f"finding snapshot {snapshot.name}")
        except NotFound:
            raise NotFound(f"{snapshot.ref} has no snapshot named '{snapshot.name}' "
                           f"(any more).") from None
        return dom, snap

    async def restore_snapshot(self, snapshot: Snapshot) -> None:
        """Revert the domain to the snapshot (see the module docstring).

        Raises:
            Conflict: the snapshot has no memory and the domain runs.
        """
        ref = snapshot.ref
        dom, snap = await self._snapshot(snapshot)

        def look() -> tuple[int, str]:
            return dom.state()[0], snap.getXMLDesc(0)

        state, xml = await self.lv.call(look, what=f"reading {ref.name}")
        if status_of(state) is not InstanceStatus.STOPPED and not snapshot_of(ref, xml).stateful:
            raise Conflict(f"'{snapshot.name}' was taken while {ref} was shut off (it has no "
                           f"memory): shut {ref} down to restore it.")
        await self.lv.call(dom.revertToSnapshot, snap, 0,
                           what=f"restoring {ref.name} to {snapshot.name}", within=SLOW)

    async def delete_snapshot(self, snapshot: Snapshot) -> None:
        _dom, snap = await self._snapshot(snapshot)
        await self.lv.call(snap.delete, 0, what=f"deleting snapshot {snapshot.name}",
                           within=SLOW)
