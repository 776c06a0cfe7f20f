"""Files of LXC containers, through the host's view of their root file system.

A running container is seen through ``/proc/<init pid>/root`` (its mounts included); a
stopped one through its ``dir`` rootfs (``lxc.rootfs.path``). Paths are resolved here,
one component at a time with ``lstat``, as the container would resolve them: an absolute
symlink starts again at the container's root and ``..`` stops there, so no path leads out
of the container; the last component is never followed. Owners are shown and written as
the container sees them, through its ``lxc.idmap`` (an unprivileged container's root is
host uid 100000, say).
"""

from __future__ import annotations

import asyncio
import errno
import os
import posixpath
import stat

from ..base import Backend
from ..errors import BackendError, InvalidInput, NotFound, OperationFailed
from ..models import FileEntry, InstanceRef
from ..work import Worker, in_thread
from . import parse
from .tools import LXCTools

_CHUNK = 1 << 20
_MAX_LINKS = 40


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


def resolve(root: str, path: str, *, follow_last: bool = False) -> str:
    """The host path of the container's ``path`` under ``root``, never leaving ``root``.

    Raises:
        NotFound: a component does not exist. OperationFailed: a symlink loop.
    """
    parts = [p for p in path.split("/") if p]
    done: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == ".":
            continue
        if part == "..":
            if done:
                done.pop()
            continue
        host = os.path.join(root, *done, part)
        try:
            st = os.lstat(host)
        except FileNotFoundError:
            if parts:
                raise NotFound(f"{'/' + '/'.join([*done, part])} does not exist.") from None
            done.append(part)  # a new last component (a file being created)
            break
        except OSError as e:
            raise _words(e, "/" + "/".join([*done, part])) from None
        if stat.S_ISLNK(st.st_mode) and (parts or follow_last):
            hops += 1
            if hops > _MAX_LINKS:
                raise OperationFailed(f"Too many symlinks in {path}.")
            target = os.readlink(host)
            if target.startswith("/"):
                done = []
            parts = [p for p in target.split("/") if p] + parts
            continue
        done.append(part)
    return os.path.join(root, *done)


def _words(e: OSError, path: str) -> BackendError:
    if e.errno == errno.ENOENT:
        return NotFound(f"{path} does not exist.")
    why = {errno.EACCES: "permission denied", errno.EPERM: "permission denied",
           errno.ENOSPC: "no space left", errno.EROFS: "read-only file system",
           errno.ENOTDIR: "a part of the path is not a directory",
           errno.EISDIR: "a directory is in the way", errno.ELOOP: "it is a symlink"}
    return OperationFailed(f"{path}: {why.get(e.errno or 0, e.strerror or str(e))}.")


