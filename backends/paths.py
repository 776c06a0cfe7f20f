"""Where corral keeps runtime files (sockets, pid and lock files): a directory only this
user can reach. ``$XDG_RUNTIME_DIR`` is that already; the ``/tmp`` fallback (ssh sessions
without pam_systemd, cron, su) is created private and checked, so another user cannot
plant it (symlinked lock files, a fake console socket catching what is typed)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import OperationFailed


def _private(path: Path) -> None:
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise OperationFailed(f"{path} is not a directory (a symlink?): corral will not "
                              f"use it for its runtime files. Remove it.")
    if st.st_uid != os.getuid():
        raise OperationFailed(f"{path} belongs to uid {st.st_uid}, not to you: corral will "
                              f"not use it for its runtime files. Remove it, or set "
                              f"XDG_RUNTIME_DIR.")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)  # ours (made by an older corral): make it private


def _fallback() -> Path:
    return Path(f"/tmp/corral-{os.getuid()}")


def runtime_dir(*parts: str) -> Path:
    """``$XDG_RUNTIME_DIR/corral/<parts>`` (else ``/tmp/corral-<uid>/corral/<parts>``),
    each level made private (0700, owned by this user, not a symlink)."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    path = Path(base) if base else _fallback()
    if not base:
        _private(path)
    elif not path.is_dir():
        os.makedirs(path, 0o700, exist_ok=True)  # a made-up XDG_RUNTIME_DIR (tests, sudo)
    for part in ("corral", *parts):
        path = path / part
        _private(path)
    return path
