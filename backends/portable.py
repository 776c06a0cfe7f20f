"""A stopped VM handed from one backend to another: :class:`PortableVerbs` is the part of
the backend contract by which a backend that declares
:attr:`~backends.models.Capability.PORTABLE` gives a :class:`PortableVM` - the VM's own
description in a format named by ``portable_format`` (``libvirt-domain``: its domain
XML) whose disks are files this process may read. A backend whose
``imports_portable`` names that format makes a VM from it through its create source of
kind :data:`IMPORT_SOURCE` (the launch wizard's "Import a VM…"), reading the disks and
never writing them, so the original stays as it was. A base of
:class:`~backends.base.Backend`; the default raises
:class:`~backends.errors.Unsupported`."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from .errors import Unsupported
from .models import Capability, InstanceRef

IMPORT_SOURCE = "vm-import"
"""The kind of the create source that takes a written :class:`PortableVM` as its path."""

DESCRIPTOR_SUFFIX = {"libvirt-domain": ".xml"}


@dataclass(frozen=True, slots=True)
class PortableVM:
    """A stopped VM as another backend can read it."""

    name: str
    format: str
    """What ``descriptor`` is: ``libvirt-domain`` (a domain XML, as ``virsh dumpxml``)."""
    descriptor: bytes
    disks: tuple[str, ...]
    """The absolute paths of its disk files, as the descriptor names them (readable here)."""

    def write(self, directory: str) -> str:
        """Write the descriptor into ``directory`` (private to the caller); its path."""
        path = Path(directory) / f"{self.name}{DESCRIPTOR_SUFFIX.get(self.format, '')}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(self.descriptor)
        return str(path)


class PortableVerbs:
    """The portable part of the backend contract."""

    portable_format: ClassVar[str] = ""
    """The format of the :class:`PortableVM` ``portable_vm`` gives (with ``portable``)."""
    imports_portable: ClassVar[frozenset[str]] = frozenset()
    """Formats this backend makes VMs from (through its :data:`IMPORT_SOURCE` source)."""

    _unsupported: Callable[[str], Unsupported]
    """Provided by :class:`~backends.base.Backend`."""

    async def portable_vm(self, ref: InstanceRef) -> PortableVM:
        """The stopped VM ``ref`` as a :class:`PortableVM`; nothing of it is changed.

        Raises:
            InvalidInput: it is running (its disks would change under the copy), or its
                disks are not files readable here (a remote host's, a pool's volumes).
            NotFound: it does not exist.
        """
        raise self._unsupported("describe a VM for another backend")


def portable_problems(cls: type[PortableVerbs]) -> list[str]:
    """How ``cls`` breaks the portable part of the contract (``contract_problems``)."""
    problems = []
    declared = Capability.PORTABLE in getattr(cls, "capabilities", ())
    if declared != bool(cls.portable_format):
        problems.append("declares portable without a portable_format" if declared else
                        "has a portable_format but does not declare portable")
    if cls.imports_portable and Capability.CREATE not in getattr(cls, "capabilities", ()):
        problems.append("imports_portable needs create (the import is a create source)")
    return problems
