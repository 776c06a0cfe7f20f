"""Creating QEMU VMs: :meth:`Create.create` defines a VM and makes its disks (an overlay
or copy of an image, an empty disk for an installer or network boot, or none for a direct
kernel boot); the launch wizard's verbs wrap it."""

from __future__ import annotations

import asyncio
import os
import shutil
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from ..base import Backend
from ..errors import BackendError, Conflict, InvalidInput, OperationFailed
from ..models import Instance, InstanceStatus, InstanceType
from ..create_models import CreateOptions, CreateRequest, CreateSource, SourceField
from .definition import VMDefinition, check_name
from .files import building
from .host_paths import open_boot_files, who_can_change, writable_by_others
from .image_gate import GatedImage, copy_to_qcow2, inspect_image, settled
from .images import qemu_img
from .machines import Machines


class Create(Backend):
    """``create`` (all its settings as arguments), and ``create_sources``,
    ``create_options``, ``check_name``, ``create_instance`` for the wizard."""

    vms: Machines

    async def create(self, name: str, *, cpus: int = 1, memory_mib: int = 512,
                     disk_gib: float = 0, image: str = "", overlay: bool = True,
                     iso: str = "", kernel: str = "", initrd: str = "", cmdline: str = "",
                     network_boot: bool = False, accel: str = "auto",
                     firmware: str = "bios", description: str = "", network: str = "user",
                     allow_backing: bool = False, image_format: str = "",
                     progress: Callable[[str], None] | None = None) -> Instance:
        """Define a VM (and make its disks). Nothing is left behind on failure (also when
        cancelled: a running ``qemu-img`` is killed and the VM's directory removed).

        ``disk_gib`` may be fractional; the disk gets exactly that many bytes (rounded up to
        a 512-byte sector by qemu-img). ``network`` is ``user`` (QEMU's NAT) or ``none``.

        The image goes through :mod:`.image_gate` (its format from ``image_format``,
        else from corral's reading of its header; given explicitly to every later
        ``qemu-img`` call). An image that refers to other files (a qcow2 backing file or
        external data file: a "raw" file that really is such a qcow2 would pull, say, a
        host secret into the guest's disk) is refused with :class:`NeedsConfirmation`
        (option ``allow_backing``, the message naming each file) unless
        ``allow_backing``; it is then always copied, flattened. vmdk, vdi, vhdx and vhd
        images are always converted into a fresh qcow2. An overlay is made only of an
        image nobody but root and this user can change (QEMU reads the base again at
        every start). The ISO is attached as ``format=raw``, never probed; ISO, kernel
        and initrd are checked again at every start (:mod:`.host_paths`).

        Raises:
            InvalidInput: bad name or sizes, name taken, missing files, unknown accel,
                an image the gate refuses, an overlay of an image others can change.
            NeedsConfirmation: the image refers to other files (see above).
        """
        say = progress or (lambda _text: None)
        check_name(name)
        if (self.vms.dir(name)).exists():
            raise InvalidInput(f"A VM named '{name}' already exists.")
        _check_create(cpus=cpus, memory_mib=memory_mib, disk_gib=disk_gib, accel=accel,
                      firmware=firmware, network=network, network_boot=network_boot,
                      files={"image": image, "ISO": iso, "kernel": kernel, "initrd": initrd})
        disk_bytes = int(round(disk_gib * 1024**3))
        # the same check every start makes (:mod:`.host_paths`), so a VM is not defined
        # that could never start
        named = {k: os.path.abspath(v) if v else ""
                 for k, v in (("iso", iso), ("kernel", kernel), ("initrd", initrd))}
        await asyncio.to_thread(lambda: open_boot_files(
            VMDefinition(name=name, **named), f"The VM {name} was not created").close())
        gated: GatedImage | None = None
        if image:
            say("reading image…")
            gated = await inspect_image(image, fmt=image_format or None,
                                        confirmed=allow_backing)
            overlay = overlay and gated.self_contained and not gated.needs_conversion
            try:
                if overlay:
                    _refuse_unsafe_base(gated)
                if disk_bytes and disk_bytes < gated.virtual_size:
                    raise InvalidInput(f"The disk must be at least as large as the image "
                                       f"({gated.virtual_size} bytes); disks only grow.")
            except BaseException:
                gated.close()
                raise
        try:
            return await self._define(name, directory=self.vms.dir(name), gated=gated,
                                      overlay=overlay, disk_bytes=disk_bytes, say=say,
                                      kernel=kernel, iso=iso, initrd=initrd,
                                      network_boot=network_boot,
                                      definition=VMDefinition(
                                          name=name, cpus=cpus, memory_mib=memory_mib,
                                          accel=accel, firmware=firmware, cmdline=cmdline,
                                          network=network, description=description))
        finally:
            if gated:
                gated.close()

    async def _define(self, name: str, *, directory: Path, gated: GatedImage | None,
                      overlay: bool, disk_bytes: int, say: Callable[[str], None],
                      kernel: str, iso: str, initrd: str, network_boot: bool,
                      definition: VMDefinition) -> Instance:
        """The second half of :meth:`create`: the VM's directory, disks and definition
        (``definition`` holds the plain settings)."""
        directory.mkdir(mode=0o700, parents=True)
        with building(directory):
            disks = []
            if gated:
                target = directory / "disk0.qcow2"
                say("creating overlay disk…" if overlay else "copying disk image…")
                if overlay:
                    await qemu_img("create", "-f", "qcow2", "-F", gated.format,
                                   "-b", gated.path, str(target))
                else:
                    scratch = directory / "image.scratch"
                    source = await settled(gated, str(scratch))
                    try:
                        await copy_to_qcow2(source, str(target), say)
                    finally:
                        if source is not gated:
                            source.close()
                            scratch.unlink()
                if disk_bytes:
                    say("resizing disk…")
                    await qemu_img("resize", "-f", "qcow2", str(target), str(disk_bytes))
                disks.append(target.name)
            elif disk_bytes:
                target = directory / "disk0.qcow2"
                say("creating disk…")
                await qemu_img("create", "-f", "qcow2", str(target), str(disk_bytes))
                disks.append(target.name)
            boot = ("kernel" if kernel else "cdrom" if iso else
                    "network" if network_boot else "disk")
            if boot == "disk" and not disks:
                raise InvalidInput("Nothing to boot: give an image, a disk size with an ISO, "
                                   "a kernel, or choose network boot.")
            definition = replace(
                definition, max_cpus=max(definition.cpus, min(8, (os.cpu_count() or 1) * 2)),
                disks=disks, iso=os.path.abspath(iso) if iso else "",
                kernel=os.path.abspath(kernel) if kernel else "",
                initrd=os.path.abspath(initrd) if initrd else "", boot=boot,
                created_at=datetime.now(timezone.utc).isoformat())
            if definition.firmware == "uefi":
                vars_src = Path("/usr/share/OVMF/OVMF_VARS_4M.fd")
                if not vars_src.exists():
                    raise InvalidInput("UEFI needs OVMF (package ovmf).")
                shutil.copyfile(vars_src, directory / "OVMF_VARS.fd")
            say("saving definition…")
            definition.save(directory)
        self.vms.status[name] = InstanceStatus.STOPPED
        return await self.vms.read_instance(name)

    # The launch wizard (CREATE) --------------------------------------------------------

    _CREATE_OPTIONS = ("initrd", "cmdline", "firmware", "accel", "overlay", "description",
                       "allow_backing", "format")

    async def create_sources(self) -> list[CreateSource]:
        """Each source with what the wizard asks for it: the file on this machine, the
        firmware (BIOS by default), a kernel's initrd and command line."""
        vm = InstanceType.VM
        firmware = SourceField("firmware", "Firmware", choices=(
            ("bios", "BIOS (SeaBIOS)"), ("uefi", "UEFI (OVMF)")), default="bios")

        def path(label: str, placeholder: str) -> SourceField:
            return SourceField("", label, placeholder, required=True, path="local")

        return [
            CreateSource("disk-image", "Disk image (qcow2/raw) — overlay or copy", type=vm,
                         fields=(path("Disk image", "path of a disk image (qcow2 or raw)"),
                                 firmware),
                         detail="a qcow2 overlay backed by the image (option overlay=yes), "
                                "or a qcow2 copy (overlay=no); a disk size grows it"),
            CreateSource("iso", "Installer ISO + empty disk", type=vm,
                         fields=(path("ISO", "path of the installer ISO"), firmware),
                         detail="boots the ISO from a CD drive; the disk is new and empty"),
            CreateSource("kernel", "Kernel + initrd + command line", type=vm,
                         fields=(path("Kernel", "path of the kernel (vmlinuz)"),
                                 SourceField("initrd", "Initrd", "initrd path (optional)",
                                             path="local"),
                                 SourceField("cmdline", "Command line",
                                             "kernel command line, e.g. console=ttyS0")),
                         detail="direct kernel boot (options initrd, cmdline); disk only if "
                                "a size is given"),
            CreateSource("pxe", "Empty VM, network boot (PXE)", type=vm, fields=(firmware,),
                         detail="boots from the network through its NIC; the disk is new "
                                "and empty"),
            CreateSource("vm-import", "Import a VM… (OVA/OVF, VirtualBox, libvirt XML)",
                         type=vm, preview=True, cancellable=True,
                         fields=(path("VM to import", "an .ova, .ovf or .vbox file, an OVF "
                                      "or VirtualBox machine folder, or a libvirt domain "
                                      ".xml"),),
                         detail="an .ova, an OVF or VirtualBox machine folder, or a libvirt "
                                "domain XML: its settings, and copies of its disks as qcow2"),
        ]

    async def create_options(self) -> CreateOptions:
        """Networks: QEMU user networking or no NIC. Host bridges are not offered: the
        definition has no bridged NIC (that would need a tap device or qemu-bridge-helper).
        """
        return CreateOptions(
            networks=("user", "none"), max_cpus=os.cpu_count() or 1, user_data=False,
            can_cancel=False,
            defaults={"cpus": "1", "memory": "512MiB", "disk": "10GiB"})

    def check_name(self, name: str) -> str | None:
        try:
            check_name(name)
        except InvalidInput as e:
            return e.message
        if self.vms.dir(name).exists():
            return f"A VM named '{name}' already exists."
        return None

    async def create_from_import(self, request: CreateRequest,
                                 say: Callable[[str], None]) -> Instance:
        raise NotImplementedError  # :class:`.vm_import.Importer`

    async def create_instance(self, request: CreateRequest,
                              progress: Callable[[str], None] | None = None) -> Instance:
        """Create a VM from a :class:`CreateRequest` through :meth:`create`, then start it
        when ``request.start``.

        Sources: ``disk-image`` (path in ``value``; option ``overlay`` yes/no, default yes),
        ``iso`` and ``pxe`` (a new empty disk: ``request.disk``, else 10GiB; 0 = none),
        ``kernel`` (options ``initrd``, ``cmdline``; a disk only when ``request.disk``).
        Memory must be a whole number of MiB. Options ``firmware`` (bios/uefi), ``accel``
        (auto/kvm/tcg) and ``description`` apply to all; ``allow_backing`` = ``yes`` is the
        user's agreement asked for by :class:`NeedsConfirmation`; ``format`` (raw, qcow2,
        vmdk, vdi, vhdx, vpc) says what a disk image is, instead of its header.

        If the VM was defined but does not start, it stays defined and
        :class:`OperationFailed` says "created, but could not start: …".

        Raises:
            InvalidInput: a value refused (nothing created).
            Conflict: the name is taken.
            OperationFailed: qemu-img failed (nothing left), or the start failed (see above).
        """
        say = progress or (lambda _text: None)
        name = request.name
        check_name(name)
        if self.vms.dir(name).exists():
            raise Conflict(f"A VM named '{name}' already exists.")
        source = request.source
        if source.kind == "vm-import":
            return await self.create_from_import(request, say)  # see .vm_import
        options = dict(request.options)
        cpus, memory_mib, disk = _request_checked(request, options, self._CREATE_OPTIONS)
        kwargs = _source_arguments(source, options)
        say("checking…")
        inst = await self.create(
            name, cpus=cpus, memory_mib=memory_mib, disk_gib=(disk or 0) / 1024**3,
            accel=options.get("accel", "auto").strip() or "auto",
            firmware=options.get("firmware", "bios").strip() or "bios",
            description=options.get("description", ""),
            network=request.network or "user", progress=say,
            allow_backing=options.get("allow_backing", "").strip().lower() == "yes",
            **kwargs)  # type: ignore[arg-type]
        self.vms.emit("instance-created", inst.ref)
        if request.start:
            say("starting…")
            try:
                await self.start(inst.ref)
            except BackendError as e:
                raise OperationFailed(f"{inst.ref} was created, but could not start: "
                                      f"{e.message}") from e
            inst = await self.vms.read_instance(name)
        return inst


