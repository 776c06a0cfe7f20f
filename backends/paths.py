"""Where corral keeps runtime files (sockets, pid and lock files): a directory only this
user can reach. ``$XDG_RUNTIME_DIR`` is used when it is a real directory owned by the
effective user with mode 0700 (under ``su``/``sudo -E`` it can be another user's); otherwise,
and without it (ssh sessions without pam_systemd, cron), a ``/tmp`` fallback created private
and checked, so another user cannot plant it (symlinked lock files, a fake console socket
catching what is typed). Modes are changed through a descriptor opened with ``O_NOFOLLOW``,
never through a path a link could redirect. :func:`private_file` creates files only the
user can read (exports, recordings); :func:`export_target` checks where a new export
archive may go.

Every file corral reads from its own config, data, cache, runtime and log directories is
opened by :func:`open_owned` (or :func:`read_owned`, :func:`check_owned`): never through a
symbolic link, only a regular file (a FIFO or device is not even waited on), owned by the
effective user and not writable by others, in a directory whose every level up to ``/`` is
owned by this user or root and not writable by others (unless sticky, like ``/tmp``). What
fails is refused with :class:`UntrustedFile`, whose message names the file and what is
wrong. :func:`owned_directory` gives the same check for a directory corral writes into."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import pwd
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from .errors import InvalidInput, OperationFailed

log = logging.getLogger(__name__)


def _private(path: Path) -> None:
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:  # ELOOP (a link) or ENOTDIR
        raise OperationFailed(f"{path} is not a directory (a symlink?): corral will not "
                              f"use it for its runtime files. Remove it.") from None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            raise OperationFailed(f"{path} belongs to uid {st.st_uid}, not to you: corral "
                                  f"will not use it for its runtime files. Remove it, or set "
                                  f"XDG_RUNTIME_DIR.")
        if st.st_mode & 0o077:
            os.fchmod(fd, 0o700)  # ours (made by an older corral): make it private
    finally:
        os.close(fd)


def _fallback() -> Path:
    return Path(f"/tmp/corral-{os.geteuid()}")


def xdg_problem(path: Path) -> str | None:
    """Why ``$XDG_RUNTIME_DIR`` = ``path`` is not private to this user (None: it is)."""
    try:
        st = os.lstat(path)
    except OSError as e:
        return f"it cannot be read ({e.strerror})"
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if st.st_uid != os.geteuid():
        return f"it belongs to uid {st.st_uid}, not to uid {os.geteuid()}"
    if stat.S_IMODE(st.st_mode) != 0o700:
        return f"its mode is {stat.S_IMODE(st.st_mode):04o}, not 0700"
    return None


def _base() -> Path:
    env = os.environ.get("XDG_RUNTIME_DIR")
    if env:
        path = Path(env)
        if not os.path.lexists(path):  # a made-up XDG_RUNTIME_DIR (tests): make it ours
            os.makedirs(path.parent, exist_ok=True)
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:
                pass
        problem = xdg_problem(path)
        if problem is None:
            return path
        log.warning("XDG_RUNTIME_DIR=%s is not used for runtime files: %s; using %s",
                    env, problem, _fallback())
    path = _fallback()
    _private(path)
    return path


def runtime_dir(*parts: str) -> Path:
    """``$XDG_RUNTIME_DIR/corral/<parts>`` (else ``/tmp/corral-<euid>/corral/<parts>``),
    each level made private (0700, owned by this user, not a symlink)."""
    path = _base()
    for part in ("corral", *parts):
        path = path / part
        _private(path)
    return path


def private_file(path: str | os.PathLike[str], *, binary: bool = True,
                 exclusive: bool = True):
    """Open a new file only this user can read and write (0600, whatever the umask; never
    through a symbolic link). ``exclusive``: it must not exist yet (else truncated)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    flags |= os.O_EXCL if exclusive else os.O_TRUNC
    fd = os.open(path, flags, 0o600)
    try:
        os.fchmod(fd, 0o600)
        return os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


def export_target(path: str) -> tuple[str, str]:
    """A new export archive's ``path`` (``~`` expanded, made absolute) and the ``.part``
    file it is written to before it is renamed.

    Raises:
        InvalidInput: the archive exists already, its directory does not, or the ``.part``
            of an interrupted (or running) export is there.
    """
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.lexists(path):
        raise InvalidInput(f"{path} exists already: choose a new file name.")
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise InvalidInput(f"The directory {parent} does not exist.")
    part = path + ".part"
    if os.path.lexists(part):
        raise InvalidInput(f"{part} exists: an earlier export was interrupted, or one is "
                           f"running. Remove it first.")
    return path, part


