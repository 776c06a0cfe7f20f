"""The console (``lxc-console``) and attach shell (``lxc-attach``) of LXC containers, each on
a pty held by corral's console server, so it outlives corral and keeps what was printed."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from ..base import Backend
from ..errors import Conflict, Unsupported
from ..models import InstanceRef, InstanceStatus
from .tools import LXCTools

if TYPE_CHECKING:  # (the console client, websockets and all, is loaded by the first console)
    from ..console import WebSocketSession

# What a shell needs, and nothing of corral's own environment (tokens, SSH_AUTH_SOCK…),
# which the container's root could read from /proc/<pid>/environ.
SHELL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_LOCALE = re.compile(r"[A-Za-z0-9_.@-]{1,64}")


def shell_env() -> list[str]:
    """``NAME=value`` settings of a shell inside a container (``lxc-attach --clear-env``):
    the terminal type, a standard PATH, root's home and user name, and the user's locale
    when it is a plain locale name."""
    lang = os.environ.get("LANG", "")
    return ["TERM=xterm-256color", f"PATH={SHELL_PATH}", "HOME=/root", "USER=root",
            "LOGNAME=root", f"LANG={lang if _LOCALE.fullmatch(lang) else 'C.UTF-8'}"]


class Consoles(Backend):
    """``open_console``/``open_shell`` of :class:`~backends.lxc.backend.LXCBackend`."""

    lxc: LXCTools

    async def _require_running(self, ref: InstanceRef) -> None:
        current = await self.get_instance(ref)
        if current.status is not InstanceStatus.RUNNING:
            raise Conflict(f"{ref} is {current.status.value}: start it to use its console.")

    def _console_dir(self, ref: InstanceRef) -> Path:
        tag = hashlib.sha256(self.lxc.path.encode()).hexdigest()[:12]
        name = ref.name
        if len(name) > 24:  # keep socket paths under AF_UNIX's 107 bytes
            name = name[:12] + "-" + hashlib.sha256(name.encode()).hexdigest()[:10]
        from ..console.client import console_dir

        return console_dir("lxc", tag, name)

    async def open_console(self, ref: InstanceRef, *, width: int = 80, height: int = 24,
                           kind: str = "console") -> WebSocketSession:
        """The container's /dev/console (tty 0) through ``lxc-console`` on a pty, held by
        corral's console server so it outlives corral and keeps what was printed.

        lxc-console's escape (Ctrl+a) is doubled on input, so it reaches the container like
        any other key; corral's console detaches with its own key.
        """
        if kind != "console":
            raise Unsupported("Containers have no VGA screen; use the console.")
        await self._require_running(ref)
        from ..console import attach_local

        return await attach_local(
            f"{ref} console", str(self._console_dir(ref) / "console.ws"),
            ["--escape", "01", "--pty", "--",
             "lxc-console", "-P", self.lxc.path, "-n", ref.name, "-t", "0"],
            width=width, height=height)

    async def open_shell(self, ref: InstanceRef, command: list[str] | None = None, *,
                         width: int = 80, height: int = 24) -> WebSocketSession:
        """A shell (or ``command``) inside the container through ``lxc-attach`` on a pty:
        bash when the container has it, else sh. The shell is held by a console server:
        detaching leaves it running, and the next attach (from this corral or a new one)
        finds it again; it ends when the shell exits."""
        await self._require_running(ref)
        argv = command or ["/bin/sh", "-c",
                           "if command -v bash >/dev/null 2>&1; then exec bash -l; "
                           "else exec sh -l; fi"]
        tag = "shell" if command is None else "shell-" + hashlib.sha256(
            "\0".join(command).encode()).hexdigest()[:10]
        from ..console import attach_local

        return await attach_local(
            f"{ref} shell", str(self._console_dir(ref) / f"{tag}.ws"),
            ["--pty", "--", "lxc-attach", "-P", self.lxc.path, "-n", ref.name,
             "--clear-env", *(a for var in shell_env() for a in ("--set-var", var)),
             "--", *argv],
            width=width, height=height)
