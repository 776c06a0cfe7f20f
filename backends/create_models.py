"""What the launch wizard and a backend's ``create_instance`` exchange: the sources an
instance can be created from, the fields each asks for, what a remote offers, and the
request the summary step hands over."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from .errors import InvalidInput
from .models import InstanceType


@dataclass(frozen=True, slots=True)
class SourceField:
    """One thing the launch wizard asks about a :class:`CreateSource` (its path, an initrd,
    a kernel command line, the firmware…). The source describes its own fields; the wizard
    draws them in order and knows nothing of source kinds."""

    key: str
    """Where the answer goes: ``""`` is the source's own ``value`` (a path, say); any other
    key is an entry of ``CreateRequest.options``."""
    label: str
    placeholder: str = ""
    """What to type, shown in the empty field."""
    required: bool = False
    """An empty answer keeps the step from being done."""
    path: str = ""
    """``local``: a file on the machine corral runs on (the wizard expands ``~`` and checks
    it exists and is a regular file, or a folder for a source that reads one: no device,
    pipe or socket); ``remote``: a path on the remote's own host (passed as typed: the
    backend checks it); ``""``: not a path."""
    choices: tuple[tuple[str, str], ...] = ()
    """``(value, label)`` pairs: the field is a choice among them (then ``default`` or the
    first is chosen at first)."""
    default: str = ""


@dataclass(frozen=True, slots=True)
class CreateSource:
    """Something an instance can be created from, as the launch wizard lists it."""

    kind: str
    """``image`` (LXD image: fingerprint or alias in ``value``), ``empty-vm`` (LXD VM with
    no disk content, for PXE/ISO), ``disk-image`` (QEMU: a disk file to overlay/copy),
    ``iso`` (QEMU: installer ISO + empty disk), ``kernel`` (QEMU: kernel + initrd +
    command line), ``pxe`` (QEMU: empty VM booting from the network), ``template`` (LXC
    template name), ``tarball`` (LXC: an LXD-style image tarball path)."""
    label: str
    value: str = ""
    type: InstanceType = InstanceType.CONTAINER
    """What gets created from it."""
    detail: str = ""
    preview: bool = False
    """The wizard asks ``preview_source`` about it before the summary (see
    :mod:`backends.create_preview`)."""
    cancellable: bool = False
    """A creation from it can be cancelled (also where ``CreateOptions.can_cancel`` is
    not set)."""
    fields: tuple[SourceField, ...] = ()
    """What the wizard asks for this source, in order (see :class:`SourceField`)."""


@dataclass(frozen=True, slots=True)
class CreateOptions:
    """What a remote offers for the wizard's resources/network/storage steps."""

    profiles: tuple[str, ...] = ()
    default_profiles: tuple[str, ...] = ()
    storage_pools: tuple[str, ...] = ()
    networks: tuple[str, ...] = ()
    """Networks (LXD) or bridges (QEMU/LXC) a NIC can join; empty: none offered."""
    max_cpus: int = 0
    """CPU count limit (the host's), 0 when unknown."""
    user_data: bool = False
    """cloud-init user-data is accepted."""
    can_cancel: bool = False
    """A running creation can be cancelled."""
    defaults: Mapping[str, str] = field(default_factory=dict)
    """Suggested values: ``cpus``, ``memory`` (e.g. ``1GiB``), ``disk`` (``10GiB``)."""


@dataclass(frozen=True, slots=True)
class CreateRequest:
    """Everything the summary step shows, handed to ``create_instance``."""

    name: str
    source: CreateSource
    cpus: int | None = None
    memory: int | None = None
    """Bytes."""
    disk: int | None = None
    """Bytes (root disk size)."""
    profiles: tuple[str, ...] = ()
    storage_pool: str = ""
    network: str = ""
    """A network/bridge to attach a NIC to ("" = backend default, "none" = no NIC)."""
    user_data: str = ""
    start: bool = False
    options: Mapping[str, str] = field(default_factory=dict)
    """Backend-specific: QEMU ``initrd``, ``cmdline``, ``firmware`` (bios/uefi), ``accel``,
    ``overlay`` ("yes"/"no"); LXD ``description``, ``target`` (on a cluster: a member or
    ``@group``; empty: the cluster places it)."""

    def known_options(self, known: tuple[str, ...], what: str) -> dict[str, str]:
        """:attr:`options`, when every one is among ``known`` (what ``what``, e.g. "a
        QEMU VM", takes); else refused in words naming the unknown ones and the known."""
        unknown = sorted(set(self.options) - set(known))
        if unknown:
            raise InvalidInput(f"Unknown option(s) for {what}: {', '.join(unknown)} "
                               f"(known: {', '.join(known) or 'none'}).")
        return dict(self.options)