def _refuse_unsafe_base(gated: GatedImage) -> None:
    """An overlay's base is opened again by QEMU at every start: it must be a file only
    root and this user can change, reached by a way only they can change."""
    who = who_can_change(gated.path)
    if who is None and writable_by_others(os.fstat(gated.fd)):
        who = f"the file {gated.path} may be written by other users"
    if who:
        raise InvalidInput(
            f"The image {gated.path} cannot be the base of an overlay: {who}, so it could "
            f"be changed or replaced after this check, and QEMU reads an overlay's base "
            f"again at every start. Make a copy instead (overlay=no), or move the image "
            f"to a directory only you can change.")


def _check_create(*, cpus: int, memory_mib: int, disk_gib: float, accel: str,
                  firmware: str, network: str, network_boot: bool,
                  files: dict[str, str]) -> None:
    """What :meth:`Create.create` refuses before anything is made (``files``: label ->
    path of the image, ISO, kernel and initrd given)."""
    if not 1 <= cpus <= (os.cpu_count() or 1) * 4:
        raise InvalidInput(f"CPUs must be from 1 to {(os.cpu_count() or 1) * 4}.")
    if memory_mib < 32:
        raise InvalidInput("Memory must be at least 32 MiB.")
    if accel not in ("auto", "kvm", "tcg"):
        raise InvalidInput("Accelerator must be kvm, tcg or auto.")
    if firmware not in ("bios", "uefi"):
        raise InvalidInput("Firmware must be bios or uefi.")
    for label, path in files.items():
        if path and not os.path.isfile(path):
            raise InvalidInput(f"The {label} {path} does not exist.")
    if files.get("initrd") and not files.get("kernel"):
        raise InvalidInput("An initrd needs a kernel.")
    if network not in ("user", "none"):
        raise InvalidInput(f"Network '{network}' is not possible: QEMU VMs here use user "
                           f"networking ('user') or no NIC ('none').")
    if network_boot and network == "none":
        raise InvalidInput("Network boot needs a NIC: choose user networking.")
    if disk_gib < 0:
        raise InvalidInput("The disk size cannot be negative.")


