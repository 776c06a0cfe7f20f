"""Backups, copies and names of QEMU VMs: export to and import from a tar archive, full
and linked clones, renaming (rebasing the VMs whose disks are overlays of its disks), and
the description. Big files move in worker threads (:func:`backends.work.in_thread`),
``qemu-img`` runs as a subprocess; all of it stops when cancelled and leaves nothing
behind."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from ..base import Backend
from ..errors import BackendError, Conflict, InvalidInput, OperationFailed
from ..models import Instance, InstanceRef, InstanceStatus
from ..paths import UntrustedFile, export_target, publish_export
from ..steps import Steps
from ..work import in_thread
from .archive import DamagedArchive, copy_file, read_archive, write_archive
from .definition import (
    DISK_RE,
    VMDefinition,
    archived_definition,
    check_name,
    new_mac,
    qcow2_backing,
)
from .files import (
    building,
    drop_rename_journal,
    export_scratch,
    in_words,
    mark_partial,
    unmark_partial,
    write_rename_journal,
)
from .image_gate import inspect_image
from .images import convert, image_info, qemu_img
from .imported import check_imported
from .machines import Machines


class Transfer(Backend):
    """``export_instance``, ``import_instance``, ``clone_instance``, ``rename_instance``,
    ``set_description``."""

    vms: Machines

    def _files_in_use(self, skip: str) -> set[str]:
        """The ISOs, kernels and initrds the VMs here use (an import may name them)."""
        used: set[str] = set()
        for other in self.vms.names():
            if other == skip:
                continue
            try:
                d = self.vms.definition(other)
            except BackendError:  # a broken definition trusts nothing
                continue
            used.update(p for p in (d.iso, d.kernel, d.initrd) if p)
        return used

    async def export_instance(self, ref: InstanceRef, path: str, *, with_snapshots: bool = True,
                              progress: Callable[[str], None] | None = None) -> int:
        """Write a stopped VM to a new tar archive at ``path`` (gzip-compressed when it
        ends with ``.gz`` or ``.tgz``): ``vm.json``, ``disk<N>.qcow2`` and, for UEFI VMs,
        ``OVMF_VARS.fd``. Returns the archive's size in bytes.

        Disks are stored as they are (qcow2 internal snapshots included) when
        ``with_snapshots``; otherwise each is rewritten by ``qemu-img convert`` (current
        state only). A disk that is a qcow2 overlay (a linked clone, or a VM made as an
        overlay of an image) is always flattened, since its backing file is not in the
        archive; if it also has snapshots, ``with_snapshots`` is refused. Kernel, initrd
        and ISO paths are kept as references: those files are not in the archive.

        The archive is written to ``path + ".part"`` and renamed when complete; on failure
        or cancellation nothing is left.

        Raises:
            Conflict: the VM is running (or busy).
            InvalidInput: ``path`` exists, its directory does not, or see above.
            OperationFailed: writing failed (disk full, ...).
        """
        say = progress or (lambda _text: None)
        d = self.vms.require_stopped(ref, "export")
        path, part = export_target(path)
        directory = self.vms.dir(ref.name)
        self.vms.busy[ref.name] = "being exported"
        tmp = ""
        try:
            plan: list[tuple[str, str, bool]] = []
            for i, disk in enumerate(d.disks):
                src = str(directory / disk)
                found = await image_info(src)
                backing = found.get("backing-filename")
                if with_snapshots and backing and found.get("snapshots"):
                    raise InvalidInput(
                        f"{disk} of {ref} is a qcow2 overlay of {backing} and has internal "
                        f"snapshots: an archive cannot keep both. Export it without "
                        f"snapshots (its current state, flattened).")
                flatten = (not with_snapshots or bool(backing)
                           or found.get("format") != "qcow2")
                plan.append((f"disk{i}.qcow2", src, flatten))
            tmp = str(export_scratch(self.vms.root, part))  # swept if corral is killed
            members: list[tuple[str, str | bytes]] = []
            for arcname, src, flatten in plan:
                if flatten:
                    out = os.path.join(tmp, arcname)
                    await convert(src, out, f"converting {arcname}", say)
                    src = out
                members.append((arcname, src))
            exported = dataclasses.replace(d, disks=[m[0] for m in members], linked_to="")
            members.insert(0, ("vm.json", exported.to_json().encode()))
            if d.firmware == "uefi" and (directory / "OVMF_VARS.fd").is_file():
                members.append(("OVMF_VARS.fd", str(directory / "OVMF_VARS.fd")))
            compress = path.endswith((".gz", ".tgz"))
            try:
                await in_thread(write_archive, part, members, compress, progress=say)
            except OSError as e:
                raise OperationFailed(in_words(e, part)) from e
            publish_export(part, path)
            say("exported")
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(part)
            raise
        finally:
            self.vms.busy.pop(ref.name, None)
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)
        return os.path.getsize(path)

    async def import_instance(self, path: str, name: str, *, storage_pool: str = "",
                              progress: Callable[[str], None] | None = None) -> Instance:
        """Create the VM ``name`` from an archive written by :meth:`export_instance`.

        Every member is checked before use: only ``vm.json``, ``disk<N>.qcow2`` and
        ``OVMF_VARS.fd`` plain files (no paths, links or directories), the disks exactly
        those ``vm.json`` names, each a qcow2 without a backing file that passes
        ``qemu-img check``; the files it names (ISO, kernel, initrd) public or already used
        by a VM here, its other values in bounds (:mod:`.imported`). The VM keeps the
        archive's settings and MAC; its name becomes ``name``. Nothing is left on failure
        or cancellation.

        Raises:
            InvalidInput: bad name, ``storage_pool`` given, missing file, or the archive
                is damaged or not a corral QEMU export.
            Conflict: the name is taken.
        """
        say = progress or (lambda _text: None)
        if storage_pool:
            raise InvalidInput("QEMU VMs have no storage pools: disks live in the VM's "
                               "directory.")
        check_name(name)
        path = os.path.abspath(os.path.expanduser(path))
        if not os.path.isfile(path):
            raise InvalidInput(f"{path} does not exist or is not a file.")
        self.vms.root.mkdir(parents=True, exist_ok=True)
        directory = self.vms.dir(name)
        try:
            directory.mkdir(mode=0o700)  # claims the name; listed once vm.json is written, last
        except FileExistsError:
            raise Conflict(f"A VM named '{name}' already exists.") from None
        self.vms.busy[name] = "being imported"
        try:
            async with Steps() as steps:
                steps.undo(f"the directory {directory}", lambda: asyncio.to_thread(
                    shutil.rmtree, directory, ignore_errors=True))
                mark_partial(directory)
                d = await self._unpack_export(path, directory, name, say)
                await _check_exported_disks(path, directory, d, say)
                d.name, d.linked_to = name, ""
                d.save(directory)
                unmark_partial(directory)
        finally:
            self.vms.busy.pop(name, None)
        self.vms.status[name] = InstanceStatus.STOPPED
        self.vms.why.pop(name, None)
        self.vms.emit("instance-created", self.vms.ref(name))
        return await self.vms.read_instance(name)

    async def _unpack_export(self, path: str, directory: Path, name: str,
                             say: Callable[[str], None]) -> VMDefinition:
        """Unpack the archive's allowed members into ``directory``; its definition, once
        it is consistent with what the archive held."""
        def allowed(member: str) -> bool:
            return member in ("vm.json", "OVMF_VARS.fd") or bool(DISK_RE.match(member))

        try:
            kept = await in_thread(read_archive, path, directory, allowed, {"vm.json"},
                                   progress=say)
        except DamagedArchive as e:
            raise InvalidInput(f"{path} is not a corral QEMU export: {e}.") from None
        except OSError as e:
            raise OperationFailed(f"Importing {path} failed. "
                                  f"{in_words(e, str(directory))}") from e
        assert isinstance(kept, dict)
        if "vm.json" not in kept:
            raise InvalidInput(f"{path} is not a corral QEMU export: it has no vm.json.")
        d = archived_definition(kept["vm.json"], path)
        check_imported(d, path, self._files_in_use(name))
        present = sorted(p.name for p in directory.iterdir() if DISK_RE.match(p.name))
        if sorted(d.disks) != present:
            raise InvalidInput(f"{path} is incomplete or inconsistent: its vm.json names "
                               f"the disks {', '.join(d.disks) or 'none'}, the archive "
                               f"holds {', '.join(present) or 'none'}.")
        has_vars = (directory / "OVMF_VARS.fd").exists()
        if (d.firmware == "uefi") != has_vars:
            raise InvalidInput(f"{path} is inconsistent: a {d.firmware} VM "
                               f"{'without' if not has_vars else 'with'} UEFI variables.")
        return d

    async def clone_instance(self, ref: InstanceRef, new_name: str, *, linked: bool = False,
                             with_snapshots: bool = True,
                             progress: Callable[[str], None] | None = None) -> Instance:
        """Copy a stopped VM to ``new_name``, with a new MAC address and its own copy of the
        UEFI variables.

        Full clone (``linked=False``): each disk is copied byte for byte, internal snapshots
        included, when ``with_snapshots``; otherwise ``qemu-img convert`` writes the current
        state only (and flattens a backing file: the copy is then independent). A copy of a
        linked clone made with snapshots stays backed by the same base.

        Linked clone (``linked=True``): each disk is a new qcow2 overlay whose backing file
        is the source's disk; ``with_snapshots`` does not apply (the snapshots stay with
        the source; the clone starts from its current state). The clone's definition
        records the source (``linked_to``), and from then on the source is protected, since
        any change to its disks would damage the clone: it cannot be started, have a
        snapshot restored or be deleted (:class:`Conflict` naming the clones, even with
        ``force``) while a linked clone exists. Renaming it rebases its clones.

        Raises:
            Conflict: the VM is running or busy, or ``new_name`` is taken.
            InvalidInput: bad name.
            OperationFailed: qemu-img failed (nothing is left).
        """
        say = progress or (lambda _text: None)
        d = self.vms.require_stopped(ref, "clone")
        check_name(new_name)
        source_dir, directory = self.vms.dir(ref.name), self.vms.dir(new_name)
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            raise Conflict(f"A VM named '{new_name}' already exists.") from None
        self.vms.busy[ref.name] = "being cloned"
        self.vms.busy[new_name] = "being created"
        try:
            with building(directory):
                new = dataclasses.replace(d, name=new_name, mac=new_mac(), linked_to="",
                                          io_limits=dict(d.io_limits), disks=list(d.disks),
                                          created_at=datetime.now(timezone.utc).isoformat())
                for disk in d.disks:
                    src, dst = str(source_dir / disk), str(directory / disk)
                    if linked:
                        say(f"creating overlay {disk}…")
                        await qemu_img("create", "-f", "qcow2", "-F", "qcow2", "-b", src, dst)
                        new.linked_to = ref.name
                    elif with_snapshots:
                        await in_thread(copy_file, src, dst, f"copying {disk}", progress=say)
                        backing = qcow2_backing(Path(src))
                        if backing and not backing.startswith("json:"):
                            # a relative backing path would now point elsewhere: make it absolute
                            fmt = (await image_info(src)).get("backing-filename-format")
                            await qemu_img("rebase", "-u", *(["-F", fmt] if fmt else []),
                                           "-b", backing, dst)
                            new.linked_to = d.linked_to
                    else:
                        await convert(src, dst, f"copying {disk}", say)
                if d.firmware == "uefi" and (source_dir / "OVMF_VARS.fd").is_file():
                    await asyncio.to_thread(shutil.copyfile, source_dir / "OVMF_VARS.fd",
                                            directory / "OVMF_VARS.fd")
                new.save(directory)
        finally:
            self.vms.busy.pop(ref.name, None)
            self.vms.busy.pop(new_name, None)
        self.vms.status[new_name] = InstanceStatus.STOPPED
        self.vms.why.pop(new_name, None)
        say("cloned")
        self.vms.emit("instance-created", self.vms.ref(new_name))
        return await self.vms.read_instance(new_name)

    async def rename_instance(self, ref: InstanceRef, new_name: str) -> Instance:
        """Rename a stopped VM: its directory moves and its definition takes the new name.
        VMs whose disks are overlays of its disks (linked clones, or VMs created as an
        overlay of one of its disks) are rebased (``qemu-img rebase -u``) onto the new
        paths; they must be stopped. On failure everything is put back.

        Raises:
            Conflict: the VM or one of its overlays is running, or ``new_name`` is taken.
            InvalidInput: bad name.
        """
        d = self.vms.require_stopped(ref, "rename")
        check_name(new_name)
        if new_name == ref.name:
            return await self.vms.read_instance(ref.name)
        old_dir, new_dir = self.vms.dir(ref.name), self.vms.dir(new_name)
        if new_dir.exists():
            raise Conflict(f"A VM named '{new_name}' already exists.")
        overlays = self._overlays_of(ref)
        self.vms.busy[ref.name] = "being renamed"
        try:
            async with Steps() as steps:
                # a kill -9 from here on is completed or undone at the next start
                write_rename_journal(old_dir, ref.name, new_name, [
                    (str(o.disk), o.backing, o.moved(old_dir, new_dir)) for o in overlays])
                steps.undo("the rename journal", lambda: drop_rename_journal(old_dir))
                os.rename(old_dir, new_dir)
                steps.undo(f"the move to {new_dir}", lambda: os.rename(new_dir, old_dir))
                await _rebase_overlays(steps, overlays, old_dir, new_dir)
                self._relink_clones(steps, ref.name, new_name, {o.vm for o in overlays})
                d.name = new_name
                d.save(new_dir)
                drop_rename_journal(new_dir)
        finally:
            self.vms.busy.pop(ref.name, None)
        old_run, new_run = self.vms.run_dir(ref.name), self.vms.run_dir(new_name)
        if old_run.exists():  # serial log history goes along
            if new_run.exists():
                shutil.rmtree(new_run, ignore_errors=True)
            with contextlib.suppress(OSError):
                os.rename(old_run, new_run)
        for table in (self.vms.status, self.vms.why):
            if ref.name in table:
                table[new_name] = table.pop(ref.name)
        self.vms.status.setdefault(new_name, InstanceStatus.STOPPED)
        new_ref = self.vms.ref(new_name)
        self.vms.emit("instance-renamed", new_ref, f"renamed from {ref.name}")
        return await self.vms.read_instance(new_name)

    def _overlays_of(self, ref: InstanceRef) -> list[_Overlay]:
        """The disks of other VMs whose backing file is in ``ref``'s directory.

        Raises:
            Conflict: such a VM is running or busy (its backing file would move).
        """
        prefix = str(self.vms.dir(ref.name)) + os.sep
        overlays = []
        for other in self.vms.names():
            if other == ref.name:
                continue
            try:
                od = VMDefinition.load(self.vms.dir(other))
            except (OSError, ValueError, TypeError, UntrustedFile):
                continue  # (another VM's damaged or refused file: not this one's)
            for disk in od.disks:
                backing = qcow2_backing(self.vms.dir(other) / disk)
                if backing and backing.startswith(prefix):
                    if self.vms.pid(other) is not None or other in self.vms.busy:
                        raise Conflict(f"{other} is an overlay of {ref}'s disks and is "
                                       f"running or busy: stop it first (its backing file "
                                       f"moves).")
                    overlays.append(_Overlay(other, self.vms.dir(other) / disk, backing))
        return overlays

    def _relink_clones(self, steps: Steps, old: str, new: str, vms: set[str]) -> None:
        """The linked clones among ``vms`` name ``new`` as their source (undone: ``old``
        again)."""
        def link(vm: str, to: str) -> None:
            od = VMDefinition.load(self.vms.dir(vm))
            od.linked_to = to
            od.save(self.vms.dir(vm))

        for vm in vms:
            if VMDefinition.load(self.vms.dir(vm)).linked_to == old:
                link(vm, new)
                steps.undo(f"the link of {vm}", lambda vm=vm: link(vm, old))

    async def set_description(self, ref: InstanceRef, text: str) -> None:
        """Save the VM's description in its definition (running or not)."""
        d = self.vms.definition(ref.name)
        d.description = text
        d.save(self.vms.dir(ref.name))
        self.vms.emit("instance-updated", ref)


