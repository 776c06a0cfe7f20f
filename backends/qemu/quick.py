"""The first listing of the local QEMU VMs, made before the backend connects: their
definitions are files, so the first frame can hold them (the backend's connection asks
``qemu-system-x86_64 --version`` and attaches to running VMs first)."""

from __future__ import annotations

from ..models import FirstListing, Remote, ServerInfo
from .machines import Machines


def first_listing(remote: Remote, timeout: float) -> FirstListing | None:
    """Every VM defined under the remote's directory (blocking), all stopped. None when
    one of them runs: whether it runs or is paused only its QMP monitor says, and the
    backend asks it."""
    vms = Machines(remote)
    names = vms.names()
    if any(vms.pid(name) is not None for name in names):
        return None
    return FirstListing(remote, ServerInfo(server="qemu", auth="local"),
                        tuple(vms.entry(name) for name in names))
