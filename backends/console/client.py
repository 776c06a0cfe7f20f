"""Console sessions over websockets — the one way every console reaches the widget.

:class:`WebSocketSession` speaks LXD's console/exec protocol (a data websocket with
binary frames, control messages as JSON text on a control websocket) and the same
protocol as corral's own console server (control inline on the data websocket).
:func:`attach_local` starts the console server for a local source when none is running
and returns a session on it.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, Awaitable, Callable

from websockets.asyncio.client import ClientConnection, unix_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, WebSocketException

from ..base import ConsoleSink
from ..errors import OperationFailed, Unsupported
from ..paths import runtime_dir
from .server import lock_path, strip_queries

Opener = Callable[[], Awaitable[ClientConnection]]


class WebSocketSession:
    """An attached console or shell, fed over websockets.

    Args:
        title: what the console is, for messages ("lxd:c1 console").
        open_data: connects the data websocket.
        open_control: connects the control websocket (LXD); None sends control messages
            inline as text frames on the data websocket (corral's console server).
        prefill: history to show before live output (e.g. LXD's console log).
        ended: after the data websocket closed, says how the session ended (e.g. an exec's
            exit code) — or None to use the close reason.
        special_keys: chord names the source accepts in a ``keys`` control message.
    """

    def __init__(self, title: str, open_data: Opener, *, open_control: Opener | None = None,
                 prefill: Callable[[], Awaitable[bytes]] | None = None,
                 ended: Callable[[], Awaitable[str | None]] | None = None,
                 special_keys: tuple[str, ...] = (), resizable: bool = True,
                 lost: str | None = None) -> None:
        self.title = title
        self._lost = lost or f"the connection to {title} was lost"
        self._open_data = open_data
        self._open_control = open_control
        self._prefill = prefill
        self._ended = ended
        self.special_keys = special_keys
        self.resizable = resizable
        self._data: ClientConnection | None = None
        self._control: ClientConnection | None = None
        self._task: asyncio.Task[None] | None = None
        self._history = b""
        self._detached = False
        self._closed = asyncio.Event()
        self.exit_reason = ""
        self.on_event: Callable[[str], None] | None = None
        """Called with the events the console server reports: ``graphics`` (a VGA text
        screen whose guest left text mode)."""

    async def start(self, sink: ConsoleSink) -> None:
        """Connect, deliver the history to ``sink``, then live output until the end."""
        try:
            if self._open_control is not None:
                self._control = await self._open_control()
            self._data = await self._open_data()
        except (OSError, InvalidHandshake, WebSocketException, asyncio.TimeoutError) as e:
            await self._close_sockets()
            raise OperationFailed(f"Cannot attach to {self.title}: {_words(e)}") from e
        if self._prefill is not None:
            try:
                self._history = strip_queries(await self._prefill())
            except Exception:  # a missing log is no reason to fail attaching
                self._history = b""
            if self._history:
                sink.feed(self._history)
        self._task = asyncio.ensure_future(self._pump(sink))

    async def _pump(self, sink: ConsoleSink) -> None:
        assert self._data is not None
        reason = ""
        try:
            async for message in self._data:
                if isinstance(message, bytes):
                    sink.feed(message)
                elif message == "":  # LXD's end-of-output marker
                    break
                else:
                    self._event(message)
        except ConnectionClosed:
            pass
        except Exception as e:  # any failure ends this session, in words
            reason = f"the connection failed: {_words(e)}"
        if self._detached:
            reason = "detached"
        elif not reason:
            await self._close_sockets()  # LXD completes an exec once the client closed
            if self._ended is not None:
                try:
                    reason = await self._ended() or ""
                except Exception:
                    reason = ""
            if not reason:
                rcvd = self._data.protocol.close_rcvd
                if rcvd is not None and rcvd.reason:
                    reason = rcvd.reason
                elif rcvd is None or rcvd.code not in (1000, 1001):
                    reason = self._lost
                else:
                    reason = "the console ended"
        self.exit_reason = reason
        await self._close_sockets()
        self._closed.set()
        sink.closed(reason)

    def _event(self, text: str) -> None:
        """A JSON event of corral's console server (``{"event": "graphics"}``)."""
        try:
            name = json.loads(text).get("event")
        except (ValueError, AttributeError):
            return
        if isinstance(name, str) and self.on_event is not None:
            try:
                self.on_event(name)
            except Exception:  # a listener's bug must not end the console
                logging.getLogger(__name__).exception("console event listener failed")

    async def _send_control(self, message: dict[str, Any]) -> None:
        target = self._control or self._data
        if target is None:
            return
        try:
            await target.send(json.dumps(message))
        except ConnectionClosed:
            pass

    async def send_bytes(self, data: bytes) -> None:
        if self._data is None or not data:
            return
        try:
            await self._data.send(data)
        except ConnectionClosed:
            pass

    async def resize(self, width: int, height: int) -> None:
        await self._send_control({"command": "window-resize",
                                  "args": {"width": str(width), "height": str(height)}})

    async def send_special(self, name: str) -> None:
        """A key chord the source knows (VGA: "ctrl+alt+del", "ctrl+alt+f2", "sysrq")."""
        if name not in self.special_keys:
            raise Unsupported(f"{self.title} cannot send {name}.")
        await self._send_control({"command": "keys", "args": {"name": name}})

    async def _close_sockets(self) -> None:
        for ws in (self._control, self._data):
            if ws is not None:
                try:
                    await asyncio.wait_for(ws.close(), 2)
                except (asyncio.TimeoutError, OSError, WebSocketException):
                    pass

    async def close(self) -> None:
        """Detach: the console (and, for local consoles, its server) goes on."""
        self._detached = True
        if self._control is not None:  # LXD tears down both on a normal control close
            try:
                await asyncio.wait_for(self._control.close(), 2)
            except (asyncio.TimeoutError, OSError, WebSocketException):
                pass
        await self._close_sockets()
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=3)

    async def wait(self) -> str:
        await self._closed.wait()
        return self.exit_reason

    async def history(self) -> bytes:
        return self._history


def _words(e: BaseException) -> str:
    if isinstance(e, FileNotFoundError):
        return "its socket is gone"
    if isinstance(e, ConnectionRefusedError):
        return "nobody is listening"
    if isinstance(e, asyncio.TimeoutError):
        return "it did not answer in time"
    if isinstance(e, OSError):
        return e.strerror or str(e)
    return str(e) or type(e).__name__


# Local console servers ---------------------------------------------------------------


def console_dir(*parts: str) -> Path:
    """Where local console servers put their sockets (private to this user)."""
    return runtime_dir("consoles", *parts)


def server_alive(sock: str) -> bool:
    """True while a console server holds the lock of ``sock``."""
    try:
        fd = os.open(lock_path(sock), os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def server_pid(sock: str) -> int | None:
    try:
        return int(Path(lock_path(sock)).read_text().split()[0]) if server_alive(sock) else None
    except (OSError, ValueError, IndexError):
        return None


# The server runs isolated (-I: no current directory, user site-packages or PYTHON*
# variables on sys.path) from "/", importing corral from where this corral was imported:
# a "backends/" folder in the directory corral was started from is never imported (as root,
# that would run whatever a user left there).
_BOOT = ("import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); "
         "runpy.run_module('backends.console', run_name='__main__', alter_sys=True)")


def server_argv() -> list[str]:
    """The command that starts a console server (its options follow)."""
    root = str(Path(__file__).resolve().parents[2])  # the directory holding backends/
    return [sys.executable, "-I", "-c", _BOOT, root]


async def ensure_server(sock: str, source: list[str], *, width: int = 80,
                        height: int = 24, pass_fds: tuple[int, ...] = ()) -> bool:
    """Start the console server for ``sock`` unless one runs. True if this call started it.

    ``source`` is the server's source arguments (``["--unix", path, "--log", log]``,
    ``["--vga-qmp", path]`` or ``["--pty", "--", *argv]``, last); ``pass_fds``: open
    file descriptors the server inherits (``--vnc-fd N``).
    """
    if server_alive(sock):
        return False
    Path(sock).parent.mkdir(parents=True, exist_ok=True)
    proc = await asyncio.create_subprocess_exec(
        *server_argv(), "--socket", sock,
        "--width", str(width), "--height", str(height), *source,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, cwd="/", pass_fds=pass_fds)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 20)
    except asyncio.TimeoutError:
        proc.kill()
        raise OperationFailed("The console server did not start within 20 s.") from None
    if proc.returncode != 0:
        raise OperationFailed("The console could not be opened: "
                              + (err.decode(errors="replace").strip()
                                 or f"exit status {proc.returncode}"))
    return out.strip() == b"ok"


def local_opener(sock: str, respawn: Callable[[], Awaitable[Any]] | None = None) -> Opener:
    """Connects to the console server at ``sock``. With ``respawn``, a server found dead
    when connecting (killed a moment ago, its socket file left behind) is started again."""

    async def open_data() -> ClientConnection:
        deadline = asyncio.get_running_loop().time() + 5
        while True:
            try:
                return await unix_connect(sock, uri="ws://corral/console", max_size=2**22,
                                          open_timeout=5, ping_interval=None)
            except (ConnectionRefusedError, FileNotFoundError):
                if respawn is None or asyncio.get_running_loop().time() > deadline:
                    raise
            if not server_alive(sock):
                Path(sock).unlink(missing_ok=True)
                await respawn()
            else:
                await asyncio.sleep(0.1)  # starting up, or a moment from exiting

    return open_data


def local_session(title: str, sock: str, *, special_keys: tuple[str, ...] = (),
                  resizable: bool = True,
                  respawn: Callable[[], Awaitable[Any]] | None = None) -> WebSocketSession:
    """A session on the console server at ``sock`` (see :func:`local_opener`)."""
    return WebSocketSession(title, local_opener(sock, respawn), special_keys=special_keys,
                            resizable=resizable,
                            lost=f"the console server of {title} stopped without a word "
                                 f"(killed?); open the console again to restart it")


async def attach_local(title: str, sock: str, source: list[str], *, width: int = 80,
                       height: int = 24, special_keys: tuple[str, ...] = (),
                       resizable: bool = True) -> WebSocketSession:
    """Start the server of a local console if needed; return a session on it."""
    await ensure_server(sock, source, width=width, height=height)
    return local_session(title, sock, special_keys=special_keys, resizable=resizable,
                         respawn=lambda: ensure_server(sock, source, width=width,
                                                       height=height))