def _write_all(fd: int, data: bytes) -> None:
    """``os.write`` until all of ``data`` is written (a short write is how a full disk
    first shows; the next write raises ENOSPC)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    return "symlink" if stat.S_ISLNK(mode) else "other"


class Files(Backend):
    """``list_files``, ``read_file``, ``write_file`` on the host's view of the rootfs."""

    lxc: LXCTools

    async def _root(self, ref: InstanceRef) -> tuple[str, IdMap]:
        self.lxc.require(ref)
        try:
            config = self.lxc.config(ref.name)
        except OSError as e:
            raise OperationFailed(f"Cannot read the config of {ref}: {e.strerror}.") from None
        ids = IdMap(config)
        rc, out, _ = await self.lxc.run("lxc-info", "-n", ref.name, "-p", "-H")
        pid = out.strip()
        if rc == 0 and pid.isdigit():
            return f"/proc/{pid}/root", ids
        rootfs = parse.config_value(config, "lxc.rootfs.path") or ""
        if rootfs.startswith("dir:"):
            rootfs = rootfs[4:]
        if rootfs.startswith("/") and os.path.isdir(rootfs):
            return rootfs, ids
        shown = rootfs or "not set"
        raise OperationFailed(f"{ref} is stopped and its root file system ({shown}) is not "
                              f"a plain directory: start it to see its files.")

    async def list_files(self, ref: InstanceRef, path: str) -> list[FileEntry]:
        root, ids = await self._root(ref)

        def _do(worker: Worker) -> list[FileEntry]:
            host = resolve(root, path, follow_last=True)
            try:
                names = sorted(os.listdir(host))
            except NotADirectoryError:
                raise InvalidInput(f"{path} is not a directory.") from None
            except OSError as e:
                raise _words(e, path) from None
            out = []
            for name in names:
                worker.check()
                try:
                    st = os.lstat(os.path.join(host, name))
                except OSError:
                    continue  # vanished meanwhile
                kind = _kind(st.st_mode)
                target = os.readlink(os.path.join(host, name)) if kind == "symlink" else ""
                out.append(FileEntry(posixpath.join(path, name), kind, st.st_size,
                                     stat.S_IMODE(st.st_mode), ids.inside("u", st.st_uid),
                                     ids.inside("g", st.st_gid), target))
            return out

        return await in_thread(_do)

    async def read_file(self, ref: InstanceRef, entry: FileEntry, local: str,
                        progress=None) -> None:
        root, _ids = await self._root(ref)
        loop = asyncio.get_running_loop()

        def _do(worker: Worker) -> None:
            host = resolve(root, entry.path)
            try:
                src = os.open(host, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError as e:
                raise _words(e, entry.path) from None
            try:
                dst = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except OSError as e:
                os.close(src)
                raise _words(e, local) from None
            done = 0
            try:
                while chunk := os.read(src, _CHUNK):
                    worker.check()
                    _write_all(dst, chunk)
                    done += len(chunk)
                    if progress is not None:
                        loop.call_soon_threadsafe(progress, done)
                os.fchmod(dst, entry.mode)
            except BaseException:
                os.unlink(local)
                raise
            finally:
                os.close(src)
                os.close(dst)

        await in_thread(_do)

    async def write_file(self, ref: InstanceRef, entry: FileEntry, local: str | None = None,
                         progress=None) -> None:
        root, ids = await self._root(ref)
        uid, gid = ids.outside("u", entry.uid), ids.outside("g", entry.gid)
        loop = asyncio.get_running_loop()

        def _do(worker: Worker) -> None:
            host = resolve(root, entry.path)
            try:
                if entry.kind == "directory":
                    if not os.path.isdir(host) or os.path.islink(host):
                        os.mkdir(host, 0o700)
                    os.lchown(host, uid, gid)
                    os.chmod(host, entry.mode)
                elif entry.kind == "symlink":
                    if os.path.islink(host):
                        os.unlink(host)
                    os.symlink(entry.target, host)
                    os.lchown(host, uid, gid)
                elif entry.kind == "file" and local is not None:
                    _copy_in(worker, local, host, uid, gid, entry.mode, loop, progress)
                else:
                    raise InvalidInput(f"{entry.path}: only files, directories and symlinks "
                                       f"are copied.")
            except OSError as e:
                raise _words(e, entry.path) from None

        await in_thread(_do)


def _copy_in(worker: Worker, local: str, host: str, uid: int, gid: int, mode: int,
             loop: asyncio.AbstractEventLoop, progress) -> None:
    """Write ``local`` to ``host`` (not through a symlink) with its owner and mode; on
    failure or cancel a new file is removed, a replaced one is left as far as written."""
    existed = os.path.lexists(host)
    dst = os.open(host, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    done = 0
    try:
        with open(local, "rb") as src:
            while chunk := src.read(_CHUNK):
                worker.check()
                _write_all(dst, chunk)
                done += len(chunk)
                if progress is not None:
                    loop.call_soon_threadsafe(progress, done)
        os.fchown(dst, uid, gid)
        os.fchmod(dst, mode)
    except BaseException:
        if not existed:
            os.unlink(host)
        raise
    finally:
        os.close(dst)
