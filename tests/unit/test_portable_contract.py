"""The portable part of the backend contract (backends/portable.py): a backend declares
``portable`` exactly when it names a ``portable_format``, one that imports portable VMs
can create, and the real backends keep it (libvirt gives, QEMU takes)."""

from __future__ import annotations

from backends import backend_class
from backends.base import contract_problems
from backends.models import Capability
from backends.portable import PortableVM, portable_problems


def test_portable_needs_its_format_and_imports_need_create():
    class Declares:
        capabilities = frozenset({Capability.PORTABLE})
        portable_format = ""
        imports_portable = frozenset({"libvirt-domain"})

    assert portable_problems(Declares) == [
        "declares portable without a portable_format",
        "imports_portable needs create (the import is a create source)"]

    class Undeclared(Declares):
        capabilities = frozenset({Capability.CREATE})
        portable_format = "libvirt-domain"

    assert portable_problems(Undeclared) == [
        "has a portable_format but does not declare portable"]


def test_libvirt_gives_what_qemu_takes():
    libvirt, qemu = backend_class("libvirt"), backend_class("qemu")
    assert contract_problems(libvirt) == [] and contract_problems(qemu) == []
    assert Capability.PORTABLE in libvirt.capabilities
    assert libvirt.portable_format in qemu.imports_portable


def test_the_descriptor_is_written_privately_and_never_over_a_file(tmp_path):
    vm = PortableVM("d1", "libvirt-domain", b"<domain/>", ("/x.raw",))
    path = vm.write(str(tmp_path))
    assert path.endswith("/d1.xml") and open(path, "rb").read() == b"<domain/>"
    assert (tmp_path / "d1.xml").stat().st_mode & 0o777 == 0o600
    try:
        vm.write(str(tmp_path))
    except FileExistsError:
        pass
    else:
        raise AssertionError("an existing file was written over")
