"""The one archive reader of every import (LXC containers, QEMU VMs, and any later
OVA/OVF import): a tar archive is read once, as a stream, and each member is checked and
then extracted from that same stream (no second reader, nothing re-read after its check)
into a directory the caller made private, with :mod:`tarfile` and an extraction filter
(PEP 706's ``tar`` filter as the base, plus corral's rules).

corral's rules, the same for every import:

- **Canonical names.** A leading ``./`` and a trailing ``/`` are how tar writes names;
  any other ``.``, ``..`` or empty component, and absolute names, are refused. Two members
  with the same canonical name are refused, so ``./a`` and ``a`` cannot both be read (the
  one checked is the one written).
- **Nothing beneath a link or a file.** A member below an earlier symbolic link (or
  regular file) is refused: writing it would follow the link.
- **Links only strictly inside a root file system** (a directory the :class:`Policy`
  names, such as a container's ``rootfs/``): a symbolic link's target is resolved as the
  system inside sees it (relative to the link's own directory; absolute ones from that
  root) and refused when a relative one climbs above the root, as it would on the host;
  a hard link only to an earlier regular file of the same root.
- **Owners and modes.** Inside a root file system they are the archive's (setuid bits
  and foreign owners are that system's own business, below a directory only root may
  enter); everywhere else corral's own (the caller's user, 0755/0644, no special bits).
  The archive's top directory (``./``) is never applied: the caller sets it.
- **Extended attributes**: only file capabilities, POSIX ACLs and ``user.*``, inside a
  root (not ``trusted.*`` such as overlayfs's, nor security labels).

What may be where (file names, kinds, device nodes, what is kept in memory instead of
written) is the :class:`Policy`'s. A refused archive raises :class:`ArchiveRefused`
saying why in words; the caller removes what was written (its private directory)."""

from __future__ import annotations

import errno
import gzip
import io
import lzma
import os
import stat
import tarfile
import zlib
from pathlib import Path

from .work import Worker

KEEP_LIMIT = 1 << 20  # a member kept in memory (a config) is at most this big
_XATTR = "SCHILY.xattr."
_KEPT_XATTRS = {"security.capability", "system.posix_acl_access", "system.posix_acl_default"}


class ArchiveRefused(Exception):
    """The archive is refused (damaged, or a member breaks a rule); the message says why
    in words, as a clause ("it holds …")."""


class Policy:
    """What one kind of archive may hold. The base allows regular files only, in no root
    file system; subclasses say more."""

    where = "the directory it is unpacked into"
    """Named in refusals: ``'../x' leaves <where>``."""
    dir_mode, file_mode = 0o755, 0o644
    """Modes of what lies outside a root file system."""

    def root_of(self, name: str) -> str | None:
        """The root file system that ``name`` lies strictly inside (None: none)."""
        return None

    def is_root(self, name: str) -> bool:
        """Whether ``name`` is a root file system's own directory."""
        return False

    def check(self, name: str, member: tarfile.TarInfo) -> str | None:
        """Why ``member`` (canonical ``name``) may not be where it is (None: it may)."""
        return None if member.isreg() else f"its member '{name}' is not a plain file"

    def keep(self, name: str) -> bool:
        """Whether ``name`` is read into memory (and returned) instead of written."""
        return False

    def kept(self, name: str, data: bytes) -> None:
        """Check a member kept in memory as soon as it is read (raise ArchiveRefused)."""

    def finish(self, seen: dict[str, bytes]) -> None:
        """Check the whole archive once read (``seen``: canonical name → tar type)."""


def shown(text: str) -> str:
    """``text`` (names and values from an archive) with control and undecodable
    characters as visible escapes: a refusal quoting them cannot drive a terminal."""
    return "".join(c if c.isprintable() else
                   f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"
                   for c in text)


def canonical(name: str, where: str) -> str:
    """The canonical form of a member name ('' for the archive's top directory).

    Raises:
        ArchiveRefused: absolute, or a ``.``/``..``/empty component inside.
    """
    if name.startswith("/"):
        raise ArchiveRefused(f"it holds an unexpected member '{name}', which leaves {where}")
    while name.startswith("./"):
        name = name[2:]
    if name.endswith("/"):
        name = name[:-1]
    if name in ("", "."):
        return ""
    parts = name.split("/")
    if ".." in parts:
        raise ArchiveRefused(f"it holds an unexpected member '{name}', which leaves {where}")
    if "" in parts or "." in parts:
        raise ArchiveRefused(f"it holds a member named '{name}', with an empty or '.' "
                             f"part: tar would write it under another name than the one "
                             f"checked")
    return name


