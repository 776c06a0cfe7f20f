"""Snapshots of QEMU VMs: internal qcow2 snapshots, taken offline with ``qemu-img
snapshot`` and live (with the VM state) with the snapshot-save/load/delete jobs (see
``docs/protocols.md``, section "QMP")."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timezone

from ..base import Backend
from ..errors import BackendError, Conflict, InvalidInput, OperationFailed
from ..models import InstanceRef, Snapshot
from .images import info, qemu_img
from .machines import Machines
from .monitor import Monitor


class Snapshots(Backend):
    """``list_snapshots``, ``snapshot_counts``, ``create/restore/delete_snapshot``."""

    vms: Machines
    monitor: Monitor

    def _disk_paths(self, ref: InstanceRef) -> list[str]:
        d = self.vms.definition(ref.name)
        if not d.disks:
            raise InvalidInput(f"{ref} has no disk: there is nothing to snapshot.")
        return [str(self.vms.dir(ref.name) / disk) for disk in d.disks]

    async def list_snapshots(self, ref: InstanceRef) -> list[Snapshot]:
        """The internal snapshots of the VM's first disk (every disk has the same)."""
        d = self.vms.definition(ref.name)
        if not d.disks:
            return []
        found = await info(self._disk_paths(ref)[0])
        out = []
        for snap in found.get("snapshots") or ():
            created = datetime.fromtimestamp(int(snap.get("date-sec", 0)), timezone.utc)
            out.append(Snapshot(ref=ref, name=snap["name"], created_at=created,
                                stateful=int(snap.get("vm-state-size") or 0) > 0,
                                size=int(snap.get("vm-state-size") or 0) or None))
        return out

    async def snapshot_counts(self, refs: list[InstanceRef]) -> dict[InstanceRef, int]:
        out = {}
        for ref in refs:
            try:
                out[ref] = len(await self.list_snapshots(ref))
            except BackendError:
                continue
        return out

    async def _job(self, ref: InstanceRef, command: str, tag: str, *, vmstate: bool) -> None:
        """Run a snapshot job (QEMU >= 6.0) and wait for it to conclude."""
        d = self.vms.definition(ref.name)
        nodes = [f"disk{i}" for i in range(len(d.disks))]
        job = f"corral-{command}-{int(time.time() * 1000)}"
        args: dict[str, object] = {"job-id": job, "tag": tag, "devices": nodes}
        if vmstate:
            args["vmstate"] = "disk0"
        await self.monitor.execute(ref, command, **args)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            running = await self.monitor.execute(ref, "query-jobs")
            jobs = {j["id"]: j for j in running}  # type: ignore
            state = jobs.get(job)
            if state is None or state["status"] == "concluded":
                break
            await asyncio.sleep(0.1)
        error = (state or {}).get("error")
        if state is not None:
            await self.monitor.execute(ref, "job-dismiss", id=job)
        if error:
            raise OperationFailed(f"{command} of {ref} failed: {error}")

    async def create_snapshot(self, ref: InstanceRef, name: str, *, stateful: bool = False,
                              expires_at: datetime | None = None) -> Snapshot:
        """Running VMs: a live snapshot with the VM state (snapshot-save job), whatever
        ``stateful`` says (QEMU saves the VM state with every live snapshot); stopped VMs:
        a disk snapshot with ``qemu-img snapshot``.

        Raises:
            Unsupported: ``expires_at`` (snapshots here do not expire).
        """
        if expires_at is not None:
            raise self._unsupported("give snapshots an expiry date")
        if not name or any(c.isspace() for c in name):
            raise InvalidInput("A snapshot name is needed, without spaces.")
        disks = self._disk_paths(ref)
        if name in {s.name for s in await self.list_snapshots(ref)}:
            raise InvalidInput(f"{ref} already has a snapshot named '{name}'.")
        if self.vms.pid(ref.name) is not None:
            await self._job(ref, "snapshot-save", name, vmstate=True)
        else:
            for disk in disks:
                await qemu_img("snapshot", "-c", name, disk)
        return next(s for s in await self.list_snapshots(ref) if s.name == name)

    async def restore_snapshot(self, snapshot: Snapshot) -> None:
        ref = snapshot.ref
        disks = self._disk_paths(ref)
        if self.vms.pid(ref.name) is not None:
            if not snapshot.stateful:
                raise Conflict(f"'{snapshot.name}' has no VM state: stop {ref} to restore it.")
            await self._job(ref, "snapshot-load", snapshot.name, vmstate=True)
        else:
            self.vms.refuse_if_busy(ref)
            self.vms.refuse_if_base(ref, "restored to a snapshot")
            for disk in disks:
                await qemu_img("snapshot", "-a", snapshot.name, disk)

    async def delete_snapshot(self, snapshot: Snapshot) -> None:
        ref = snapshot.ref
        disks = self._disk_paths(ref)
        if self.vms.pid(ref.name) is not None:
            await self._job(ref, "snapshot-delete", snapshot.name, vmstate=False)
        else:
            for disk in disks:
                await qemu_img("snapshot", "-d", snapshot.name, disk)
