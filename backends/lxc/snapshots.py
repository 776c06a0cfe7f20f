"""Snapshots of LXC containers through ``lxc-snapshot`` (stopped, ``dir``-backed containers
only; LXC names snapshots itself: snap0, snap1, …)."""

from __future__ import annotations

import tempfile
from datetime import datetime

from ..base import Backend
from ..errors import Conflict, Unsupported
from ..models import InstanceRef, InstanceStatus, Snapshot
from . import parse
from .tools import LXCTools


class Snapshots(Backend):
    """The snapshot verbs of :class:`~backends.lxc.backend.LXCBackend`."""

    lxc: LXCTools

    async def list_snapshots(self, ref: InstanceRef) -> list[Snapshot]:
        self.lxc.require(ref)
        _, out, _ = await self.lxc.run("lxc-snapshot", "-n", ref.name, "-L", "-C", check=True)
        return [Snapshot(ref=ref, name=n, created_at=when, comment=comment)
                for n, when, comment in parse.snapshots(out)]

    async def _require_stopped_for_snapshot(self, ref: InstanceRef, what: str) -> None:
        current = await self.get_instance(ref)
        if current.status is not InstanceStatus.STOPPED:
            raise Conflict(f"LXC can only {what} a stopped container on a 'dir' backing store; "
                           f"{ref} is {current.status.value}. Stop it first.")

    async def create_snapshot(self, ref: InstanceRef, name: str, *, stateful: bool = False,
                              expires_at: datetime | None = None) -> Snapshot:
        """LXC names snapshots itself (snap0, snap1, …): ``name`` becomes the snapshot's
        comment, so what the user typed is kept beside it. The comment file ends with a
        newline: ``lxc-snapshot -L -C`` prints it as it is, and the next snapshot's line
        would otherwise continue it."""
        if stateful:
            raise Unsupported("LXC snapshots cannot include the running state.")
        if expires_at is not None:
            raise Unsupported("LXC snapshots do not expire: delete them yourself.")
        await self._require_stopped_for_snapshot(ref, "snapshot")
        before = {s.name for s in await self.list_snapshots(ref)}
        args = ["lxc-snapshot", "-n", ref.name]
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
            if name:
                f.write(name if name.endswith("\n") else name + "\n")
                f.flush()
                args += ["-c", f.name]
            await self.lxc.run(*args, timeout=600, check=True)
        after = await self.list_snapshots(ref)
        new = [s for s in after if s.name not in before]
        return new[-1] if new else after[-1]

    async def restore_snapshot(self, snapshot: Snapshot) -> None:
        await self._require_stopped_for_snapshot(snapshot.ref, "restore a snapshot of")
        await self.lxc.run("lxc-snapshot", "-n", snapshot.ref.name, "-r", snapshot.name,
                           "-N", snapshot.ref.name, timeout=600, check=True)

    async def delete_snapshot(self, snapshot: Snapshot) -> None:
        await self.lxc.run("lxc-snapshot", "-n", snapshot.ref.name, "-d", snapshot.name,
                           timeout=300, check=True)

    async def snapshot_counts(self, refs: list[InstanceRef]) -> dict[InstanceRef, int]:
        return {ref: self.lxc.snapshot_count(ref.name) for ref in refs}
