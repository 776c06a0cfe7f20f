"""The serial log a QEMU chardev appends to (``logfile=…,logappend=on``) in the runtime
directory, a tmpfs: kept bounded. QEMU never trims it, so a guest printing without end
would fill the host's memory.

When the log grows past :data:`SERIAL_LOG_MAX`, its last :data:`KEEP` bytes move to
``serial.log.prev`` and the log is truncated; QEMU opened it with ``O_APPEND`` and goes on
writing at the new end. History readers take ``.prev`` and then the log. Output written in
the instant between reading the tail and truncating is lost (a few bytes of a flood).
Trimming is serialised by a lock on the log, so the console server and corral may both
call :func:`trim`."""

from __future__ import annotations

import contextlib
import fcntl
import os

SERIAL_LOG_MAX = 4 << 20
"""Bytes the serial log may reach before it is trimmed (the default of QEMU's
``[qemu] serial_log_mib``)."""
KEEP = 1 << 20
"""Bytes of the log's end kept in ``.prev`` (more than the console history shows), at
most a quarter of the limit."""
SERIAL_LOG_MIN = 64 << 10
"""The smallest limit: below it a trim would keep less than the console's history."""


def check_every(limit: int) -> int:
    """Bytes of output between two looks at the log's size (a ``stat``): at most 1 MiB,
    a quarter of ``limit`` for a smaller one, so the log stays under 1.25 × ``limit``."""
    return min(1 << 20, max(limit // 4, 4096))


def trim(path: str, limit: int = SERIAL_LOG_MAX, keep: int | None = None) -> bool:
    """Trim the log at ``path`` when it is over ``limit``; whether it was trimmed. Its
    last ``keep`` bytes (default :data:`KEEP`, at most a quarter of ``limit``) go to
    ``.prev``."""
    keep = min(KEEP, limit // 4) if keep is None else keep
    try:
        if os.stat(path).st_size <= limit:
            return False
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # somebody else trims it right now
        size = os.fstat(fd).st_size
        if size <= limit:
            return False
        tail = os.pread(fd, keep, max(0, size - keep))
        tmp = f"{path}.prev.{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(tail)
        os.replace(tmp, path + ".prev")
        os.ftruncate(fd, 0)
        return True
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(f"{path}.prev.{os.getpid()}")
        return False
    finally:
        os.close(fd)


def read_tail(path: str, limit: int) -> bytes:
    """The last ``limit`` bytes of the log, ``.prev`` included."""
    out = b""
    for name in (path, path + ".prev"):
        if len(out) >= limit:
            break
        try:
            with open(name, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                want = limit - len(out)
                f.seek(max(0, size - want))
                out = f.read(want) + out
        except OSError:
            continue
    return out
