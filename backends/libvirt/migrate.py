"""Moving a domain to another libvirt remote (``copy_to`` with ``move``): libvirt's
migration, live for a running domain.

- The client drives it (``virDomainMigrate3`` with both connections, as virt-manager
  does): neither daemon needs a way into the other, QEMU sends the memory straight to the
  destination's QEMU (its ``migration_host`` and ports must be reachable from the source).
  ``LIVE | PERSIST_DEST | UNDEFINE_SOURCE``: the domain runs on while its memory is
  copied, is defined on the destination (its saved definition, pending changes with it)
  and undefined at the source; ``DEST_NAME`` renames it on the way.
- Disks: moved as they are when libvirt finds them on shared storage; otherwise (libvirt
  says "without shared storage is unsafe") copied live with the memory
  (``NON_SHARED_DISK``: the whole disk, no backing chain on the far side needed). libvirt
  makes each copy in the destination's storage pool of the disk's directory, so such a
  pool must exist there and must not have that file already: both are checked before
  anything moves. The source's disk files stay where they were.
- The migration is one long call: it runs on connections of its own in a thread of its
  own (on the remote's one thread it would hold every listing, and the abort, behind it).
  Progress (``jobStats``, ``blockJobInfo``) and the abort (``abortJob``) go through the
  remote's thread. Cancelling the coroutine aborts the job: the domain runs on at the
  source, and what libvirt made on the destination (its disk copies) is removed.
- A shut-off domain moves the same way: started paused at the source (its guest never
  runs), migrated with its disks, and forced off on the destination (shut off there, as it
  was); a failure forces it off at the source again.
"""

from __future__ import annotations

import asyncio
import os
import xml.etree.ElementTree as ET
from typing import Callable

import libvirt

from ..base import Backend
from ..errors import BackendError, Conflict, InvalidInput, OperationFailed, Unsupported
from ..models import Instance, InstanceRef, InstanceStatus
from .connection import CREDENTIALS, KEEPALIVE_COUNT, KEEPALIVE_INTERVAL, Connection

MOVE = (libvirt.VIR_MIGRATE_LIVE | libvirt.VIR_MIGRATE_PERSIST_DEST
        | libvirt.VIR_MIGRATE_UNDEFINE_SOURCE)
COPY_DISKS = libvirt.VIR_MIGRATE_NON_SHARED_DISK
NOT_SHARED = "without shared storage"
"""libvirt's words when a disk is on storage the destination does not share."""
POLL = 0.5


