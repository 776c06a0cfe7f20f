"""What the ``vm.json`` of an imported archive may say beyond its disks: an archive is
someone else's VM, and the files it names (ISO, kernel, initrd) are opened by QEMU on this
host, as the user running corral, and shown to the guest. A CD named
``/root/.ssh/id_ed25519`` would hand that key to whoever controls the guest.

A file named by an archive is accepted when it is an absolute, plain path to a regular file
that is **public** (readable by every user of this host: the file world-readable, every
directory above it world-searchable), or one that a VM defined here already uses (the same
host's own export brought back). Everything else is refused, naming the field and the
file. The other fields get bounds (boot order consistent with what the VM has, a kernel
command line of printable text, known disk limits).

This is judged once, at import, on the opened file. What a path leads to can change
later (a link or a file in a directory someone else controls, swapped to point at
``/etc/shadow``), so every start checks again on the descriptors QEMU is then given
(:func:`.host_paths.open_boot_files`)."""

from __future__ import annotations

import os

from ..errors import InvalidInput
from .definition import MAC_RE, VMDefinition
from .host_paths import NotRegular, open_regular, public_fd

BOOTS = ("disk", "cdrom", "network", "kernel")
IO_LIMITS = ("read_bps", "write_bps", "read_iops", "write_iops")


def reference_problem(value: str, trusted: set[str]) -> str | None:
    """Why a file named by an archive's ``vm.json`` is refused (None: acceptable)."""
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "holds control characters"
    if not os.path.isabs(value) or os.path.normpath(value) != value:
        return "is not an absolute, plain path"
    try:
        fd = open_regular(value)
    except NotRegular:
        return "is not a regular file"
    except OSError as e:
        return f"cannot be used ({e.strerror})"
    try:
        if value in trusted or os.readlink(f"/proc/self/fd/{fd}") in trusted:
            return None
        if not public_fd(fd):
            return ("is not readable by every user of this host, and no VM here uses it: "
                    "an archive may not hand a private file to its guest")
    finally:
        os.close(fd)
    return None


def check_imported(d: VMDefinition, path: str, trusted: set[str]) -> None:
    """Refuse an archive whose ``vm.json`` (already type-checked) names files or values a
    VM imported here may not have. ``trusted``: the files the VMs here already use.

    Raises:
        InvalidInput: in words, naming the field.
    """
    def refuse(why: str) -> None:
        raise InvalidInput(f"{path} was not imported: its vm.json {why}.")

    for label in ("iso", "kernel", "initrd"):
        value = getattr(d, label)
        if value:
            problem = reference_problem(value, trusted)
            if problem:
                refuse(f"names the {label} {value!r}, which {problem}")
    if d.initrd and not d.kernel:
        refuse("names an initrd without a kernel")
    if d.cmdline and not d.kernel:
        refuse("has a kernel command line without a kernel")
    if len(d.cmdline) > 4096 or not d.cmdline.isprintable():
        refuse("has a kernel command line that is not a line of printable text")
    if d.boot not in BOOTS:
        refuse(f"boots from {d.boot!r} (one of {', '.join(BOOTS)})")
    needs = {"kernel": d.kernel, "cdrom": d.iso, "disk": d.disks, "network":
             d.network == "user"}
    if not needs[d.boot]:
        refuse(f"boots from its {d.boot}, which it does not have")
    if d.mac and not MAC_RE.match(d.mac):
        refuse(f"has the MAC address {d.mac!r}")
    if not d.cpus <= d.max_cpus <= 1024 or not 0 <= d.memory_target_mib <= d.memory_mib:
        refuse("has CPU or memory figures out of bounds")
    for key, value in d.io_limits.items():
        if key not in IO_LIMITS or not isinstance(value, int) or isinstance(value, bool) \
                or value < 0:
            refuse(f"has the disk limit {key!r} = {value!r}")
