"""libvirt connections of this user beside ``qemu:///system`` and ``libvirt.conf``
(``backends/remotes.py`` asks; importing this needs no libvirt binding):

- ``qemu:///session`` for a user who is not root, when its socket is there
  (``$XDG_RUNTIME_DIR/libvirt/virtqemud-sock`` or ``libvirt-sock``; the daemon is not
  started by corral).
- The connections virt-manager saved: its GSettings key
  ``org.virt-manager.virt-manager.connections uris``, read with the ``gsettings`` program
  when it is there, with a short time-out; unreadable (no program, no schema, a hang) is
  nothing.

Each is named after what it reaches (``libvirt-session``, the host of an SSH URI) and left
out when another remote already has its URI.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
from typing import Mapping
from urllib.parse import urlsplit

GSETTINGS_TIMEOUT = 1.5
"""Seconds ``gsettings`` gets (it may wait on D-Bus); after that virt-manager's list is
nothing."""
VIRT_MANAGER_KEY = ("org.virt-manager.virt-manager.connections", "uris")
SESSION_SOCKETS = ("virtqemud-sock", "libvirt-sock")


def runtime_dir(env: Mapping[str, str], uid: int) -> str:
    return env.get("XDG_RUNTIME_DIR") or f"/run/user/{uid}"


def session_socket(env: Mapping[str, str], uid: int) -> str | None:
    """The socket of this user's ``qemu:///session`` daemon, when one is there (never for
    root: root's ``qemu:///session`` is not a daemon of its own worth listing)."""
    import stat

    if uid == 0:
        return None
    for name in SESSION_SOCKETS:
        path = os.path.join(runtime_dir(env, uid), "libvirt", name)
        try:
            if stat.S_ISSOCK(os.stat(path).st_mode):
                return path
        except OSError:
            continue
    return None


def session_uri(socket: str, uid: int) -> str:
    """``qemu:///session`` when libvirt's client finds that socket itself (the process's
    own runtime directory), else the socket named."""
    if os.path.dirname(os.path.dirname(socket)) == runtime_dir(os.environ, uid):
        return "qemu:///session"
    return f"qemu+unix:///session?socket={socket}"


def virt_manager_uris(env: Mapping[str, str]) -> list[str]:
    """The connection URIs virt-manager saved (``gsettings get``; [] when unreadable)."""
    program = shutil.which("gsettings", path=env.get("PATH", ""))
    if program is None:
        return []
    try:
        done = subprocess.run([program, "get", *VIRT_MANAGER_KEY], env=dict(env),
                              capture_output=True, text=True, timeout=GSETTINGS_TIMEOUT,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return []
    text = done.stdout.strip()
    if done.returncode != 0 or not text:
        return []
    text = text.removeprefix("@as").strip()  # GVariant's empty array: "@as []"
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return []
    if not isinstance(value, (list, tuple)):
        return []
    return [u for u in value if isinstance(u, str) and "://" in u]


def name_for(uri: str) -> str:
    """A remote name for a libvirt URI: ``libvirt``/``libvirt-session`` on this machine,
    else the host (``-session`` for a session), another driver's name in front."""
    parts = urlsplit(uri)
    driver = parts.scheme.split("+", 1)[0] or "libvirt"
    session = parts.path.rstrip("/") == "/session"
    host = parts.hostname or ""
    if not host or (host in ("localhost", "127.0.0.1", "::1") and "+" not in parts.scheme):
        base = "libvirt" if driver == "qemu" else f"libvirt-{driver}"
    else:
        base = host if driver == "qemu" else f"{driver}-{host}"
    base = "".join(c if c.isalnum() or c in "-_." else "-" for c in base)
    return f"{base}-session" if session else base


def is_local(uri: str) -> bool:
    """A URI of this machine's own daemon (``qemu:///system``, ``qemu:///session``)."""
    return not urlsplit(uri).hostname


def same_uri(a: str, b: str) -> bool:
    """Whether two URIs name the same connection (a trailing slash aside)."""
    return a.rstrip("/") == b.rstrip("/")
