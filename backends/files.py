"""Whole trees between the host and an instance, over any backend with ``FILES``.

Built on the three verbs of the contract (``list_files``, ``read_file``, ``write_file``):
directories are walked here, symlinks are copied as symlinks (their target as stored,
never followed), devices and sockets are skipped and counted, and mode and owner are kept
both ways (a pulled owner only when corral runs as root, as ``cp -a`` would).
"""

from __future__ import annotations

import os
import posixpath
import stat
from dataclasses import dataclass, field
from typing import Callable

from .base import Backend
from .errors import InvalidInput, OperationFailed
from .models import FileEntry, InstanceRef
from .units import human_size

Progress = Callable[[str], None]


@dataclass
class Tally:
    """What a transfer did so far (its ``text`` is the progress shown)."""

    files: int = 0
    directories: int = 0
    links: int = 0
    bytes: int = 0
    skipped: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        parts = [f"{self.files} file{'s' * (self.files != 1)} ({human_size(self.bytes)})"]
        if self.directories:
            parts.append(f"{self.directories} director{'ies' if self.directories != 1 else 'y'}")
        if self.links:
            parts.append(f"{self.links} symlink{'s' * (self.links != 1)}")
        if self.skipped:
            parts.append(f"{len(self.skipped)} skipped (not a file, directory or symlink)")
        return ", ".join(parts)

    def file_progress(self, progress: Progress) -> Callable[[int], None]:
        """The byte callback for one more file: ``n`` bytes of it moved so far are added
        to what earlier files moved, and the new ``text`` goes to ``progress``."""
        base = self.bytes

        def moved(n: int) -> None:
            self.bytes = base + n
            progress(self.text)

        return moved


def _os_error(e: OSError, path: str) -> OperationFailed:
    why = {13: "permission denied", 28: "no space left", 17: "it exists already",
           30: "read-only file system"}.get(e.errno or 0, e.strerror or str(e))
    return OperationFailed(f"{path}: {why}.")


async def pull(backend: Backend, ref: InstanceRef, entry: FileEntry, local_dir: str,
               progress: Progress = lambda _t: None) -> Tally:
    """Copy ``entry`` (a file, a symlink or a whole directory) into ``local_dir``.

    Raises:
        InvalidInput: the target exists already (nothing is overwritten).
        OperationFailed, NotFound: in words; what was copied so far stays.
    """
    target = os.path.join(local_dir, entry.name)
    if os.path.lexists(target):
        raise InvalidInput(f"{target} exists already; choose another folder or remove it.")
    tally = Tally()
    await _pull(backend, ref, entry, target, tally, progress)
    return tally


async def _pull(backend: Backend, ref: InstanceRef, entry: FileEntry, target: str,
                tally: Tally, progress: Progress) -> None:
    # What lands on the host is the puller's, with permission bits only: a container's
    # owners (its uid 1000 is a host user's) and setuid/setgid/sticky bits stay inside.
    try:
        if entry.kind == "file":
            await backend.read_file(ref, entry, target, tally.file_progress(progress))
            tally.files += 1
        elif entry.kind == "symlink":
            os.symlink(entry.target, target)
            tally.links += 1
        elif entry.kind == "directory":
            os.mkdir(target, 0o700)
            tally.directories += 1
            for child in await backend.list_files(ref, entry.path):
                await _pull(backend, ref, child, os.path.join(target, child.name), tally,
                            progress)
            os.chmod(target, entry.mode & 0o777)
        else:
            tally.skipped.append(entry.path)
            return
    except OSError as e:
        raise _os_error(e, target) from None
    progress(tally.text)


def local_entry(path: str, remote_path: str) -> FileEntry:
    """What ``path`` on the host becomes inside the instance (its mode and owner)."""
    st = os.lstat(path)
    mode, uid, gid = stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid
    if stat.S_ISLNK(st.st_mode):
        return FileEntry(remote_path, "symlink", 0, 0o777, uid, gid, os.readlink(path))
    if stat.S_ISDIR(st.st_mode):
        return FileEntry(remote_path, "directory", 0, mode, uid, gid)
    if stat.S_ISREG(st.st_mode):
        return FileEntry(remote_path, "file", st.st_size, mode, uid, gid)
    return FileEntry(remote_path, "other", 0, mode, uid, gid)


async def push(backend: Backend, ref: InstanceRef, local: str, remote_dir: str,
               progress: Progress = lambda _t: None) -> Tally:
    """Copy the host's file, symlink or directory ``local`` into ``remote_dir``.

    Raises:
        InvalidInput: ``local`` does not exist.
        OperationFailed: refused by the instance (permission, no space), in words.
    """
    local = os.path.normpath(os.path.expanduser(local))
    if not os.path.lexists(local):
        raise InvalidInput(f"{local} does not exist.")
    tally = Tally()
    await _push(backend, ref, local, posixpath.join(remote_dir, os.path.basename(local)),
                tally, progress)
    return tally


async def _push(backend: Backend, ref: InstanceRef, local: str, remote: str, tally: Tally,
                progress: Progress) -> None:
    try:
        entry = local_entry(local, remote)
    except OSError as e:
        raise _os_error(e, local) from None
    if entry.kind == "other":
        tally.skipped.append(local)
        return
    if entry.kind == "file":
        if not os.access(local, os.R_OK):
            raise OperationFailed(f"{local}: permission denied.")
        await backend.write_file(ref, entry, local, tally.file_progress(progress))
        tally.files += 1
    elif entry.kind == "symlink":
        await backend.write_file(ref, entry)
        tally.links += 1
    else:
        await backend.write_file(ref, entry)
        tally.directories += 1
        try:
            names = sorted(os.listdir(local))
        except OSError as e:
            raise _os_error(e, local) from None
        for name in names:
            await _push(backend, ref, os.path.join(local, name), posixpath.join(remote, name),
                        tally, progress)
    progress(tally.text)
