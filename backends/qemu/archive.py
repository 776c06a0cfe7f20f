"""Moving big files in a worker thread (:func:`backends.work.in_thread`): copies and tar
archives report progress to the loop and stop promptly when the awaiting task is
cancelled."""

from __future__ import annotations

import io
import os
import tarfile
import time
from pathlib import Path
from typing import Callable

from ..archive import ArchiveRefused, Policy
from ..archive import read_archive as shared_read
from ..paths import private_file
from ..work import Worker

CHUNK = 4 << 20


def copy_file(worker: Worker, src: str, dst: str, label: str) -> None:
    """Copy ``src`` to a new file ``dst`` (holes stay holes), reporting ``label N%``."""
    total = os.path.getsize(src)
    done = 0
    with open(src, "rb") as fin, open(dst, "xb") as fout:
        while True:
            worker.check()
            chunk = fin.read(CHUNK)
            if not chunk:
                break
            if chunk.count(0) == len(chunk):
                fout.seek(len(chunk), os.SEEK_CUR)
            else:
                fout.write(chunk)
            done += len(chunk)
            worker.percent(label, done, total)
        fout.truncate(done)
    os.chmod(dst, os.stat(src).st_mode & 0o7777)


class _Reader(io.RawIOBase):
    """A file read by tarfile, counting for progress and stopping on cancel."""

    def __init__(self, f, worker: Worker, label: str, total: int) -> None:
        self.f, self.worker, self.label, self.total, self.done = f, worker, label, total, 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        self.worker.check()
        data = self.f.read(n)
        self.done += len(data)
        self.worker.percent(self.label, self.done, self.total)
        return data


def write_archive(worker: Worker, target: str, members: list[tuple[str, str | bytes]],
                  compress: bool) -> None:
    """Write a new tar (gzip when ``compress``) at ``target``: each member is a file path
    or bytes. Owners are 0/root; modes come from the files."""
    with private_file(target) as raw:
        mode = "w:gz" if compress else "w"
        with tarfile.open(fileobj=raw, mode=mode, format=tarfile.PAX_FORMAT) as tar:
            for arcname, source in members:
                worker.check()
                if isinstance(source, bytes):
                    info = tarfile.TarInfo(arcname)
                    info.size, info.mode = len(source), 0o644
                    info.mtime = int(time.time())
                    tar.addfile(info, io.BytesIO(source))
                    continue
                info = tar.gettarinfo(source, arcname)
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                with open(source, "rb") as f:
                    tar.addfile(info, _Reader(f, worker, f"writing {arcname}", info.size))
        raw.flush()
        os.fsync(raw.fileno())


DamagedArchive = ArchiveRefused
"""The archive cannot be read as a tar, or a member is not allowed (message in words)."""


class _VMArchive(Policy):
    """A VM export: plain files at the top only; ``keep`` ones held in memory."""

    where = "the VM's directory"

    def __init__(self, allowed: Callable[[str], bool], keep: set[str]) -> None:
        self.allowed, self.keep_names = allowed, keep

    def check(self, name: str, member: tarfile.TarInfo) -> str | None:
        if "/" in name or not self.allowed(name):
            return f"it holds an unexpected member '{member.name}'"
        if not member.isreg():
            return f"its member '{member.name}' is not a plain file"
        return None

    def keep(self, name: str) -> bool:
        return name in self.keep_names


def read_archive(worker: Worker, path: str, into: Path, allowed: Callable[[str], bool],
                 keep_in_memory: set[str]) -> dict[str, bytes]:
    """Extract the regular files of the tar ``path`` into ``into`` with the one archive
    reader (:mod:`backends.archive`), refusing any member that ``allowed`` refuses, any
    link, device or directory, and duplicates. Members named in ``keep_in_memory`` are
    returned instead of written.

    Raises:
        DamagedArchive: unreadable, or a member not allowed (message in words).
    """
    return shared_read(worker, path, into, _VMArchive(allowed, keep_in_memory),
                       label="reading the archive")
