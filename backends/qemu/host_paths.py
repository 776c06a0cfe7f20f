"""Host files QEMU reads for a VM (ISO, kernel, initrd, an overlay's base image), judged
on what they are *now*, not on what a path named once.

corral often runs as root, and QEMU with it: whatever file a path leads to at start time
is read with root's rights and shown to the guest. Two questions decide whether that is
harmless:

- :func:`public_fd`: could every user of this host read the opened file anyway (the file
  world-readable, every directory above where it really lives world-searchable)? Then
  nothing secret can leak through it, whoever controls the path.
- :func:`who_can_change`: could anyone but root and the effective user change where the
  path leads (a directory they own or may write on the way, a link in such a directory)?
  If not, the path means today what it meant when the user chose it.

:func:`open_boot_files` asks both at every start, on the very descriptors QEMU is then
given (``/dev/fd/N``), so a link swapped after the check cannot redirect QEMU."""

from __future__ import annotations

import dataclasses
import os
import stat

from ..errors import InvalidInput
from .definition import VMDefinition

BOOT_FILES = (("iso", "ISO"), ("kernel", "kernel"), ("initrd", "initrd"))


class NotRegular(Exception):
    """The path leads to a device, pipe, socket or directory."""


def open_regular(path: str) -> int:
    """A read-only descriptor of the regular file ``path`` leads to. The file is first
    reached with ``O_PATH`` (which opens no device: ``/dev/watchdog`` or a tape would act
    on a plain open) and its type checked there; the descriptor returned is that same
    file, reopened.

    Raises:
        NotRegular: not a regular file.  OSError: it cannot be opened.
    """
    where = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(where).st_mode):
            raise NotRegular(path)
        return os.open(f"/proc/self/fd/{where}", os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY)
    finally:
        os.close(where)


def _public_path(real: str) -> bool:
    """Every user could reach and read ``real`` (a path with no links in it)."""
    try:
        if not os.stat(real).st_mode & stat.S_IROTH:
            return False
        parent = os.path.dirname(real)
        while True:
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
            if parent == "/":
                return True
            parent = os.path.dirname(parent)
    except OSError:
        return False


def public_fd(fd: int) -> bool:
    """The file open on ``fd`` is one every user of this host could read anyway: judged
    on the descriptor (its mode, and the directories above where the file really lives),
    so no later change of a path can make a private file pass."""
    st = os.fstat(fd)
    if not st.st_mode & stat.S_IROTH:
        return False
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return False
    if not real.startswith("/") or real.endswith(" (deleted)"):
        return False
    try:
        again = os.stat(real)
    except OSError:
        return False
    return (again.st_dev, again.st_ino) == (st.st_dev, st.st_ino) and _public_path(real)


def who_can_change(path: str) -> str | None:
    """None when only root and the effective user can change what the absolute ``path``
    leads to; otherwise the first directory or link on the way that someone else
    controls, in words. Links are followed one component at a time (at most 40), and
    each link's own directory is judged too. A directory another user may write is fine
    only when it is sticky (``/tmp``) and the entry in it is root's or ours."""
    ours = {0, os.geteuid()}
    if not os.path.isabs(path):
        return f"{path} is not an absolute path"
    pending = [c for c in path.split("/") if c]
    current = "/"
    links = 0
    try:
        while pending:
            comp = pending.pop(0)
            if comp == ".":
                continue
            if comp == "..":
                current = os.path.dirname(current)
                continue
            parent = os.lstat(current)
            entry = os.path.join(current, comp)
            st = os.lstat(entry)
            if parent.st_uid not in ours:
                return f"the directory {current} belongs to another user (uid {parent.st_uid})"
            if parent.st_mode & 0o022 and not (parent.st_mode & stat.S_ISVTX
                                                and st.st_uid in ours):
                return f"the directory {current} may be written by other users"
            if stat.S_ISLNK(st.st_mode):
                links += 1
                if links > 40:
                    return f"{path} goes through too many links"
                target = os.readlink(entry)
                if target.startswith("/"):
                    current = "/"
                pending[:0] = [c for c in target.split("/") if c]
                continue
            current = entry
    except OSError as e:
        return f"{path} cannot be followed ({e.strerror})"
    return None


def writable_by_others(st: os.stat_result) -> bool:
    """The file's contents may be changed by someone other than root and us."""
    return st.st_uid not in (0, os.geteuid()) or bool(st.st_mode & 0o022)


def open_host_file(path: str, label: str, whose: str) -> int:
    """Open ``path`` (a file QEMU is to read) and return the descriptor, when the file is
    public or nobody but root and us can change where ``path`` leads. ``whose``: how a
    refusal starts ("qemu:vm1 was not started").

    Raises:
        InvalidInput: in words, naming the file and who could redirect it.
    """
    try:
        fd = open_regular(path)
    except NotRegular:
        raise InvalidInput(f"{whose}: its {label} {path} is not a "
                           f"regular file (it is now a device, pipe or directory).") from None
    except OSError as e:
        raise InvalidInput(f"{whose}: its {label} {path} cannot be opened "
                           f"({e.strerror}).") from None
    try:
        st = os.fstat(fd)
        if public_fd(fd):
            return fd
        who = who_can_change(path)
        if who is None:
            now = os.stat(path)
            if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                return fd
            who = f"{path} changed while it was being checked"
        raise InvalidInput(
            f"{whose}: its {label} {path} leads to a file not every user "
            f"may read, and {who}, so someone else could point it at any file, such as "
            f"/etc/shadow, which QEMU would read with this user's rights and show to the "
            f"guest. Move the file to a directory only you can change, or make it "
            f"readable by everyone.")
    except BaseException:
        os.close(fd)
        raise


@dataclasses.dataclass
class BootFiles:
    """The ISO, kernel and initrd of a VM, open: ``definition`` names them as
    ``/dev/fd/N`` (QEMU opens those, the very files checked), ``fds`` go to QEMU's
    process. Close after QEMU started (it keeps its own copies)."""

    definition: VMDefinition
    fds: tuple[int, ...] = ()

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = ()

    def __enter__(self) -> BootFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_boot_files(d: VMDefinition, whose: str) -> BootFiles:
    """Open and check (:func:`open_host_file`) the files ``d`` names for QEMU to read;
    ``whose`` starts a refusal.

    Raises:
        InvalidInput: one of them may not be read (nothing stays open).
    """
    opened: dict[str, str] = {}
    fds: list[int] = []
    try:
        for field, label in BOOT_FILES:
            path = getattr(d, field)
            if path:
                fd = open_host_file(path, label, whose)
                fds.append(fd)
                opened[field] = f"/dev/fd/{fd}"
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return BootFiles(dataclasses.replace(d, **opened), tuple(fds))
