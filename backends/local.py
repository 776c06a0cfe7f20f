"""The local remotes (QEMU's VM directory, LXC's lxcpaths) as :class:`Remote` values.

Kept apart from the backends themselves, so that finding which local remotes exist costs
no import of QMP, websockets or the LXC plumbing at start-up.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .models import Remote


def default_qemu_dir() -> str:
    data = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return os.path.join(data, "corral", "qemu")


def qemu_remote(path: str | None = None) -> Remote:
    path = os.path.abspath(os.path.expanduser(path or default_qemu_dir()))
    return Remote(name="qemu", kind="qemu", address=path, source="local QEMU",
                  addresses=(path,))


def default_lxcpath() -> str:
    """The lxc tools' default: the system path for root, the user path otherwise."""
    if os.geteuid() == 0:
        return "/var/lib/lxc"
    data = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return os.path.join(data, "lxc")


def lxc_remotes(paths: list[str] | tuple[str, ...] = ()) -> list[Remote]:
    """One remote per lxcpath: ``lxc`` for the first, ``lxc-<dir name>`` for others.

    Without configured paths, the default lxcpath is used when the lxc tools are installed.
    """
    if not paths:
        if shutil.which("lxc-ls") is None:
            return []
        paths = [default_lxcpath()]
    remotes = []
    for i, path in enumerate(paths):
        path = os.path.abspath(os.path.expanduser(path))
        name = "lxc" if i == 0 else f"lxc-{Path(path).name}"
        remotes.append(Remote(name=name, kind="lxc", address=path, source="lxc tools",
                              addresses=(path,)))
    return remotes