@dataclasses.dataclass(frozen=True)
class _Overlay:
    """A disk of another VM whose backing file is in a VM's directory."""

    vm: str
    disk: Path
    backing: str

    def moved(self, old_dir: Path, new_dir: Path) -> str:
        """Its backing file's path once ``old_dir`` is ``new_dir``."""
        return str(new_dir) + os.sep + self.backing[len(str(old_dir) + os.sep):]


async def _rebase_overlays(steps: Steps, overlays: list[_Overlay], old_dir: Path,
                           new_dir: Path) -> None:
    """Point each overlay at its backing file's new path (undone: the old one)."""
    for o in overlays:
        await qemu_img("rebase", "-u", "-F", "qcow2", "-b", o.moved(old_dir, new_dir),
                       str(o.disk))
        steps.undo(f"the rebase of {o.disk}", lambda o=o: qemu_img(
            "rebase", "-u", "-F", "qcow2", "-b", o.backing, str(o.disk)))


async def _check_exported_disks(path: str, directory: Path, d: VMDefinition,
                                say: Callable[[str], None]) -> None:
    """Each disk an export brought is a self-contained qcow2 that ``qemu-img check``
    passes."""
    for disk in d.disks:
        say(f"checking {disk}…")
        target = str(directory / disk)
        try:  # the one image gate: a self-contained qcow2, nothing else opened
            (await inspect_image(target, fmt="qcow2")).close()
        except InvalidInput as e:  # NeedsConfirmation too: never asked for
            raise InvalidInput(f"{path} holds a {disk} that is not a self-contained "
                               f"qcow2; refused. {e.message}") from e
        try:
            await qemu_img("check", "-q", "-f", "qcow2", target)
        except OperationFailed as e:
            raise InvalidInput(f"{path} holds a damaged {disk}: {e.message}") from e