def publish_export(part: str, path: str) -> None:
    """Give the finished ``.part`` of :func:`export_target` its name, never replacing a
    file that appeared there meanwhile (a hard link fails on it; a file system without
    hard links gets a rename).

    Raises:
        InvalidInput: ``path`` appeared during the export (the ``.part`` is left for the
            caller to remove).
    """
    try:
        os.link(part, path)
    except FileExistsError:
        raise InvalidInput(f"{path} appeared during the export; the export was "
                           f"not kept.") from None
    except OSError:
        os.rename(part, path)
    else:
        os.unlink(part)


class UntrustedFile(OperationFailed):
    """A file corral would read (or a directory it would read or write in) that another
    user put there or can change: refused, never used."""

    title = "File refused"


def _who(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _sudo_hint(uid: int) -> str:
    if os.environ.get("SUDO_UID") == str(uid):
        return (" corral runs under sudo with the invoking user's environment (sudo -E): "
                "use sudo -H, or give this user its own configuration (--config).")
    return ""


def _dir_problem(st: os.stat_result) -> str | None:
    if st.st_uid not in (os.geteuid(), 0):
        return f"belongs to {_who(st.st_uid)}, not to you or root"
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        return f"can be changed by other users (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def way_problem(path: str | os.PathLike[str]) -> str | None:
    """Why another user could redirect the way to ``path`` (None: nobody can): a symbolic
    link on it (each one followed, at most 40) that lies in a directory which is not this
    user's or root's or which others may write, or that belongs to another user (in a
    sticky ``/tmp``). The directories a path really leads through are checked on
    descriptors (:func:`_check_chain`); a link's own directory is not among them, so
    ``~/.config/corral -> /etc/x`` made by the owner of ``~`` would lead corral's reads and
    writes into a directory of root's choosing without this. A missing part ends the walk
    (what is made there is checked when it is used)."""
    ours = {0, os.geteuid()}
    text = os.fspath(path)
    pending = [c for c in (text if text.startswith("/") else
                           os.path.join(os.getcwd(), text)).split("/") if c]
    current, links = "/", 0
    while pending:
        comp = pending.pop(0)
        if comp == ".":
            continue
        if comp == "..":
            current = os.path.dirname(current)
            continue
        entry = os.path.join(current, comp)
        try:
            st = os.lstat(entry)
        except OSError:
            return None
        if not stat.S_ISLNK(st.st_mode):
            current = entry
            continue
        links += 1
        if links > 40:
            return f"{text} goes through too many symbolic links"
        try:
            problem = _dir_problem(os.stat(current))
        except OSError:
            return None
        if problem is None and st.st_uid not in ours:
            problem = f"holds it as a link of {_who(st.st_uid)}"
        if problem:
            return f"the symbolic link {entry} on the way lies in {current}, which {problem}"
        target = os.readlink(entry)
        if target.startswith("/"):
            current = "/"
        pending[:0] = [c for c in target.split("/") if c]
    return None


def _refuse_way(path: str | os.PathLike[str], target: str | None = None) -> None:
    problem = way_problem(path)
    if problem:
        raise UntrustedFile(f"{problem}: another user could point it anywhere, so corral "
                            f"does not use {target or os.fspath(path)}. Replace the link "
                            f"with the directory itself, or use another one.")


def _check_chain(fd: int, shown: str, target: str | None = None) -> None:
    """Every directory from ``fd`` (an ``O_PATH`` descriptor of ``shown``) up to ``/``,
    walked by descriptors (``..``), so what is checked is what the file is opened in.
    ``target``: the file to be used there, for the message."""
    names = [shown]
    real = os.path.realpath(shown)
    while real != os.path.dirname(real):
        real = os.path.dirname(real)
        names.append(real)
    cur = os.dup(fd)
    try:
        for level in range(256):
            st = os.fstat(cur)
            problem = _dir_problem(st)
            if problem:
                where = names[level] if level < len(names) else f"a directory above {shown}"
                above = "" if level == 0 else f" (above {shown})"
                raise UntrustedFile(
                    f"The directory {where}{above} {problem}: another user could put "
                    f"files there, so corral does not use {target or 'what it holds'}. "
                    f"Fix the "
                    f"directory (chmod go-w, or chown), or use another one.")
            up = os.open("..", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=cur)
            os.close(cur)
            cur = up
            if os.path.samestat(os.fstat(cur), st):
                return  # the root
        raise UntrustedFile(f"{shown} is nested too deep to be checked: corral does not "
                            f"use {target or 'what it holds'}.")
    finally:
        os.close(cur)


@contextlib.contextmanager
def owned_directory(path: str | os.PathLike[str]) -> Iterator[int]:
    """An ``O_PATH`` descriptor of the directory ``path`` (for ``dir_fd=`` calls), once it
    and every directory above it are owned by this user or root and not writable by others
    (unless sticky).

    Raises:
        FileNotFoundError: it does not exist.
        UntrustedFile: it, or a directory above it, fails those checks (or is no directory).
    """
    _refuse_way(path)
    try:
        fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except NotADirectoryError:
        raise UntrustedFile(f"{path} is not a directory: corral does not use it.") from None
    try:
        _check_chain(fd, os.fspath(path))
        yield fd
    finally:
        os.close(fd)


_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"),
          (stat.S_ISDIR, "a directory"))