def _request_checked(request: CreateRequest, options: dict[str, str], known: tuple[str, ...]
                     ) -> tuple[int, int, int | None]:
    """What a QEMU VM cannot take refused in words; its CPUs, memory (MiB) and disk
    (bytes, None: the source's default)."""
    request.known_options(known, "a QEMU VM")
    if request.profiles:
        raise InvalidInput("QEMU VMs have no profiles.")
    if request.storage_pool:
        raise InvalidInput("QEMU VMs have no storage pools: disks live in the VM's "
                           "directory.")
    if request.user_data:
        raise InvalidInput("QEMU VMs here take no cloud-init user-data.")
    memory_mib = 512
    if request.memory is not None:
        if request.memory % (1 << 20):
            raise InvalidInput("Memory must be a whole number of MiB.")
        memory_mib = request.memory >> 20
    disk = request.disk
    if disk is None and request.source.kind in ("iso", "pxe"):
        disk = 10 * 1024**3
    if disk is not None and disk % 512:
        raise InvalidInput("The disk size must be a multiple of 512 bytes.")
    return (1 if request.cpus is None else request.cpus), memory_mib, disk


def _source_arguments(source: CreateSource, options: dict[str, str]) -> dict[str, object]:
    """The arguments of :meth:`Create.create` a wizard source stands for."""
    overlay = options.get("overlay", "yes").strip().lower()
    if overlay not in ("yes", "no"):
        raise InvalidInput("overlay is 'yes' (a qcow2 overlay) or 'no' (a copy).")
    path = os.path.expanduser(source.value.strip()) if source.value else ""
    what = {"disk-image": "a disk image", "iso": "an ISO", "kernel": "a kernel"}
    if source.kind != "pxe" and source.kind not in what:
        raise InvalidInput(f"A QEMU VM cannot be made from a '{source.kind}' source.")
    if source.kind != "pxe" and not path:
        raise InvalidInput(f"Give the path of {what[source.kind]}.")
    if source.kind != "kernel" and (options.get("initrd") or options.get("cmdline")):
        raise InvalidInput("initrd and cmdline go with a kernel source only.")
    if source.kind != "disk-image" and options.get("format"):
        raise InvalidInput("format goes with a disk image source only.")
    if source.kind == "pxe":
        return {"network_boot": True}
    if source.kind == "disk-image":
        return {"image": path, "overlay": overlay == "yes",
                "image_format": options.get("format", "").strip().lower()}
    if source.kind == "iso":
        return {"iso": path}
    initrd = options.get("initrd", "").strip()
    return {"kernel": path, "initrd": os.path.expanduser(initrd) if initrd else "",
            "cmdline": options.get("cmdline", "")}