class Migrate(Backend):
    """``copy_to`` (moves only) and ``live_move_to_problem`` of a libvirt remote."""

    lv: Connection
    _cpu: dict[str, tuple[int, float]]

    def copy_problem(self, there: Backend, *, move: bool = False) -> str | None:
        """libvirt moves a domain to another libvirt host; it does not copy one."""
        if there.kind != self.kind or there.remote.name == self.remote.name:
            return "libvirt moves a domain only to another libvirt remote"
        return None if move else "libvirt moves a domain to another host; it does not copy it"

    def live_move_to_problem(self, instance: Instance, there: Backend) -> str | None:
        if there.kind != self.kind:
            return f"libvirt moves a domain only to another libvirt remote ({there.kind})"
        return None

    async def copy_to(self, ref: InstanceRef, target: Backend, new_name: str, *,
                      move: bool = False, with_snapshots: bool = True,
                      progress: Callable[[str], None] | None = None) -> Instance:
        report = progress or (lambda _text: None)
        far: Connection | None = getattr(target, "lv", None)
        if target.kind != self.kind or far is None:
            raise Unsupported(f"{ref} can move only to another libvirt remote; "
                              f"{target.remote.name} is {target.kind}.")
        if not move:
            raise Unsupported(f"libvirt does not copy a domain to another host, it moves it: "
                              f"move {ref} to {target.remote.name} instead.")
        dom = await self.lv.domain(ref)
        status = await self.lv.status(dom)
        snapshots = await self.lv.call(dom.snapshotNum, 0, what="counting snapshots")
        if snapshots:
            raise Conflict(f"{ref} has {snapshots} snapshot{'s' if snapshots > 1 else ''}: "
                           f"libvirt does not move snapshots to another host. Delete them "
                           f"first to move it.")
        dconn = await far.live()
        here_host = await self.lv.call((await self.lv.live()).getHostname, what="naming the host")
        there_host = await far.call(dconn.getHostname, what="naming the host")
        if here_host == there_host:
            raise InvalidInput(f"{self.remote.name} and {target.remote.name} have the same host "
                               f"name ({here_host}): libvirt migrates only between hosts of "
                               f"different names (the same host has nothing to move to).")
        try:
            await far.call(dconn.lookupByName, new_name, what="looking for the name")
        except BackendError:
            pass
        else:
            raise Conflict(f"{target.remote.name} already has a domain named {new_name}.")
        xml = await self.lv.call(dom.XMLDesc, 0, what=f"reading {ref}")
        disks = _disks(xml)
        params = {libvirt.VIR_MIGRATE_PARAM_DEST_NAME: new_name} if new_name != ref.name else {}
        stopped = status is InstanceStatus.STOPPED
        if stopped:
            report("starting it paused to move it")
            await self.lv.call(dom.createWithFlags, libvirt.VIR_DOMAIN_START_PAUSED,
                               what=f"starting {ref} paused", within=max(self.timeout, 60))
        try:
            flags = MOVE
            try:
                await self._migrate(ref, target, dom, disks, params, flags, report, [])
            except _NotShared:
                made = await _check_room(far, dconn, disks, target.remote.name, ref)
                flags |= COPY_DISKS
                await self._migrate(ref, target, dom, disks, params, flags, report, made)
        except BaseException:
            if stopped:
                await _quietly(self.lv.call(dom.destroy, what=f"stopping {ref} again"))
            raise
        moved = InstanceRef(target.remote.name, new_name)
        if stopped:
            there = await far.call(dconn.lookupByName, new_name, what="finding the moved one")
            await far.call(there.destroy, what=f"stopping {moved} as it was")
        self._cpu.pop(ref.name, None)
        return await target.get_instance(moved)

    async def _migrate(self, ref: InstanceRef, target: Backend, dom: libvirt.virDomain,
                       disks: list[tuple[str, str]], params: dict, flags: int,
                       report: Callable[[str], None], made: list[str]) -> None:
        """One migration attempt, its progress reported while it runs; cancelled: the job
        is aborted and the disk copies libvirt made on the destination (``made``) removed."""
        far: Connection = target.lv  # type: ignore[attr-defined]
        name = params.get(libvirt.VIR_MIGRATE_PARAM_DEST_NAME, ref.name)
        job = asyncio.ensure_future(asyncio.to_thread(
            _migrate_blocking, self.lv.uri, far.uri, ref.name, params, flags))
        report("copying disks and memory" if flags & COPY_DISKS else "copying memory")
        try:
            while not job.done():
                await asyncio.wait({job}, timeout=POLL)
                if not job.done():
                    report(await _progress(self.lv, dom, disks if flags & COPY_DISKS else []))
            job.result()
        except asyncio.CancelledError:
            await _quietly(self.lv.call(dom.abortJob, what=f"aborting the move of {ref}"))
            await asyncio.shield(asyncio.wait({job}))
            if job.done() and job.exception() is not None:  # stopped in time (else kept)
                await _quietly(_remove(far, made, name))
            raise
        except libvirt.libvirtError as e:
            if e.get_error_code() == libvirt.VIR_ERR_MIGRATE_UNSAFE and \
                    NOT_SHARED in str(e) and not flags & COPY_DISKS:
                raise _NotShared() from None
            await _quietly(_remove(far, made, name))
            raise _error(self.lv, e, ref, target.remote.name) from None
        except BaseException:
            await _quietly(_remove(far, made, name))
            raise


class _NotShared(Exception):
    """libvirt found a disk on storage the destination does not share: copy the disks."""


def _refuse(_credentials: list, _opaque: object) -> int:
    return -1  # no prompt, as the remote's own connection (connection.py)


def _open(uri: str) -> libvirt.virConnect:
    conn = libvirt.openAuth(uri, [CREDENTIALS, _refuse, None], 0)
    conn.setKeepAlive(KEEPALIVE_INTERVAL, KEEPALIVE_COUNT)
    return conn


def _migrate_blocking(here: str, there: str, name: str, params: dict, flags: int) -> None:
    """The migration itself, on connections of its own (see the module docstring)."""
    src = _open(here)
    try:
        dst = _open(there)
        try:
            src.lookupByName(name).migrate3(dst, params, flags)
        finally:
            dst.close()
    finally:
        src.close()


