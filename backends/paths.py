"""Where corral keeps runtime files (sockets, pid and lock files): a directory only this
user can reach. ``$XDG_RUNTIME_DIR`` is used when it is a real directory owned by the
effective user with mode 0700 (under ``su``/``sudo -E`` it can be another user's); otherwise,
and without it (ssh sessions without pam_systemd, cron), a ``/tmp`` fallback created private
and checked, so another user cannot plant it (symlinked lock files, a fake console socket
catching what is typed). Modes are changed through a descriptor opened with ``O_NOFOLLOW``,
never through a path a link could redirect. :func:`private_file` creates files only the
user can read (exports, recordings); :func:`export_target` checks where a new export
archive may go."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

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
        return os.fdopen(fd, "wb" if binary else "w", **({} if binary else
                                                          {"encoding": "utf-8"}))
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