def _file_problem(st: os.stat_result, private: bool) -> tuple[str, str] | None:
    """What is wrong with a file about to be read, and what to do, or None."""
    for test, kind in _KINDS:
        if test(st.st_mode):
            return (f"is {kind}, not a regular file",
                    "Replace the link with the file itself." if kind == "a symbolic link"
                    else "Remove it.")
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file", "Remove it."
    mode = stat.S_IMODE(st.st_mode)
    if st.st_nlink > 1:  # a hard link planted there: another file's (/etc/shadow) name too
        return (f"has {st.st_nlink} names (hard links), so it may be another file",
                "Remove it if you did not link it there.")
    if st.st_uid != os.geteuid():
        return (f"belongs to {_who(st.st_uid)}, not to you ({_who(os.geteuid())})",
                "Remove it if you did not put it there, or chown it." + _sudo_hint(st.st_uid))
    if mode & 0o022:
        return f"can be changed by other users (mode {mode:04o})", "chmod go-w it."
    if private and mode & 0o077:
        return f"can be read by other users (mode {mode:04o})", "chmod 600 it."
    return None


def _refuse(path: str, problem: tuple[str, str]) -> UntrustedFile:
    what, fix = problem
    return UntrustedFile(f"{path} {what}: corral does not use it. {fix}")


def open_owned(path: str | os.PathLike[str], mode: str = "rb", *,
               private: bool = False) -> IO[Any]:
    """Open one of corral's own files, checked (see the module's docstring).

    ``mode``: ``"rb"``/``"r"`` read it; ``"ab"``/``"a"`` append to it (created 0600 when
    missing; made 0600 when it is ours but looser). Text modes are UTF-8. ``private``: a
    file read must not be readable by others either (a key).

    Raises:
        FileNotFoundError: it (or its directory) does not exist (nothing was checked).
        UntrustedFile: it or its directory fails a check; nothing was read or written.
    """
    if mode not in ("rb", "r", "ab", "a"):
        raise ValueError(f"open_owned: unsupported mode {mode!r}")
    shown = os.fspath(path)
    directory, name = os.path.split(os.path.abspath(shown))
    append = mode.startswith("a")
    _refuse_way(directory, shown)
    try:
        dfd = os.open(directory, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except NotADirectoryError:
        raise UntrustedFile(f"{directory} is not a directory: corral does not use "
                            f"{shown}.") from None
    try:
        try:
            st: os.stat_result | None = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            if not append:
                raise  # nothing to read: nothing to complain about either
            st = None
        _check_chain(dfd, directory, shown)
        if st is not None:
            # before opening: a device or FIFO is never opened at all
            problem = _file_problem(st, private and not append)
            if problem and not (append and problem[0].startswith("can be")):
                raise _refuse(shown, problem)
        flags = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
        flags |= (os.O_WRONLY | os.O_APPEND | os.O_CREAT) if append else os.O_RDONLY
        try:
            fd = os.open(name, flags, 0o600, dir_fd=dfd)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENXIO):  # swapped for a link or a FIFO
                raise UntrustedFile(f"{shown} is not a regular file (it changed while it "
                                    f"was opened): corral does not use it.") from None
            raise
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)  # what was opened: the check that counts
        problem = _file_problem(st, private and not append)
        if append and problem and problem[0].startswith("can be"):
            os.fchmod(fd, 0o600)  # ours, made by an older corral: private now
            problem = None
        if problem:
            raise _refuse(shown, problem)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        if append:
            os.fchmod(fd, 0o600)
        return os.fdopen(fd, mode, encoding=None if mode.endswith("b") else "utf-8")
    except BaseException:
        os.close(fd)
        raise


def read_owned(path: str | os.PathLike[str], *, private: bool = False,
               limit: int = 16 << 20) -> bytes:
    """The content of one of corral's own files, checked like :func:`open_owned`.

    Raises:
        FileNotFoundError: it does not exist.
        UntrustedFile: it fails a check, or is larger than ``limit`` bytes.
    """
    with open_owned(path, "rb", private=private) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise UntrustedFile(f"{os.fspath(path)} is larger than {limit} bytes, more than "
                            f"corral ever writes there: corral does not use it.")
    return data


def check_owned(path: str | os.PathLike[str], *, private: bool = False) -> str | None:
    """Why one of corral's own files that another program reads by its path (a client
    certificate, a pinned server certificate) must not be used; None: it may (or it is
    missing, which the user of the path reports)."""
    try:
        open_owned(path, "rb", private=private).close()
    except FileNotFoundError:
        return None
    except UntrustedFile as e:
        return e.message
    except OSError as e:
        return f"{os.fspath(path)} cannot be read ({e.strerror or e})"
    return None
