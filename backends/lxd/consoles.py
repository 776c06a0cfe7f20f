"""Consoles of LXD/Incus instances over the daemon's websockets: the console (a container's
/dev/console with its console log first, a VM's first serial port), an interactive exec
shell on a pty, the command that shows a VM's SPICE screen, and non-interactive exec with
data on stdin (:func:`exec_with_input`, for ``chpasswd``).

Wire facts (``docs/protocols.md``, section "Console and exec websockets"): a console or
interactive exec gives fds ``0`` (the pty) and ``control`` (resize, signals);
non-interactive exec (``interactive: false``) gives fds ``0``, ``1``, ``2`` and ``control``,
and an empty **text** frame on ``0`` is end-of-input (LXD's ``WebsocketRecvStream`` treats a
text message as the stream barrier and closes the process's stdin).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, Any

from websockets.exceptions import ConnectionClosed

from ..base import Backend
from ..errors import Conflict, InvalidInput, OperationFailed, Unsupported
from ..models import Instance, InstanceRef, InstanceStatus, InstanceType
from .rest import Rest
from .sockets import Sockets

if TYPE_CHECKING:  # (the console client is loaded by the first console, not at start-up)
    from ..console import WebSocketSession

_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class _NoFrames(logging.LoggerAdapter):
    """A websockets logger that never logs frames at DEBUG (they would carry the secret)."""

    def isEnabledFor(self, level: int) -> bool:  # logging's name
        return level > logging.DEBUG and self.logger.isEnabledFor(level)


_QUIET = _NoFrames(logging.getLogger("corral.lxd.exec"), {})


class Consoles(Backend):
    """The console verbs of :class:`~backends.lxd.backend.LXDBackend`."""

    rest: Rest
    sockets: Sockets

    async def open_console(self, ref: InstanceRef, *, width: int = 80, height: int = 24,
                           kind: str = "console") -> WebSocketSession:
        """The instance's console over LXD's console websockets: a container's
        /dev/console (its console log shown first), a VM's first serial port.

        ``kind="vga"`` is SPICE graphics on LXD/Incus VMs, which a terminal cannot draw:
        refused with that explanation (see :meth:`spice_viewer_argv`).
        """
        rest = self.rest
        if kind == "vga":
            inst = await self.get_instance(ref)
            if inst.type is not InstanceType.VM:
                raise Unsupported("Containers have no VGA screen; use the console.")
            raise Unsupported(
                f"The screen of {ref} is SPICE graphics, which a terminal cannot show. "
                f"Use its serial console here, or `{' '.join(self.spice_viewer_argv(ref))}` "
                f"on a machine with a display.")
        if kind != "console":
            raise InvalidInput(f"Unknown console type '{kind}'.")
        inst = await require_running(self, ref, "console")
        op_id, fds = await self.sockets.websocket_operation(
            ref, "console", {"width": width, "height": height, "type": "console"})
        client = rest.client

        async def prefill() -> bytes:
            if inst.type is InstanceType.VM and rest.product != "Incus":
                return b""  # LXD keeps a console log for containers only

            def _log() -> bytes:
                r = client.api.instances[ref.name].console.get()
                return r.content[-256 * 1024:]

            return await rest.call(_log)

        from ..console import WebSocketSession

        return WebSocketSession(
            f"{ref} console", self.sockets.operation_socket(op_id, fds["0"]),
            open_control=self.sockets.operation_socket(op_id, fds["control"]), prefill=prefill,
            lost=f"the connection to '{self.remote.name}' was lost")

    async def open_shell(self, ref: InstanceRef, command: list[str] | None = None, *,
                         width: int = 80, height: int = 24) -> WebSocketSession:
        """An interactive command (default: bash if the image has it, else sh) on a pty in
        the instance, over LXD's exec websockets."""
        rest = self.rest
        await require_running(self, ref, "shell")
        argv = command or ["/bin/sh", "-c",
                           "if command -v bash >/dev/null 2>&1; then exec bash -l; "
                           "else exec sh -l; fi"]
        body = {"command": argv, "wait-for-websocket": True, "interactive": True,
                "environment": {"TERM": "xterm-256color", "HOME": "/root", "PATH": _PATH},
                "width": width, "height": height}
        op_id, fds = await self.sockets.websocket_operation(ref, "exec", body)
        program = os.path.basename(argv[0]) if command else "the shell"
        client = rest.client

        async def ended() -> str | None:
            # after the command's output ends (an empty text frame) and the client closed
            # its websockets, the operation completes with the exit code
            def _wait() -> str | None:
                r = client.api.operations[op_id].wait.get(params={"timeout": 5}, timeout=10)
                meta = r.json().get("metadata") or {}
                code = (meta.get("metadata") or {}).get("return")
                if code is None:
                    return meta.get("err") or None
                return f"{program} exited ({code})"

            return await rest.call(_wait)

        from ..console import WebSocketSession

        return WebSocketSession(
            f"{ref} shell", self.sockets.operation_socket(op_id, fds["0"]),
            open_control=self.sockets.operation_socket(op_id, fds["control"]), ended=ended,
            lost=f"the connection to '{self.remote.name}' was lost")

    def spice_viewer_argv(self, ref: InstanceRef) -> list[str]:
        """The CLI's ``console --type=vga``, which proxies the VM's SPICE screen over
        LXD's websocket to remote-viewer. An Incus remote shown as ``incus-<name>`` (its
        LXD namesake came first) is ``<name>`` to the incus CLI."""
        cli = "incus" if self.remote.kind == "incus" else "lxc"
        remote = ref.remote.removeprefix("incus-") if cli == "incus" else ref.remote
        return [cli, "console", f"{remote}:{ref.name}", "--type=vga"]


