"""Directories whose entries are followed without polling: the kernel's inotify.

The local backends learn of what is done outside corral from directories: a VM defined or
removed (the QEMU VMs' directory), a VM started by another corral (a new ``qemu.pid`` in
its runtime directory), a container created or destroyed with the ``lxc-*`` tools (the
lxcpath). :class:`DirWatch` wakes its owner when an entry of a watched directory appears,
goes or is renamed, and costs nothing meanwhile: no timer, no ``stat`` every few seconds.

Where inotify cannot be had (its per-user limit reached, a kernel without it) it says so
(:attr:`DirWatch.polling`) and compares the directories' modification times every
``every`` seconds instead, which notices the same changes later.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import errno
import os
import struct
from pathlib import Path

IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_ONLYDIR = 0x01000000
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
ENTRIES = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO
"""An entry of the directory appeared, went, or was renamed: what changes its mtime."""

_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)
_libc = None


def _inotify():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        _libc.inotify_init1.argtypes = [ctypes.c_int]
        _libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    return _libc


class DirWatch:
    """Watch directories (:meth:`add`); :meth:`changed` waits until an entry of one of them
    changed and says where. One inotify descriptor for all of them; :meth:`close` it."""

    def __init__(self, every: float = 2.0) -> None:
        self.every = every
        self._fd = -1
        self._paths: dict[int, Path] = {}
        self._mtimes: dict[Path, int | None] = {}
        self.polling = ""
        """Why the directories are compared every ``every`` seconds instead ("": they are
        not: inotify follows them)."""
        try:
            libc = _inotify()
            fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
            if fd < 0:
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
            self._fd = fd
        except (OSError, AttributeError) as e:
            self.polling = f"inotify is not available ({e})"

    def add(self, path: Path, mask: int = ENTRIES, *, even_missing: bool = False) -> bool:
        """Follow the entries of directory ``path`` (``mask``: which changes); False when it
        cannot be (it is gone, or is no directory). ``even_missing``: a directory that does
        not exist yet is looked for every ``every`` seconds, and its coming is a change."""
        path = Path(path)
        if self._fd >= 0:
            wd = _inotify().inotify_add_watch(self._fd, os.fsencode(path), mask | IN_ONLYDIR)
            if wd >= 0:
                self._paths[wd] = path
                return True
            code = ctypes.get_errno()
            if code in (errno.ENOSPC, errno.ENOMEM):
                self.polling = f"inotify: {os.strerror(code)} (its per-user limit of watches)"
            elif not even_missing:
                return False  # gone, or not a directory
        self._mtimes.setdefault(path, _mtime(path))
        return self._mtimes[path] is not None

    async def changed(self) -> set[Path]:
        """Wait until an entry of a watched directory changes: the paths of the entries
        that did (a watched directory's own path when only its mtime says so: after an
        overflow of the kernel's queue, or when polling)."""
        while True:
            found = self._read() if self._fd >= 0 else set()
            found |= self._compare()
            if found:
                return found
            if self._fd < 0:
                await asyncio.sleep(self.every)
            else:
                await self._readable()

    def _compare(self) -> set[Path]:
        found = set()
        for path, before in self._mtimes.items():
            now = _mtime(path)
            if now != before:
                self._mtimes[path] = now
                found.add(path)
        return found

    async def _readable(self) -> None:
        loop, fd = asyncio.get_running_loop(), self._fd
        ready: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(fd, readable)
        try:
            if self._mtimes:  # some directories are polled beside: wake up for them too
                await asyncio.wait_for(asyncio.shield(ready), self.every)
            else:
                await ready
        except asyncio.TimeoutError:
            pass
        finally:
            if self._fd == fd:  # (not closed meanwhile: close() removed it then)
                loop.remove_reader(fd)

    def _read(self) -> set[Path]:
        found: set[Path] = set()
        while True:
            try:
                data = os.read(self._fd, 64 * 1024)
            except BlockingIOError:
                return found
            except OSError:
                return found or set(self._paths.values())
            offset = 0
            while offset + _EVENT.size <= len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                name = data[offset + _EVENT.size:offset + _EVENT.size + length].rstrip(b"\0")
                offset += _EVENT.size + length
                if mask & IN_Q_OVERFLOW:
                    found |= set(self._paths.values())  # some were lost: all may have changed
                elif mask & IN_IGNORED:  # the directory went (its watch with it)
                    if wd in self._paths:
                        found.add(self._paths.pop(wd))
                elif wd in self._paths:
                    base = self._paths[wd]
                    found.add(base / os.fsdecode(name) if name else base)

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            try:
                asyncio.get_running_loop().remove_reader(fd)
            except RuntimeError:  # (no loop running: none waits on it)
                pass
            os.close(fd)


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None
