"""Files beneath a container's root, opened so that no path can lead out of it.

Every path is resolved by the kernel with ``openat2(RESOLVE_IN_ROOT |
RESOLVE_NO_MAGICLINKS)`` from an ``O_PATH`` descriptor of the root: an absolute symlink
starts again at that root, ``..`` stops there, ``/proc/<pid>/root``-style links are
refused, and because the walk and the use are one system call, a component the
container's root swaps into a symlink meanwhile is resolved inside the root too. What is
opened is checked with ``fstat`` on the descriptor: only regular files are read or
replaced (a FIFO, a device node or a socket is refused in words, and never opened for
reading or writing: it is first opened ``O_PATH``, checked, then reopened). Writes go to
a new file in the same directory (created ``O_EXCL`` beneath the directory's descriptor),
owned and moded by descriptor, then renamed over the name; nothing is ever written
through a symlink. All of this blocks: call it from a worker thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import secrets
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .errors import BackendError, InvalidInput, NotFound, OperationFailed

RESOLVE_NO_XDEV = 0x01
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
RESOLVE_IN_ROOT = 0x10
IN_ROOT = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS

# openat2 is 437 on every architecture of the generic syscall table and on x86
_SYSCALL = {"x86_64": 437, "aarch64": 437, "arm64": 437, "i386": 437, "i686": 437,
            "armv7l": 437, "riscv64": 437, "ppc64le": 437, "ppc64": 437, "s390x": 437,
            "loongarch64": 437}
_ENOSYS = ("This system has no openat2 (Linux 5.6 or later is needed); corral does not "
           "open container files from the host without it.")


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64),
                ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def openat2(dirfd: int, path: str, flags: int, mode: int = 0, resolve: int = IN_ROOT) -> int:
    """``openat2(dirfd, path, {flags | O_CLOEXEC, mode, resolve})``: a new descriptor.

    Raises:
        OSError: what the kernel said (retried on EAGAIN/EINTR, which a concurrent
            rename under RESOLVE_IN_ROOT can cause). OperationFailed: no openat2 here.
    """
    number = _SYSCALL.get(platform.machine())
    if number is None:
        raise OperationFailed(_ENOSYS)
    if "\0" in path:
        raise InvalidInput("A path with a NUL character cannot be opened.")
    how = _OpenHow(flags | os.O_CLOEXEC, mode, resolve)
    raw = os.fsencode(path)
    for _ in range(64):
        fd = _libc.syscall(ctypes.c_long(number), ctypes.c_int(dirfd), ctypes.c_char_p(raw),
                           ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
        if fd >= 0:
            return fd
        err = ctypes.get_errno()
        if err == errno.ENOSYS:
            raise OperationFailed(_ENOSYS)
        if err not in (errno.EAGAIN, errno.EINTR):
            raise OSError(err, os.strerror(err), path)
    raise OSError(errno.EAGAIN, "the path kept changing while it was opened", path)


def words(e: OSError, path: str) -> BackendError:
    """An OSError about a path in the container, in words."""
    if e.errno == errno.ENOENT:
        return NotFound(f"{path} does not exist.")
    why = {errno.EACCES: "permission denied", errno.EPERM: "permission denied",
           errno.ENOSPC: "no space left", errno.EROFS: "read-only file system",
           errno.ENOTDIR: "a part of the path is not a directory",
           errno.EISDIR: "a directory is in the way", errno.ELOOP: "it is a symlink",
           errno.EXDEV: "it leads out of the container", errno.EEXIST: "it exists already",
           errno.ENOTEMPTY: "a directory is in the way"}
    return OperationFailed(f"{path}: {why.get(e.errno or 0, e.strerror or str(e))}.")


def kind_of(mode: int) -> str:
    """A file type in words, for refusals."""
    return {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device",
            stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket",
            stat.S_IFLNK: "a symlink", stat.S_IFDIR: "a directory"}.get(
                stat.S_IFMT(mode), "not a regular file")


def _split(path: str) -> tuple[str, str]:
    """``/a/b/c`` → (``/a/b``, ``c``); the last component must be a real name."""
    head, _, name = path.rstrip("/").rpartition("/")
    if name in ("", ".", ".."):
        raise InvalidInput(f"{path or '/'} does not name a file.")
    return head or "/", name


@dataclass(frozen=True, slots=True)
class Listed:
    """One directory entry, as ``lstat`` saw it (never followed)."""

    name: str
    st: os.stat_result
    target: str


class Root:
    """An ``O_PATH`` descriptor of a root directory and the file API beneath it.

    Between steps of one operation :attr:`between` (a test seam, None normally) is
    called with the step's name, so a test can change the tree at each boundary.
    """

    between: Callable[[str], None] | None = None

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Root:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _step(self, name: str) -> None:
        if self.between is not None:
            self.between(name)

    def open(self, path: str, flags: int, mode: int = 0) -> int:
        """``path`` (the container's, absolute or not) opened beneath the root."""
        try:
            return openat2(self.fd, path, flags, mode)
        except OSError as e:
            raise words(e, path) from None

    @contextlib.contextmanager
    def _fd(self, path: str, flags: int) -> Iterator[int]:
        fd = self.open(path, flags)
        try:
            yield fd
        finally:
            os.close(fd)

    def listdir(self, path: str) -> Iterator[Listed]:
        """The entries of the directory ``path`` (a symlink to one is followed, inside
        the root), each ``lstat``-ed beneath the directory's descriptor."""
        try:
            fd = openat2(self.fd, path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as e:
            if e.errno == errno.ENOTDIR:
                raise InvalidInput(f"{path} is not a directory.") from None
            raise words(e, path) from None
        try:
            self._step("listdir")
            names = sorted(os.listdir(fd))
            for name in names:
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    target = os.readlink(name, dir_fd=fd) if stat.S_ISLNK(st.st_mode) else ""
                except OSError:
                    continue  # vanished meanwhile
                yield Listed(name, st, target)
        finally:
            os.close(fd)

    def open_regular(self, path: str) -> int:
        """A read-only descriptor of the regular file ``path`` (its last component not
        followed). A FIFO, device or socket is refused without being opened.

        Raises:
            InvalidInput: not a regular file. NotFound, OperationFailed: in words.
        """
        with self._fd(path, os.O_PATH | os.O_NOFOLLOW) as handle:
            st = os.fstat(handle)
            if not stat.S_ISREG(st.st_mode):
                raise InvalidInput(f"{path} is {kind_of(st.st_mode)}, not a regular file; "
                                   f"only regular files are read.")
            self._step("reopen")
            # the same inode, reopened through our own descriptor: no second walk
            fd = os.open(f"/proc/self/fd/{handle}",
                         os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
        again = os.fstat(fd)
        if (again.st_dev, again.st_ino) != (st.st_dev, st.st_ino):  # pragma: no cover
            os.close(fd)
            raise OperationFailed(f"{path} changed while it was opened.")
        return fd

    def make_directory(self, path: str, uid: int, gid: int, mode: int) -> None:
        """``path`` made a directory if it is none (a symlink in its place is refused),
        then owned and moded by descriptor."""
        parent, name = _split(path)
        with self._fd(parent, os.O_PATH | os.O_DIRECTORY) as dirfd:
            self._step("mkdir")
            try:
                os.mkdir(name, 0o700, dir_fd=dirfd)
            except FileExistsError:
                pass
            except OSError as e:
                raise words(e, path) from None
            try:
                fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                             | os.O_CLOEXEC, dir_fd=dirfd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    try:
                        what = kind_of(os.stat(name, dir_fd=dirfd,
                                               follow_symlinks=False).st_mode)
                    except OSError:
                        what = "not a directory"
                    raise InvalidInput(f"{path} is {what}, not a directory.") from None
                raise words(e, path) from None
            try:
                os.fchown(fd, uid, gid)
                os.fchmod(fd, mode)
            except OSError as e:
                raise words(e, path) from None
            finally:
                os.close(fd)

    def make_symlink(self, path: str, target: str, uid: int, gid: int) -> None:
        """``path`` made a symlink to ``target`` (an existing symlink is replaced)."""
        parent, name = _split(path)
        with self._fd(parent, os.O_PATH | os.O_DIRECTORY) as dirfd:
            try:
                with contextlib.suppress(FileNotFoundError):
                    if stat.S_ISLNK(os.stat(name, dir_fd=dirfd,
                                            follow_symlinks=False).st_mode):
                        os.unlink(name, dir_fd=dirfd)
                self._step("symlink")
                os.symlink(target, name, dir_fd=dirfd)
                os.chown(name, uid, gid, dir_fd=dirfd, follow_symlinks=False)
            except OSError as e:
                raise words(e, path) from None

    def replace_file(self, path: str, uid: int, gid: int, mode: int,
                     fill: Callable[[int], None]) -> None:
        """Write a regular file ``path``: ``fill(fd)`` writes a new file beside it, which
        is then owned, moded and renamed over ``path`` (a new inode: hard links to the
        old file keep the old content). What is at ``path`` must be a regular file or
        nothing; a symlink, directory, FIFO or device is refused. On any failure (or
        cancel, raised by ``fill``) the new file is removed and ``path`` is as it was."""
        parent, name = _split(path)
        with self._fd(parent, os.O_PATH | os.O_DIRECTORY) as dirfd:
            self._check_replaceable(dirfd, name, path)
            temp = f".{name[:200]}.corral-{secrets.token_hex(4)}"
            self._step("create")
            try:
                fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_NOCTTY | os.O_CLOEXEC, 0o600, dir_fd=dirfd)
            except OSError as e:
                raise words(e, path) from None
            try:
                try:
                    fill(fd)
                    os.fchown(fd, uid, gid)
                    os.fchmod(fd, mode)
                finally:
                    os.close(fd)
                self._step("rename")
                self._check_replaceable(dirfd, name, path)
                os.rename(temp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
            except BaseException as e:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=dirfd)
                if isinstance(e, OSError):
                    raise words(e, path) from None
                raise

    @staticmethod
    def _check_replaceable(dirfd: int, name: str, path: str) -> None:
        try:
            st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
        except FileNotFoundError:
            return
        except OSError as e:
            raise words(e, path) from None
        if stat.S_ISDIR(st.st_mode):
            raise OperationFailed(f"{path}: a directory is in the way.")
        if not stat.S_ISREG(st.st_mode):
            raise InvalidInput(f"{path} is {kind_of(st.st_mode)}; only regular files are "
                               f"written, and never through a symlink.")


def open_root(path: str) -> Root:
    """An ``O_PATH`` descriptor of the directory ``path`` on the host (a stopped
    container's rootfs), walked from ``/`` one component at a time so that nobody but
    root or us could have redirected it: every directory on the way and every symlink
    followed must be owned by root or us and writable by no other user or group (a
    sticky directory is fine when the entry in it is root's or ours; ``lxc-create``
    makes container directories 0770 for group root). The last component, the root
    itself, may belong to anyone (an unprivileged container's root owns its rootfs).

    Raises:
        OperationFailed: a component could be swapped by someone else, or is missing.
    """
    if not path.startswith("/"):
        raise InvalidInput(f"The root file system {path} is not an absolute path.")
    trusted, groups = {0, os.geteuid()}, {0, os.getegid()}
    parts = [p for p in path.split("/") if p not in ("", ".")]
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    here_st = os.fstat(fd)
    hops = 0
    shown = "/"
    try:
        while parts:
            part = parts.pop(0)
            if part == "..":
                raise OperationFailed(f"The root file system path {path} holds '..'.")
            st = os.stat(part, dir_fd=fd, follow_symlinks=False)
            last = not parts
            loose = here_st.st_mode & 0o002 or (here_st.st_mode & 0o020
                                                and here_st.st_gid not in groups)
            if loose and not (here_st.st_mode & stat.S_ISVTX and st.st_uid in trusted):
                raise OperationFailed(f"{shown} can be changed by other users; corral does "
                                      f"not open a root file system beneath it.")
            if stat.S_ISLNK(st.st_mode):
                hops += 1
                if st.st_uid not in trusted or hops > 40:
                    raise OperationFailed(f"{path}: a symlink on the way belongs to another "
                                          f"user (or they loop).")
                target = os.readlink(part, dir_fd=fd)
                parts = [p for p in target.split("/") if p not in ("", ".")] + parts
                if target.startswith("/"):
                    os.close(fd)
                    fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
                    here_st, shown = os.fstat(fd), "/"
                continue
            if not stat.S_ISDIR(st.st_mode):
                raise OperationFailed(f"{path}: {part} is not a directory.")
            if not last and st.st_uid not in trusted:
                raise OperationFailed(f"{shown.rstrip('/')}/{part} belongs to another "
                                      f"user; corral does not open a root file system "
                                      f"beneath it.")
            nxt = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                          dir_fd=fd)
            os.close(fd)
            fd, here_st = nxt, os.fstat(nxt)
            shown = f"{shown.rstrip('/')}/{part}"
    except OSError as e:
        os.close(fd)
        raise OperationFailed(f"The root file system {path} cannot be opened: "
                              f"{e.strerror or e}.") from None
    except BaseException:
        os.close(fd)
        raise
    return Root(fd)


def open_process_root(pid: int) -> tuple[Root, int]:
    """The root directory of process ``pid`` (a running container's init, its mounts
    included), and a descriptor of its ``/proc`` directory that pins that very process:
    the caller checks afterwards that the pid still names the container, and closes it.

    Raises:
        OperationFailed: the process is gone.
    """
    try:
        proc = os.open(f"/proc/{pid}", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise OperationFailed(f"Process {pid} is gone: {e.strerror}.") from None
    try:
        fd = os.open("root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=proc)
    except OSError as e:
        os.close(proc)
        raise OperationFailed(f"The root of process {pid} cannot be opened: "
                              f"{e.strerror}.") from None
    return Root(fd), proc
