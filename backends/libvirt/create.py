"""Creating libvirt domains (``Capability.CREATE``): ``create_sources``, ``create_options``
and ``create_instance`` of a libvirt remote.

- Sources: a disk image on the libvirt host (a qcow2 overlay on it, or a qcow2 copy, as a
  new volume of a storage pool), an installer ISO (and a new empty disk; the CD boots
  first), a kernel with an initrd and a command line (direct kernel boot; a disk when a
  size is given), and an empty domain that boots from the network (PXE). Each says what
  the wizard asks for it (``SourceField``); its paths are on the libvirt host
  (``path="remote"``) and checked by the daemon (``domain_xml.host_file``).
- Disks are new qcow2 volumes of an active pool, made by the daemon (so the same works
  over ``qemu+ssh://``): ``<name>.qcow2``. NICs are virtio: a libvirt network, a host
  bridge (``bridge:NAME``), QEMU's user networking (``user``: NAT, nothing set up on the
  host) or none.
- The domain type is ``kvm`` where the daemon offers KVM, else ``qemu`` (TCG), unless the
  ``accel`` option chooses; UEFI is offered only where the daemon reports OVMF firmware.
- Every check is made before anything is made; then the volumes, the definition and
  (``request.start``) the start. If any of these fails, what was made is removed again
  (undefined, NVRAM and volumes deleted): nothing half made is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace
from typing import Callable

import libvirt

from ..base import Backend
from ..errors import Conflict, InvalidInput, OperationFailed
from ..models import Instance, InstanceRef, InstanceType
from ..create_models import CreateOptions, CreateRequest, CreateSource, SourceField
from ..units import format_size
from .connection import Connection
from .domain_xml import HostFacts, HostFile, Plan, domain_xml, host_facts, host_file, volume_xml
from .lifecycle import UNDEFINE
from .names import name_problem

MAKING = 6 * 3600
"""Seconds a creation may take (a copy of a large image)."""
OPTIONS = ("firmware", "accel", "overlay", "initrd", "cmdline", "description")
KINDS = ("disk-image", "iso", "kernel", "pxe")
MIN_MEMORY = 32 * 1024**2
DEFAULT_DISK = 10 * 1024**3
NO_UEFI = "; UEFI is not offered: this libvirt reports no UEFI firmware (OVMF)"
_UNDOING: set[asyncio.Future] = set()
"""Removals of cancelled creations under way (kept from the garbage collector)."""


def _firmware_field(facts: HostFacts) -> SourceField:
    if facts.uefi:
        return SourceField("firmware", "Firmware", choices=(
            ("bios", "BIOS (SeaBIOS)"), ("uefi", "UEFI (OVMF, without Secure Boot)")),
            default="bios")
    return SourceField("firmware", "Firmware", choices=(
        ("bios", "BIOS (SeaBIOS; no UEFI firmware on this host)"),), default="bios")


def _accel_field(facts: HostFacts) -> SourceField:
    if facts.kvm:
        return SourceField("accel", "Accelerator", choices=(
            ("auto", "auto: KVM (the host offers it)"), ("kvm", "KVM"),
            ("qemu", "TCG emulation (no KVM; slow)")), default="auto")
    return SourceField("accel", "Accelerator", choices=(
        ("auto", "auto: TCG emulation (the host offers no KVM)"),
        ("qemu", "TCG emulation")), default="auto")


def _path(label: str, placeholder: str, *, required: bool = True, key: str = "") -> SourceField:
    return SourceField(key, label, placeholder=f"{placeholder} (on the libvirt host)",
                       required=required, path="remote")


@dataclass
class _Made:
    """What a creation made so far (undone on failure)."""

    volumes: list[libvirt.virStorageVol] = field(default_factory=list)
    domain: libvirt.virDomain | None = None


class Create(Backend):
    """The launch wizard's verbs on a libvirt remote."""

    lv: Connection

    async def _new_facts(self, accel: str = "auto") -> HostFacts:
        """The host's facts for ``accel``; the daemon's domain capabilities are read once
        per connection (they change with its QEMU only)."""
        conn = await self.lv.live()
        known: tuple[object, dict] = getattr(self, "_known_domcaps", (None, {}))
        if known[0] is not conn:
            known = (conn, {})
            self._known_domcaps = known
        return await self.lv.call(host_facts, conn, accel, self.remote.name, known[1],
                                  what="reading the domain capabilities",
                                  within=max(self.timeout, 15))

    async def create_sources(self) -> list[CreateSource]:
        facts = await self._new_facts()
        firmware, accel, vm = _firmware_field(facts), _accel_field(facts), InstanceType.VM
        no_uefi = "" if facts.uefi else NO_UEFI
        return [
            CreateSource("disk-image", "Disk image (qcow2/raw) on the host — overlay or copy",
                         type=vm, fields=(
                             _path("Disk image", "/var/lib/libvirt/images/base.qcow2"),
                             SourceField("overlay", "New disk", choices=(
                                 ("yes", "a qcow2 overlay on the image (keep the image)"),
                                 ("no", "a qcow2 copy of the image")), default="yes"),
                             firmware, accel),
                         detail="a new volume in the storage pool: an overlay backed by the "
                                f"image, or a copy; a disk size grows it{no_uefi}"),
            CreateSource("iso", "Installer ISO on the host + empty disk", type=vm, fields=(
                _path("ISO", "/var/lib/libvirt/images/installer.iso"), firmware, accel),
                detail=f"boots the ISO from a CD drive first; the disk is a new empty volume"
                       f"{no_uefi}"),
            CreateSource("kernel", "Kernel + initrd + command line on the host", type=vm,
                         fields=(
                             _path("Kernel", "/var/lib/libvirt/boot/vmlinuz"),
                             _path("Initrd", "/var/lib/libvirt/boot/initrd.img",
                                   required=False, key="initrd"),
                             SourceField("cmdline", "Command line",
                                         placeholder="console=ttyS0", default="console=ttyS0"),
                             accel),
                         detail="direct kernel boot; a new empty disk when a size is given"),
            CreateSource("pxe", "Empty domain, network boot (PXE)", type=vm,
                         fields=(firmware, accel),
                         detail=f"boots from the network through its NIC; the disk is a new "
                                f"empty volume{no_uefi}"),
        ]

    async def create_options(self) -> CreateOptions:
        """Active storage pools (``default`` first), active libvirt networks, host bridges
        (``bridge:NAME``, from libvirt's host interfaces), ``user`` and ``none``."""
        # the facts first: the wizard asks for the sources at the same time, and a call
        # queued behind their (slow) first read would count that wait in its time-out
        facts = await self._new_facts()
        conn = await self.lv.live()

        def read() -> tuple[list[str], list[str], list[str]]:
            pools = sorted(p.name() for p in conn.listAllStoragePools(
                libvirt.VIR_CONNECT_LIST_STORAGE_POOLS_ACTIVE))
            nets = sorted(n.name() for n in conn.listAllNetworks(
                libvirt.VIR_CONNECT_LIST_NETWORKS_ACTIVE))
            bridges = []
            try:
                # all of them: a bridge without a port yet has no carrier, and libvirt
                # lists it as inactive (a new domain's NIC is what it waits for)
                ifaces = conn.listAllInterfaces(0)
            except libvirt.libvirtError:  # no interface driver there: no bridges offered
                ifaces = []
            for iface in ifaces:
                with contextlib.suppress(libvirt.libvirtError, ET.ParseError):
                    if ET.fromstring(iface.XMLDesc(0)).get("type") == "bridge":
                        bridges.append(f"bridge:{iface.name()}")
            return pools, nets, sorted(bridges)

        pools, nets, bridges = await self.lv.call(read, what="reading pools and networks")
        first = [n for n in ("default",) if n in nets]
        return CreateOptions(
            storage_pools=tuple(sorted(pools, key=lambda p: p != "default")),
            networks=(*first, *(n for n in nets if n not in first), *bridges, "user", "none"),
            max_cpus=facts.host_cpus, user_data=False, can_cancel=False,
            defaults={"cpus": "1", "memory": "1GiB", "disk": "10GiB"})

    async def create_instance(self, request: CreateRequest,
                              progress: Callable[[str], None] | None = None) -> Instance:
        """Create a domain (see the module docstring); with ``request.start``, start it.

        Options: ``firmware`` (bios/uefi), ``accel`` (auto/kvm/qemu), ``overlay`` (yes/no,
        a disk image's new disk), ``initrd`` and ``cmdline`` (a kernel source),
        ``description``.

        Raises:
            InvalidInput: a value refused, a file missing on the host (nothing made).
            Conflict: the name or the new volume's name is taken (nothing made).
            OperationFailed: libvirt failed to make, define or start it (nothing left).
        """
        say = progress or (lambda _text: None)
        options = dict(request.options)
        problem = name_problem(request.name)
        if problem:
            raise InvalidInput(problem)
        self._new_refused(request, options)
        say("checking…")
        facts = await self._new_facts(options.get("accel", "auto") or "auto")
        conn = await self.lv.live()
        loop = asyncio.get_running_loop()

        def told(text: str) -> None:
            loop.call_soon_threadsafe(say, text)

        job = asyncio.ensure_future(self.lv.call(
            self._new_domain, conn, request, options, facts, told,
            what=f"creating {request.name}", within=MAKING))
        try:
            await asyncio.shield(job)
        except asyncio.CancelledError:
            # the daemon's work cannot be stopped half way: what it makes is removed once
            # it is done, so a cancelled creation leaves nothing either
            job.add_done_callback(self._new_undo_later)
            raise
        ref = InstanceRef(self.remote.name, request.name)
        say("started" if request.start else "created")
        return await self.get_instance(ref)

    def _new_refused(self, request: CreateRequest, options: dict[str, str]) -> None:
        source = request.source
        if source.kind not in KINDS:
            raise InvalidInput(f"A libvirt domain cannot be made from a '{source.kind}' "
                               f"source (only {', '.join(KINDS)}).")
        request.known_options(OPTIONS, "a libvirt domain")
        if request.profiles:
            raise InvalidInput("libvirt domains have no profiles.")
        if request.user_data:
            raise InvalidInput("corral gives libvirt domains no cloud-init user-data.")
        if source.kind != "kernel" and (options.get("initrd") or options.get("cmdline")):
            raise InvalidInput("initrd and cmdline go with a kernel source only.")
        if options.get("firmware", "bios") not in ("bios", "uefi"):
            raise InvalidInput("The firmware is 'bios' or 'uefi'.")
        if source.kind == "kernel" and options.get("firmware", "bios") != "bios":
            raise InvalidInput("A direct kernel boot is made with BIOS firmware here.")
        if options.get("overlay", "yes") not in ("yes", "no"):
            raise InvalidInput("overlay is 'yes' (a qcow2 overlay on the image) or 'no' (a "
                               "copy).")
        if request.memory is not None and (request.memory < MIN_MEMORY
                                           or request.memory % 1024):
            raise InvalidInput(f"Memory must be at least {format_size(MIN_MEMORY)}, in whole "
                               f"KiB.")
        if request.disk is not None and request.disk < 0:
            raise InvalidInput("The disk size cannot be negative.")
        if not source.value.strip() and source.kind != "pxe":
            what = {"disk-image": "a disk image", "iso": "an ISO", "kernel": "a kernel"}
            raise InvalidInput(f"Give the path of {what[source.kind]} on the libvirt host.")

    # -- in the remote's thread ------------------------------------------------------------

    def _new_domain(self, conn: libvirt.virConnect, request: CreateRequest,
                    options: dict[str, str], facts: HostFacts,
                    say: Callable[[str], None]) -> _Made:
        """Check everything, then make the volumes, define and (maybe) start; undo all of it
        on any failure (blocks). Returns what it made."""
        host, name, kind = self.remote.name, request.name, request.source.kind
        try:
            conn.lookupByName(name)
            raise Conflict(f"A domain named '{name}' already exists on {host}.")
        except libvirt.libvirtError as e:
            if e.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
                raise
        firmware = options.get("firmware", "bios") or "bios"
        if firmware == "uefi" and not facts.uefi:
            raise InvalidInput(f"UEFI is not offered on {host}: its libvirt reports no UEFI "
                               f"firmware (OVMF) for {facts.domain_type} domains.")
        cpus = request.cpus or 1
        if not 1 <= cpus <= facts.max_vcpus:
            raise InvalidInput(f"vCPUs must be from 1 to {facts.max_vcpus} on {host}.")
        nic = self._new_nic(conn, request.network, needed=kind == "pxe")
        disk = request.disk
        if disk is None and kind in ("iso", "pxe"):
            disk = DEFAULT_DISK
        plan = Plan(name=name, cpus=cpus, memory_kib=(request.memory or 1024**3) // 1024,
                    firmware=firmware, nic=nic, description=options.get("description", ""))
        path = request.source.value.strip()
        with contextlib.ExitStack() as files:
            image = (files.enter_context(host_file(conn, path, "disk image", host))
                     if kind == "disk-image" else None)
            if kind == "iso":
                iso = files.enter_context(host_file(conn, path, "ISO", host))
                plan = replace(plan, cdrom=iso.path, boot=("cdrom", "hd"))
            elif kind == "kernel":
                kernel = files.enter_context(host_file(conn, path, "kernel", host))
                initrd = options.get("initrd", "").strip()
                if initrd:
                    initrd = files.enter_context(host_file(conn, initrd, "initrd", host)).path
                plan = replace(plan, kernel=kernel.path, initrd=initrd,
                               cmdline=options.get("cmdline", ""), boot=())
            elif kind == "pxe":
                plan = replace(plan, boot=("network", "hd"))
            if image is not None and disk and disk < image.capacity:
                raise InvalidInput(f"The disk must be at least as large as the image "
                                   f"({format_size(image.capacity)}): disks only grow.")
            pool = self._new_pool(conn, request.storage_pool) if (image or disk) else None
            made, stage = _Made(), "making its disk"
            try:
                if pool is not None:
                    volume = self._new_volume(pool, name, image, disk or 0,
                                              overlay=options.get("overlay", "yes") == "yes",
                                              say=say)
                    made.volumes.append(volume)
                    plan = replace(plan, disk=volume.path())
                say("defining…")
                stage = "defining it"
                made.domain = conn.defineXML(domain_xml(plan, facts))
                if request.start:
                    say("starting…")
                    stage = "starting it"
                    made.domain.create()
            except libvirt.libvirtError as e:
                _undo(made)
                raise OperationFailed(
                    f"{name} was not created on {host}: {stage} failed: "
                    f"{(e.get_error_message() or str(e)).strip()}. Nothing was kept.") from None
            except BaseException:
                _undo(made)
                raise
        return made

    def _new_undo_later(self, job: asyncio.Future) -> None:
        """A creation the caller stopped waiting for has ended: remove what it made."""
        if job.cancelled() or job.exception() is not None:
            return  # nothing was made (or it was undone already)
        task = asyncio.ensure_future(self.lv.call(_undo, job.result(),
                                                  what="removing a cancelled creation",
                                                  within=max(self.timeout, 120)))
        _UNDOING.add(task)
        task.add_done_callback(_UNDOING.discard)

    def _new_nic(self, conn: libvirt.virConnect, network: str, *, needed: bool
                 ) -> tuple[str, str] | None:
        host = self.remote.name
        networks = {n.name(): n for n in conn.listAllNetworks(0)}
        if network == "none":
            if needed:
                raise InvalidInput("A network boot needs a NIC: choose a network.")
            return None
        if network.startswith("bridge:") and network[7:]:
            return ("bridge", network[7:])
        if network == "":
            network = "default" if "default" in networks else "user"
        if network in networks:
            if not networks[network].isActive():
                raise InvalidInput(f"The libvirt network '{network}' on {host} is not active: "
                                   f"start it first (virsh net-start {network}).")
            return ("network", network)
        if network == "user":
            return ("user", "")
        raise InvalidInput(f"There is no libvirt network named '{network}' on {host} (a host "
                           f"bridge is 'bridge:NAME'; 'user' is QEMU's user networking).")

    def _new_pool(self, conn: libvirt.virConnect, name: str) -> libvirt.virStoragePool:
        host = self.remote.name
        active = {p.name(): p for p in conn.listAllStoragePools(
            libvirt.VIR_CONNECT_LIST_STORAGE_POOLS_ACTIVE)}
        if not name:
            if not active:
                raise InvalidInput(f"{host} has no active storage pool for the new disk: "
                                   f"define and start one (virsh pool-define-as NAME dir "
                                   f"--target DIR).")
            name = "default" if "default" in active else sorted(active)[0]
        if name not in active:
            raise InvalidInput(f"There is no active storage pool named '{name}' on {host}.")
        return active[name]

    def _new_volume(self, pool: libvirt.virStoragePool, name: str, image: HostFile | None,
                    disk: int, *, overlay: bool, say: Callable[[str], None]
                    ) -> libvirt.virStorageVol:
        """The domain's new qcow2 volume ``<name>.qcow2`` (blocks)."""
        vol_name = f"{name}.qcow2"
        pool.refresh(0)  # a file put there since it last looked: "taken" (libvirt would
        # refuse to write over it too, in its own words)
        try:
            pool.storageVolLookupByName(vol_name)
            raise Conflict(f"The storage pool '{pool.name()}' has a volume named {vol_name} "
                           f"already: choose another name, or delete that volume.")
        except libvirt.libvirtError as e:
            if e.get_error_code() != libvirt.VIR_ERR_NO_STORAGE_VOL:
                raise
        if image is None:
            say(f"creating a {format_size(disk)} disk in {pool.name()}…")
            return pool.createXML(volume_xml(vol_name, disk), 0)
        capacity = max(disk, image.capacity)
        if overlay and image.mode & 0o002:
            raise InvalidInput(f"{image.path} can be written by every user of the libvirt "
                               f"host, and an overlay's base is read again at every start: "
                               f"make a copy instead (overlay 'no'), or take that right "
                               f"away first (chmod o-w).")
        if overlay:
            say(f"creating an overlay on {image.path} in {pool.name()}…")
            return pool.createXML(volume_xml(vol_name, capacity, backing=image), 0)
        say(f"copying {image.path} into {pool.name()}…")
        volume = pool.createXMLFrom(volume_xml(vol_name, image.capacity), image.volume, 0)
        try:
            if capacity > image.capacity:
                volume.resize(capacity, 0)
        except BaseException:
            with contextlib.suppress(libvirt.libvirtError):
                volume.delete(0)
            raise
        return volume


def _undo(made: _Made) -> None:
    """Remove what a failed creation made: the domain (forced off, undefined with its
    NVRAM) and its new volumes (blocks)."""
    dom = made.domain
    if dom is not None:
        with contextlib.suppress(libvirt.libvirtError):
            if dom.isActive():
                dom.destroy()
        with contextlib.suppress(libvirt.libvirtError):
            dom.undefineFlags(UNDEFINE)
    for volume in made.volumes:
        with contextlib.suppress(libvirt.libvirtError):
            volume.delete(0)