async def require_running(backend: Backend, ref: InstanceRef, what: str) -> Instance:
    """The instance, freshly read; Conflict (in words) unless it runs."""
    inst = await backend.get_instance(ref)
    if inst.status is InstanceStatus.FROZEN:
        raise Conflict(f"{ref} is frozen: resume it to use its {what}.")
    if inst.status is not InstanceStatus.RUNNING:
        raise Conflict(f"{ref} is {inst.status.value}: start it to use its {what}.")
    return inst


async def exec_with_input(sockets: Sockets, ref: InstanceRef, argv: list[str], data: bytes,
                          *, timeout: float = 60) -> tuple[int | None, bytes, bytes]:
    """Run ``argv`` non-interactively with ``data`` on stdin, then end-of-input;
    return (exit code, stdout, stderr). Frames are never logged."""
    rest = sockets.rest
    name = rest.remote.name
    body = {"command": argv, "wait-for-websocket": True, "interactive": False,
            "environment": {"PATH": _PATH, "HOME": "/root", "LANG": "C"},
            "record-output": False}
    op_id, fds = await sockets.websocket_operation(ref, "exec", body)
    if "1" not in fds or "2" not in fds:
        raise OperationFailed(f"'{name}' gave no output websockets.")
    opened: list[Any] = []
    out: dict[str, bytearray] = {"1": bytearray(), "2": bytearray()}

    async def reader(ws: Any, key: str) -> None:
        try:
            async for frame in ws:
                if isinstance(frame, str):
                    if not frame:
                        break
                    frame = frame.encode()
                out[key] += frame
        except ConnectionClosed:
            pass

    try:
        async with asyncio.timeout(timeout):
            for key in ("control", "1", "2", "0"):
                ws = await sockets.operation_socket(op_id, fds[key], logger=_QUIET)()
                opened.append(ws)
            control, stdout, stderr, stdin = opened
            readers = [asyncio.ensure_future(reader(stdout, "1")),
                       asyncio.ensure_future(reader(stderr, "2"))]
            try:
                await stdin.send(data)
                await stdin.send("")  # end of input: LXD closes the process's stdin
                await asyncio.gather(*readers)
            finally:
                for r in readers:
                    r.cancel()
    except TimeoutError:
        raise OperationFailed(f"{argv[0]} in {ref} did not finish within "
                              f"{int(timeout)} s.") from None
    except (OSError, ConnectionClosed) as e:
        raise OperationFailed(f"The connection to '{name}' was lost while "
                              f"running {argv[0]} in {ref} ({type(e).__name__}).") from None
    finally:
        for ws in reversed(opened):
            try:
                await ws.close()
            except Exception:
                pass
    client = rest.client

    def _wait() -> dict[str, Any]:
        return client.api.operations[op_id].wait.get(
            params={"timeout": 30}, timeout=30 + rest.timeout).json()["metadata"]

    try:
        meta = await rest.call(_wait, timeout=60)
    except OperationFailed as e:
        return None, bytes(out["1"]), (str(e) or "").encode()
    code = (meta.get("metadata") or {}).get("return")
    if code is None:
        return None, bytes(out["1"]), bytes(out["2"]) + str(meta.get("err") or "").encode()
    return int(code), bytes(out["1"]), bytes(out["2"])
