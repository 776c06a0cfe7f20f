"""Ending console servers that nobody can use any more: those of a deleted VM, and the
ones a VM left when it stopped (a screen server waiting for its next viewer does not
notice that QEMU went away: it only reads QEMU's socket while someone watches).

Light on purpose (no websockets): the QEMU backend sweeps at every connect and start.
A server is found by its socket's lock (held by the server while it runs, its pid
written in it, :mod:`.server`)."""

from __future__ import annotations

import fcntl
import os
import signal
import time
from pathlib import Path


def holder(sock: Path) -> int | None:
    """The pid of the console server serving ``sock`` (None: none runs)."""
    lock = Path(f"{sock}.lock")
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:  # held: a server runs
            try:
                pid = int(os.read(fd, 64).split()[0])
            except (ValueError, IndexError, OSError):
                return None
            return pid if _serves(pid, sock) else None
        return None
    finally:
        os.close(fd)


def _serves(pid: int, sock: Path) -> bool:
    """``pid`` is a console server of ``sock`` (not a pid reused by something else)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return os.fsencode(str(sock)) in argv and b"--socket" in argv


def end_servers(directory: Path, timeout: float = 5.0) -> list[int]:
    """Stop every console server whose socket is in ``directory`` (SIGTERM: each closes
    its viewers with the reason and exits); waits up to ``timeout`` s for them to go.
    Returns their pids."""
    if not directory.is_dir():
        return []
    pids = []
    for sock in sorted(directory.glob("*.ws")):
        pid = holder(sock)
        if pid is None:
            continue
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        pids.append(pid)
    deadline = time.monotonic() + timeout
    for sock in sorted(directory.glob("*.ws")):
        while holder(sock) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
    return pids