async def _progress(lv: Connection, dom: libvirt.virDomain, disks: list[tuple[str, str]]
                    ) -> str:
    def read() -> str:
        parts = []
        done = total = 0
        for target, _path in disks:
            try:
                info = dom.blockJobInfo(target, 0)
            except libvirt.libvirtError:
                continue
            done, total = done + info.get("cur", 0), total + info.get("end", 0)
        if total and done < total:
            parts.append(f"disks {done * 100 // total}%")
        stats = dom.jobStats(0)
        mem, mem_total = stats.get("memory_processed", 0), stats.get("memory_total", 0)
        if mem_total:
            parts.append(f"memory {min(mem, mem_total) * 100 // mem_total}%")
        if stats.get("memory_iteration", 0) > 1:
            parts.append(f"pass {stats['memory_iteration']}")
        return "moving: " + (", ".join(parts) or "starting")

    try:
        return await lv.call(read, what="reading the move's progress")
    except BackendError:
        return "moving"


async def _check_room(far: Connection, dconn: libvirt.virConnect,
                      disks: list[tuple[str, str]],
                      there: str, ref: InstanceRef) -> list[str]:
    """Where libvirt will make the disk copies on the destination (each path), after
    checking it can: a storage pool of each disk's directory, without that file yet."""
    def check() -> list[str]:
        paths = []
        for _target, path in disks:
            try:
                pool = dconn.storagePoolLookupByTargetPath(os.path.dirname(path))
            except libvirt.libvirtError:
                raise InvalidInput(
                    f"The disk {path} of {ref} is not on storage {there} shares, so libvirt "
                    f"copies it; but {there} has no storage pool for {os.path.dirname(path)} "
                    f"to make the copy in (define one, e.g. virsh pool-define-as NAME dir "
                    f"--target {os.path.dirname(path)}).") from None
            pool.refresh(0)
            try:
                dconn.storageVolLookupByPath(path)
            except libvirt.libvirtError:
                paths.append(path)
                continue
            raise Conflict(f"{there} already has a file {path}: corral does not write the "
                           f"disk of {ref} over it.")
        return paths

    return await far.call(check, what=f"checking the storage of {there}")


async def _remove(far: Connection, paths: list[str], name: str) -> None:
    """Delete the disk copies libvirt made on the destination of a move that failed (none
    if the domain is there after all: they are its disks)."""
    if not paths:
        return
    conn = await far.live()

    def remove() -> None:
        try:
            conn.lookupByName(name)
            return
        except libvirt.libvirtError:
            pass
        for path in paths:
            try:
                vol = conn.storageVolLookupByPath(path)
            except libvirt.libvirtError:
                continue
            vol.delete(0)

    await far.call(remove, what="removing the unfinished disk copies")


async def _quietly(work) -> None:
    """Clean-up after a failure: its own failure must not hide the first one."""
    try:
        await work
    except BackendError:
        pass


def _disks(xml: str) -> list[tuple[str, str]]:
    """(target, path) of each writable file disk (what libvirt copies)."""
    out = []
    for disk in ET.fromstring(xml).iterfind("devices/disk"):
        source, target = disk.find("source"), disk.find("target")
        if disk.get("type") != "file" or disk.get("device", "disk") not in ("disk", "lun") \
                or disk.find("readonly") is not None or disk.find("shareable") is not None \
                or source is None or target is None or not source.get("file"):
            continue
        out.append((target.get("dev", ""), source.get("file", "")))
    return out


def _error(lv: Connection, e: libvirt.libvirtError, ref: InstanceRef, there: str
           ) -> BackendError:
    code, text = e.get_error_code(), (e.get_error_message() or str(e)).strip()
    if code == libvirt.VIR_ERR_OPERATION_ABORTED:
        return OperationFailed(f"The move of {ref} to {there} was stopped; it runs on at "
                               f"{ref.remote}.")
    if code == libvirt.VIR_ERR_MIGRATE_UNSAFE:
        return Conflict(f"libvirt refuses to move {ref}: {text}")
    if code == libvirt.VIR_ERR_OPERATION_INVALID and "same host" in text:
        return InvalidInput(f"{ref.remote} and {there} are the same libvirt host: there is "
                            f"nothing to move ({text}).")
    return lv.error(e, f"moving {ref.name} to {there}")
