"""Files of LXC containers, through the host's view of their root file system.

A running container is seen through ``/proc/<init pid>/root`` (its mounts included); a
stopped one through its ``dir`` rootfs (``lxc.rootfs.path``, opened by a walk nobody
else could redirect). Either way every path is opened beneath a descriptor of that root
by :mod:`backends.rootfs` (``openat2`` with ``RESOLVE_IN_ROOT``), so it resolves as the
container would resolve it and never leads out, whatever the container's root changes
meanwhile; only regular files are read or replaced. Owners are shown and written as the
container sees them, through its ``lxc.idmap`` (an unprivileged container's root is
host uid 100000, say).
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import stat

from ..base import Backend
from ..errors import InvalidInput, OperationFailed
from ..models import FileEntry, InstanceRef
from ..rootfs import Root, open_process_root, open_root, words
from ..work import Worker, in_thread
from . import parse
from .tools import LXCTools

_CHUNK = 1 << 20


class IdMap:
    """``lxc.idmap = u|g <container start> <host start> <count>`` lines, both ways."""

    def __init__(self, config: str) -> None:
        self.ranges: dict[str, list[tuple[int, int, int]]] = {"u": [], "g": []}
        for line in config.splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "lxc.idmap":
                parts = value.split()
                if len(parts) == 4 and parts[0] in self.ranges:
                    self.ranges[parts[0]].append((int(parts[1]), int(parts[2]),
                                                  int(parts[3])))

    def inside(self, kind: str, host: int) -> int:
        """The container's id for a host id (65534, nobody, when unmapped)."""
        if not self.ranges[kind]:
            return host
        for ns, start, count in self.ranges[kind]:
            if start <= host < start + count:
                return ns + host - start
        return 65534

    def outside(self, kind: str, inner: int) -> int:
        """The host id a container id is stored as."""
        if not self.ranges[kind]:
            return inner
        for ns, start, count in self.ranges[kind]:
            if ns <= inner < ns + count:
                return start + inner - ns
        raise InvalidInput(f"{'uid' if kind == 'u' else 'gid'} {inner} is not mapped in "
                           f"this container.")


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    return "symlink" if stat.S_ISLNK(mode) else "other"


def _write_all(fd: int, data: bytes) -> None:
    """``os.write`` until all of ``data`` is written (a short write is how a full disk
    first shows; the next write raises ENOSPC)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class Files(Backend):
    """``list_files``, ``read_file``, ``write_file`` on the host's view of the rootfs."""

    lxc: LXCTools

    async def _root(self, ref: InstanceRef) -> tuple[Root, IdMap]:
        """A descriptor of the container's root (the caller closes it) and its id map."""
        self.lxc.require(ref)
        try:
            config = self.lxc.config(ref.name)
        except OSError as e:
            raise OperationFailed(f"Cannot read the config of {ref}: {e.strerror}.") from None
        ids = IdMap(config)
        pid = await self._pid(ref)
        if pid:
            root, proc = await in_thread(lambda _w: open_process_root(int(pid)))
            try:
                # the descriptor pins the process it was opened for: still the container's
                # init (and alive) now means it was then
                same = await self._pid(ref) == pid
                try:
                    os.stat("stat", dir_fd=proc)
                except OSError:
                    same = False
                if not same:
                    raise OperationFailed(f"{ref} restarted while its files were opened; "
                                          f"try again.")
            except BaseException:
                root.close()
                raise
            finally:
                os.close(proc)
            return root, ids
        rootfs = parse.config_value(config, "lxc.rootfs.path") or ""
        if rootfs.startswith("dir:"):
            rootfs = rootfs[4:]
        if rootfs.startswith("/") and os.path.isdir(rootfs):
            return await in_thread(lambda _w: open_root(rootfs)), ids
        shown = rootfs or "not set"
        raise OperationFailed(f"{ref} is stopped and its root file system ({shown}) is not "
                              f"a plain directory: start it to see its files.")

    async def _pid(self, ref: InstanceRef) -> str:
        rc, out, _ = await self.lxc.run("lxc-info", "-n", ref.name, "-p", "-H")
        pid = out.strip()
        return pid if rc == 0 and pid.isdigit() else ""

    async def list_files(self, ref: InstanceRef, path: str) -> list[FileEntry]:
        root, ids = await self._root(ref)

        def _do(worker: Worker) -> list[FileEntry]:
            out = []
            for item in root.listdir(path):
                worker.check()
                st = item.st
                out.append(FileEntry(posixpath.join(path, item.name), _kind(st.st_mode),
                                     st.st_size, stat.S_IMODE(st.st_mode),
                                     ids.inside("u", st.st_uid), ids.inside("g", st.st_gid),
                                     item.target))
            return out

        try:
            return await in_thread(_do)
        finally:
            root.close()

    async def read_file(self, ref: InstanceRef, entry: FileEntry, local: str,
                        progress=None) -> None:
        root, _ids = await self._root(ref)
        loop = asyncio.get_running_loop()

        def _do(worker: Worker) -> None:
            src = root.open_regular(entry.path)
            try:
                dst = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except OSError as e:
                os.close(src)
                raise words(e, local) from None
            done = 0
            try:
                while chunk := os.read(src, _CHUNK):
                    worker.check()
                    _write_all(dst, chunk)
                    done += len(chunk)
                    if progress is not None:
                        loop.call_soon_threadsafe(progress, done)
                # the container's permission bits, never its setuid, setgid or sticky
                # bits: the copy is this user's (root's), on the host
                os.fchmod(dst, entry.mode & 0o777)
            except BaseException as e:
                os.unlink(local)
                if isinstance(e, OSError):
                    raise words(e, entry.path) from None
                raise
            finally:
                os.close(src)
                os.close(dst)

        try:
            await in_thread(_do)
        finally:
            root.close()

    async def write_file(self, ref: InstanceRef, entry: FileEntry, local: str | None = None,
                         progress=None) -> None:
        root, ids = await self._root(ref)
        loop = asyncio.get_running_loop()

        def _do(worker: Worker) -> None:
            uid, gid = ids.outside("u", entry.uid), ids.outside("g", entry.gid)
            if entry.kind == "directory":
                root.make_directory(entry.path, uid, gid, entry.mode)
            elif entry.kind == "symlink":
                root.make_symlink(entry.path, entry.target, uid, gid)
            elif entry.kind == "file" and local is not None:
                root.replace_file(entry.path, uid, gid, entry.mode,
                                  lambda fd: _copy(worker, local, fd, loop, progress))
            else:
                raise InvalidInput(f"{entry.path}: only files, directories and symlinks "
                                   f"are copied.")

        try:
            await in_thread(_do)
        finally:
            root.close()


def _copy(worker: Worker, local: str, fd: int, loop: asyncio.AbstractEventLoop,
          progress) -> None:
    """``local``'s bytes written to ``fd``, cancellable, with progress."""
    done = 0
    with open(local, "rb") as src:
        while chunk := src.read(_CHUNK):
            worker.check()
            _write_all(fd, chunk)
            done += len(chunk)
            if progress is not None:
                loop.call_soon_threadsafe(progress, done)