def link_target(name: str, target: str, root: str) -> str | None:
    """Where the symbolic link ``name`` (inside ``root``) points, as a path inside
    ``root``, the way the system in it sees it; None when a relative target climbs above
    the root."""
    if target.startswith("/"):
        where: list[str] = []
    else:
        where = name[len(root) + 1:].split("/")[:-1]
    for part in target.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not where:
                if not target.startswith("/"):
                    return None
                continue  # '/..' is '/' inside the root, as the kernel resolves it
            where.pop()
        else:
            where.append(part)
    return "/".join([root, *where])


class _Counted(io.RawIOBase):
    """The archive file as tarfile reads it: stops when the task is cancelled, reports
    how much was read."""

    def __init__(self, f, worker: Worker, label: str) -> None:
        self.f, self.worker, self.label = f, worker, label
        self.total, self.done = os.fstat(f.fileno()).st_size, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        self.worker.check()
        n = self.f.readinto(buffer)
        self.done += n
        self.worker.percent(self.label, self.done, self.total)
        return n


class _Reader:
    """One pass over one archive: the state corral's rules need."""

    def __init__(self, worker: Worker, into: Path, policy: Policy) -> None:
        self.worker, self.into, self.policy = worker, into, policy
        self.seen: dict[str, bytes] = {}  # name -> tar type (a rootfs has many names)
        self.parents: set[str] = set()  # every directory above a member
        self.files: set[str] = set()  # regular files written (hard link targets)
        self.kept: dict[str, bytes] = {}
        self.dirs: list[tarfile.TarInfo] = []
        self.euid, self.egid = os.geteuid(), os.getegid()

    def above(self, name: str) -> bytes | None:
        """The type of an earlier member that is not a directory, on the way to
        ``name``."""
        parts = name.split("/")
        for i in range(1, len(parts)):
            kind = self.seen.get("/".join(parts[:i]))
            if kind is not None and kind != tarfile.DIRTYPE:
                return kind
        return None

    def refuse_placement(self, name: str, member: tarfile.TarInfo) -> None:
        if name in self.seen or (name in self.parents and not member.isdir()):
            raise ArchiveRefused(f"its member '{name}' appears twice (under this name or "
                                 f"another way of writing it)")
        above = self.above(name)
        if above == tarfile.SYMTYPE:
            raise ArchiveRefused(f"'{name}' lies beyond a symbolic link of the archive")
        if above is not None:
            raise ArchiveRefused(f"'{name}' lies below a member that is not a directory")

    def refuse_kind(self, name: str, member: tarfile.TarInfo) -> None:
        policy = self.policy
        problem = policy.check(name, member)
        if problem:
            raise ArchiveRefused(problem)
        if member.isreg() or member.isdir():
            return
        root = policy.root_of(name)
        if root is None or not (member.issym() or member.islnk() or member.isdev()):
            raise ArchiveRefused(f"'{name}' is a link or special file outside a root file "
                                 f"system")
        if member.issym():
            if not member.linkname or link_target(name, member.linkname, root) is None:
                raise ArchiveRefused(f"'{name}' is a symbolic link to '{member.linkname}', "
                                     f"which leaves its root file system {root}/")
        elif member.islnk():
            target = canonical(member.linkname, policy.where)
            if self.above(target) == tarfile.SYMTYPE:
                raise ArchiveRefused(f"'{member.linkname}' lies beyond a symbolic link of "
                                     f"the archive")
            if target not in self.files or policy.root_of(target) != root:
                raise ArchiveRefused(f"'{name}' is a hard link to '{member.linkname}', which "
                                     f"is not an earlier file of its root file system {root}/")

    def filter(self, member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
        """The extraction filter: tarfile's ``tar`` filter (names that would land outside
        ``dest``, also through links already written), then corral's owners and modes."""
        try:
            checked = tarfile.tar_filter(member, dest)
        except tarfile.FilterError as e:
            raise ArchiveRefused(f"'{member.name}' would be written outside "
                                 f"{self.policy.where} ({e})") from None
        if self.policy.root_of(member.name) is not None or self.policy.is_root(member.name):
            return checked.replace(mode=member.mode & 0o7777, deep=False)
        mode = self.policy.dir_mode if member.isdir() else self.policy.file_mode
        return checked.replace(mode=mode, uid=self.euid, gid=self.egid, uname="", gname="",
                               deep=False)

    def xattrs(self, member: tarfile.TarInfo, path: str) -> None:
        """The archive's file capabilities, ACLs and user attributes, inside a root only."""
        if member.issym() or (self.policy.root_of(member.name) is None
                              and not self.policy.is_root(member.name)):
            return
        for key, value in member.pax_headers.items():
            if not key.startswith(_XATTR):
                continue
            attr = key[len(_XATTR):]
            if attr not in _KEPT_XATTRS and not attr.startswith("user."):
                continue
            try:
                os.setxattr(path, attr, value.encode("utf-8", "surrogateescape"),
                            follow_symlinks=False)
            except OSError as e:  # not supported there: the file has fewer privileges
                if e.errno not in (errno.ENOTSUP, errno.EPERM, errno.EINVAL):
                    raise

    def member(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        policy = self.policy
        name = canonical(member.name, policy.where)
        if not name:
            if not member.isdir():
                raise ArchiveRefused("its top is not a directory")
            return  # the archive's own top directory: its mode and owner are not used
        self.refuse_placement(name, member)
        self.refuse_kind(name, member)
        self.seen[name] = tarfile.DIRTYPE if member.isdir() else member.type
        parts = name.split("/")
        self.parents.update("/".join(parts[:i]) for i in range(1, len(parts)))
        if policy.keep(name):
            self.keep(tar, name, member)
            return
        linkname = canonical(member.linkname, policy.where) if member.islnk() else \
            member.linkname
        member = member.replace(name=name, linkname=linkname, deep=False)
        # a hard link gets its file's owner and mode (tar does not set them again)
        tar.extract(member, str(self.into), set_attrs=not (member.isdir() or member.islnk()),
                    numeric_owner=True, filter=self.filter)
        path = os.path.join(self.into, name)
        if member.isdir():
            self.dirs.append(member)
        elif not member.islnk():
            self.xattrs(member, path)
        if member.isreg():
            self.files.add(name)

    def keep(self, tar: tarfile.TarFile, name: str, member: tarfile.TarInfo) -> None:
        if not member.isreg():
            raise ArchiveRefused(f"its {name} is not a plain file")
        if member.size > KEEP_LIMIT:
            raise ArchiveRefused(f"its {name} is implausibly large ({member.size} bytes)")
        source = tar.extractfile(member)
        assert source is not None
        data = source.read()
        if len(data) != member.size:
            raise ArchiveRefused(f"its {name} is truncated")
        self.kept[name] = data
        self.policy.kept(name, data)

    def finish(self, tar: tarfile.TarFile) -> None:
        """Directories' owners, times and modes last (deepest first), as tar does: files
        written into them changed their times, and a read-only one must not stop them."""
        for member in sorted(self.dirs, key=lambda m: m.name, reverse=True):
            self.worker.check()
            member = self.filter(member, str(self.into))
            path = os.path.join(self.into, member.name)
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                raise ArchiveRefused(f"'{member.name}' is not a directory once unpacked")
            tar.chown(member, path, numeric_owner=True)
            tar.utime(member, path)
            tar.chmod(member, path)
            self.xattrs(member, path)
        self.policy.finish(self.seen)


def read_archive(worker: Worker, path: str, into: Path, policy: Policy, *,
                 label: str = "unpacking") -> dict[str, bytes]:
    """Check and extract the tar archive ``path`` (any compression tarfile reads) into
    the existing private directory ``into``, in one pass, by ``policy``'s and corral's
    rules (see the module); returns the members the policy keeps in memory, by canonical
    name. Run in a thread (:func:`backends.work.in_thread`); progress is ``label N%`` of
    the archive file read.

    Raises:
        ArchiveRefused: damaged, not a tar, or a member is refused (in words). What was
            written into ``into`` stays: the caller removes it.
        OSError: writing failed (disk full, …).
    """
    if not hasattr(tarfile, "tar_filter"):  # Python < 3.11.4
        raise ArchiveRefused("this Python has no tarfile extraction filters "
                             "(3.11.4 or newer is needed to unpack archives safely)")
    try:
        return _read(worker, path, into, policy, label)
    except ArchiveRefused as e:
        raise type(e)(shown(str(e))) from e.__cause__


def _read(worker: Worker, path: str, into: Path, policy: Policy,
          label: str) -> dict[str, bytes]:
    reader = _Reader(worker, into, policy)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ArchiveRefused("it is not a regular file")
        os.set_blocking(f.fileno(), True)
        try:
            with tarfile.open(fileobj=_Counted(f, worker, label), mode="r|*") as tar:
                tar.errorlevel = 2  # every failure to set an owner or mode is an error
                while True:
                    worker.check()
                    member = tar.next()
                    if member is None:
                        break
                    reader.member(tar, member)
                    # a stream needs no index (a rootfs has many files); typeshed does not
                    # declare the index, TarFile.members (getmembers() would read to the end)
                    tar.members.clear()  # type: ignore[attr-defined]
                reader.finish(tar)
        except tarfile.ExtractError as e:
            raise ArchiveRefused(f"it could not be unpacked as it says ({e})") from e
        except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError,
                gzip.BadGzipFile) as e:
            raise ArchiveRefused(f"it is damaged or not a tar archive "
                                 f"({e or type(e).__name__})") from e
    return reader.kept


