"""The first listing of the local QEMU VMs, made before the backend connects: their
definitions are files, so the first frame can hold them. It also asks
``qemu-system-x86_64 --version`` (:mod:`backends.tool_version`), which the backend's
connection, which attaches to running VMs first, would otherwise ask on the event loop."""

from __future__ import annotations

import shutil
import subprocess

from .. import tool_version
from ..models import FirstListing, Remote, ServerInfo
from .definition import QEMU
from .machines import Machines


def first_listing(remote: Remote, timeout: float) -> FirstListing | None:
    """Every VM defined under the remote's directory (blocking), all stopped. None when
    one of them runs: whether it runs or is paused only its QMP monitor says, and the
    backend asks it."""
    binary = shutil.which(QEMU)
    if binary is not None:
        try:
            tool_version.ask(binary, "--version", timeout=timeout)
        except (OSError, subprocess.SubprocessError):
            pass  # the backend's connection says what is wrong
    vms = Machines(remote)
    names = vms.names()
    if any(vms.pid(name) is not None for name in names):
        return None
    return FirstListing(remote, ServerInfo(server="qemu", auth="local"),
                        tuple(vms.entry(name) for name in names))
