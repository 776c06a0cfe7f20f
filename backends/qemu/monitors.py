"""QMP monitors shared by several corrals.

A QMP socket serves one client at a time: a second client's connection is queued by the
kernel and never greeted, so a second corral (another SSH session of the same user) used
to wait for a time-out and show the VM as unknown. corral therefore starts each QEMU with
:data:`MONITORS` QMP sockets (``qmp.sock``, ``qmp-1.sock`` …) and a corral *claims* one by
holding an exclusive ``flock`` on its ``.lock`` file for as long as it is connected; the
kernel drops the lock when that corral exits, however it exits. QMP sends every event to
every monitor, so each corral follows the VM's state on its own. The VGA console server
has its own monitor (``console-qmp.sock``) besides these.

Measured (QEMU 10.0, TCG, the test guest): with two or five monitors QEMU detaches in
0.04 s and its RSS is 204-210 MiB either way (the spread is the guest's, not the
monitors'). A broker in the console server would have been one more process on every
VM's control path; spare monitors cost nothing and need no process."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

MONITORS = 4
"""QMP sockets per VM: as many corrals can follow it at once."""


def socket_names() -> list[str]:
    return ["qmp.sock", *(f"qmp-{i}.sock" for i in range(1, MONITORS))]


def monitor_args(run: Path) -> list[str]:
    """The ``-qmp`` options of the monitors corral's backends claim."""
    out = []
    for name in socket_names():
        path = str(run / name).replace(",", ",,")  # QEMU option syntax: a comma is doubled
        out += ["-qmp", f"unix:{path},server=on,wait=off"]
    return out


def runtime_files() -> list[str]:
    return [*socket_names(), *(n.replace(".sock", ".lock") for n in socket_names())]


class Claim:
    """One claimed monitor: its socket and the lock held while it is used."""

    def __init__(self, socket: Path, fd: int) -> None:
        self.socket = socket
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1


def claim(run: Path, skip: set[str] | frozenset[str] = frozenset()) -> Claim | None:
    """A free monitor of the VM whose runtime directory is ``run``, other than those named
    in ``skip`` (None: all are taken, or the VM was started without them)."""
    for name in socket_names():
        sock = run / name
        if name in skip or not sock.exists():
            continue
        try:
            fd = os.open(run / name.replace(".sock", ".lock"),
                         os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        return Claim(sock, fd)
    return None
