"""Importing foreign VMs (:class:`Importer`, a concern of the QEMU backend):
:meth:`~Importer.plan_import` reads the source and says what it understood
(:class:`~.plan.ImportPlan`) before anything is made; :meth:`~Importer.import_vm` converts
every disk into the new VM's qcow2 (``qemu-img convert -p``, killed when cancelled) and
defines the VM. What fails, is cancelled or fills the disk leaves nothing: the VM's
directory is made under :func:`~..files.building`, an OVA's scratch folder is an
owner-stamped export scratch (swept if corral dies) and removed with the plan."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from ...archive import ArchiveRefused
from ...base import Backend
from ...create_preview import SourcePreview
from ...errors import BackendError, Conflict, InvalidInput, NeedsConfirmation, OperationFailed
from ...models import Instance, InstanceStatus
from ...create_models import CreateRequest, CreateSource
from ...work import in_thread
from ..definition import VMDefinition, check_name
from ..files import building, export_scratch, in_words
from ..image_gate import inspect_image, settled
from ..images import convert, qemu_img
from ..machines import Machines
from . import libvirt_xml, ovf, vbox
from .package import LIBVIRT, OVA, OVF, VBOX, disk_path, kind_of, read_descriptor, read_ova
from .plan import Described, ImportPlan, PlannedDisk

_PARSERS = {OVA: ovf.describe, OVF: ovf.describe, VBOX: vbox.describe,
            LIBVIRT: libvirt_xml.describe}
VARS = Path("/usr/share/OVMF/OVMF_VARS_4M.fd")


def _stamp(path: str) -> tuple[int, int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_mtime_ns


def free_bytes(directory: Path) -> int:
    st = os.statvfs(directory)
    return st.f_bavail * st.f_frsize


async def _measure(disk: PlannedDisk) -> int:
    """Bytes the disk's qcow2 copy needs (qemu-img measure; its virtual size if that
    fails)."""
    g = disk.gated
    assert g is not None
    try:
        out = await qemu_img("measure", "--output=json", "-O", "qcow2", "-f", g.format,
                             g.source, pass_fds=g.pass_fds)
        return int(json.loads(out)["required"])
    except (OperationFailed, ValueError, KeyError, TypeError):
        return g.virtual_size


class Importer(Backend):
    """``plan_import`` and ``import_vm``; the launch wizard's ``vm-import`` source goes
    through :meth:`create_from_import`, which also takes another backend's
    :class:`~backends.portable.PortableVM` written to a file."""

    imports_portable = frozenset({"libvirt-domain"})
    vms: Machines

    async def plan_import(self, path: str,
                          progress: Callable[[str], None] | None = None) -> ImportPlan:
        """Read ``path`` (an ``.ova``, an OVF folder or ``.ovf``, a VirtualBox machine
        folder or ``.vbox``, a libvirt domain XML) and gate each disk; nothing is made
        in the VMs' directory but, for an OVA, a private scratch folder holding its
        unpacked files, which :meth:`ImportPlan.close` removes. Close the plan, or hand
        it to :meth:`import_vm`.

        Raises:
            InvalidInput: the path is none of those, or an OVA is refused (in words).
            OperationFailed: unpacking failed (disk full, …).
        """
        say = progress or (lambda _text: None)
        path = os.path.abspath(os.path.expanduser(path.strip()))
        kind, descriptor_path = await asyncio.to_thread(kind_of, path)
        root = self.vms.root
        await asyncio.to_thread(root.mkdir, parents=True, exist_ok=True)
        plan = ImportPlan(path, Described(kind), [], 0, 0, str(root))
        try:
            plan.stamp = _stamp(path)
            if kind == OVA:
                plan.scratch = export_scratch(root, "")
                try:
                    _name, data, _kept = await in_thread(read_ova, path, plan.scratch,
                                                         progress=say, every=0.2)
                except ArchiveRefused as e:
                    raise InvalidInput(f"{path} was refused: {e}.") from None
                except OSError as e:
                    raise OperationFailed(f"Unpacking {path} failed. "
                                          f"{in_words(e, str(root))}") from e
                base = str(plan.scratch)
            else:
                data = await asyncio.to_thread(read_descriptor, descriptor_path)
                base = os.path.dirname(descriptor_path)
            say("reading the descriptor…")
            plan.described = described = _PARSERS[kind](data)
            described.kind = {OVA: "OVA", OVF: "OVF folder"}.get(kind, kind)
            if not described.problems:
                for i, ref in enumerate(described.disks):
                    say(f"checking disk {i + 1} of {len(described.disks)}…")
                    planned = await self._gate(kind, base, ref, described)
                    if planned:
                        plan.disks.append(planned)
            plan.target_bytes = sum(d.required for d in plan.disks) + (
                VARS.stat().st_size if described.firmware == "uefi" and VARS.exists() else 0)
            plan.free_bytes = free_bytes(root)
        except BaseException:
            plan.close()
            raise
        return plan

    async def _gate(self, kind: str, base: str, ref, d: Described) -> PlannedDisk | None:
        """The disk ``ref`` found and through the image gate; None (and a problem noted)
        when refused."""
        label = ref.where or ref.file
        try:
            path = disk_path(kind, base, ref.file)
        except InvalidInput as e:
            d.problems.append(f"{label}: {e.message}")
            return None
        planned = PlannedDisk(ref, path)
        try:
            planned.gated = await inspect_image(path, fmt=ref.format)
        except NeedsConfirmation:
            if kind != LIBVIRT:
                d.problems.append(f"{label} ({ref.file}) refers to other files (a backing "
                                  f"file): a package's disks must be whole")
                return None
            try:
                planned.gated = await inspect_image(path, fmt=ref.format, confirmed=True)
            except InvalidInput as e:
                d.problems.append(f"{label}: {e.message}")
                return None
            planned.confirm = tuple(r.path for r in planned.gated.references)
        except InvalidInput as e:
            shown = e.message.replace(base + "/", "") if kind == OVA else e.message
            d.problems.append(f"{label}: {shown}")
            return None
        g = planned.gated
        if kind == OVA and ref.file_size and ref.file_size != os.fstat(g.fd).st_size:
            d.problems.append(f"{label}: the descriptor says {ref.file} is {ref.file_size} "
                              f"bytes, the package holds {os.fstat(g.fd).st_size}")
        if ref.capacity and abs(ref.capacity - g.virtual_size) > (1 << 20):
            d.unmapped.append(f"{label}: the descriptor declares {ref.capacity} bytes, the "
                              f"image holds {g.virtual_size}; the image's size is kept")
        planned.required = await _measure(planned)
        return planned

    async def import_vm(self, plan: ImportPlan, name: str, *, accel: str = "auto",
                        cpus: int | None = None, memory_mib: int | None = None,
                        description: str = "",
                        progress: Callable[[str], None] | None = None) -> Instance:
        """Make the VM ``name`` from ``plan`` (which it closes): each disk converted into
        ``disk<N>.qcow2`` in the plan's order, the first one booted; CPUs, memory,
        firmware and the first NIC's MAC as planned unless ``cpus``/``memory_mib`` are
        given. Nothing is left on failure, cancellation or a full disk.

        Raises:
            InvalidInput: the plan has problems, the source changed since, bad values.
            Conflict: the name is taken.
            OperationFailed: a conversion failed (the disk is full, …), in words.
        """
        say = progress or (lambda _text: None)
        try:
            check_name(name)
            problems = plan.problems
            if problems:
                raise InvalidInput(f"{plan.source} cannot be imported: "
                                   f"{'; '.join(problems)}.")
            if _stamp(plan.source) != plan.stamp:
                raise InvalidInput(f"{plan.source} changed since it was read: read it "
                                   f"again.")
            d = plan.described
            cpus = d.cpus if cpus is None else cpus
            memory_mib = d.memory_mib if memory_mib is None else memory_mib
            if not 1 <= cpus <= (os.cpu_count() or 1) * 4:
                raise InvalidInput(f"The VM has {cpus} CPUs; here a VM may have 1 to "
                                   f"{(os.cpu_count() or 1) * 4}: give fewer.")
            if accel not in ("auto", "kvm", "tcg"):
                raise InvalidInput("Accelerator must be kvm, tcg or auto.")
            if d.firmware == "uefi" and not VARS.exists():
                raise InvalidInput("The VM boots with UEFI, which needs OVMF (package ovmf).")
            free = free_bytes(self.vms.root)
            if plan.target_bytes > free:
                raise InvalidInput(f"{plan.source} cannot be imported: its disks need "
                                   f"about {plan.target_bytes} bytes, {free} are free.")
            directory = self.vms.dir(name)
            try:
                directory.mkdir(mode=0o700)
            except FileExistsError:
                raise Conflict(f"A VM named '{name}' already exists.") from None
            self.vms.busy[name] = "being imported"
            try:
                await self._fill(directory, plan, say, VMDefinition(
                    name=name, cpus=cpus, max_cpus=max(cpus, min(8, (os.cpu_count() or 1) * 2)),
                    memory_mib=memory_mib, accel=accel, firmware=d.firmware, boot="disk",
                    network="user" if d.macs else "none",
                    mac=d.macs[0] if d.macs else "",
                    description=description or _description(plan),
                    created_at=datetime.now(timezone.utc).isoformat()))
            finally:
                self.vms.busy.pop(name, None)
        finally:
            plan.close()
        self.vms.status[name] = InstanceStatus.STOPPED
        return self.vms.instance(name)

    async def _fill(self, directory: Path, plan: ImportPlan, say: Callable[[str], None],
                    definition: VMDefinition) -> None:
        with building(directory):
            n = len(plan.disks)
            for i, disk in enumerate(plan.disks):
                assert disk.gated is not None
                target = directory / f"disk{i}.qcow2"
                scratch = directory / "image.scratch"
                source = await settled(disk.gated, str(scratch))
                try:
                    await convert(source.source, str(target),
                                  f"converting disk {i + 1} of {n} ({source.format})", say,
                                  src_format=source.format, pass_fds=source.pass_fds)
                finally:
                    if source is not disk.gated:
                        source.close()
                        scratch.unlink()
                definition.disks.append(target.name)
                disk.gated.close()
            if definition.firmware == "uefi":
                shutil.copyfile(VARS, directory / "OVMF_VARS.fd")
            say("saving definition…")
            definition.save(directory)

    def _plans(self) -> dict[str, ImportPlan]:
        return self.__dict__.setdefault("_import_plans", {})

    async def preview_source(self, source: CreateSource,
                             progress: Callable[[str], None] | None = None) -> SourcePreview:
        """The wizard's summary of a ``vm-import`` source: the plan's lines, kept for the
        ``create_instance`` that follows (:meth:`drop_preview` closes it)."""
        if source.kind != "vm-import":
            raise self._unsupported(f"preview a {source.kind} source")
        path = os.path.abspath(os.path.expanduser(source.value.strip()))
        self.drop_preview(source)
        plan = await self.plan_import(path, progress)
        self._plans()[path] = plan
        d = plan.described
        name = re.sub(r"[^a-z0-9-]+", "-", d.name.lower()).strip("-")[:63].strip("-")
        return SourcePreview(tuple(plan.summary()), tuple(plan.problems), {
            "name": name if name and not self.vms.dir(name).exists() else "",
            "cpus": str(d.cpus), "memory": f"{d.memory_mib}MiB"})

    def drop_preview(self, source: CreateSource) -> None:
        path = os.path.abspath(os.path.expanduser(source.value.strip()))
        plan = self._plans().pop(path, None)
        if plan is not None:
            plan.close()

    async def create_from_import(self, request: CreateRequest,
                                 say: Callable[[str], None]) -> Instance:
        """The wizard's ``vm-import`` source: the plan its summary was made from (or a new
        one), imported under ``request.name``; the request's CPUs and memory replace the
        plan's when given."""
        options = request.known_options(("accel", "description"), "an imported VM")
        path = os.path.abspath(os.path.expanduser(request.source.value.strip()))
        plan = self._plans().pop(path, None)
        if plan is None or _stamp(path) != plan.stamp:
            if plan:
                plan.close()
            plan = await self.plan_import(path, say)
        if request.memory is not None and request.memory % (1 << 20):
            plan.close()
            raise InvalidInput("Memory must be a whole number of MiB.")
        inst = await self.import_vm(
            plan, request.name, accel=options.get("accel", "auto").strip() or "auto",
            cpus=request.cpus, description=options.get("description", ""),
            memory_mib=None if request.memory is None else request.memory >> 20,
            progress=say)
        self.vms.emit("instance-created", inst.ref)
        if request.start:
            say("starting…")
            try:
                await self.start(inst.ref)
            except BackendError as e:
                raise OperationFailed(f"{inst.ref} was created, but could not start: "
                                      f"{e.message}") from e
            inst = self.vms.instance(request.name)
        return inst


def _description(plan: ImportPlan) -> str:
    d = plan.described
    return (f"imported from the {d.kind} {os.path.basename(plan.source)}"
            + (f" ({d.os_type})" if d.os_type else ""))
