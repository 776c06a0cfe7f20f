"""corral's console server: one small detached process per local console.

It holds the console source — a QEMU serial socket, a program on a pty (``lxc-console``,
``lxc-attach``), a VM's VGA text memory read over a QMP socket of its own, or a VM's
graphical screen over QEMU's VNC socket (:mod:`.display`, its own frame protocol) — keeps a
ring buffer of recent output, and serves websocket connections on a unix socket. So a
console outlives corral, output made while nobody watched is shown on attach, and two
viewers can watch at once. The wire format is LXD's: binary frames carry terminal bytes
both ways, text frames carry JSON control messages (``window-resize`` with string
``width``/``height``; ``keys`` with a chord name for VGA consoles; from the server,
``{"event": "graphics"}`` when a VGA screen leaves text mode). When the source ends,
every viewer is closed with code 1000 and the reason, and the server exits.

Started as ``python -m backends.console --socket PATH SOURCE...``; the command
returns once the server listens (exit 0), or prints why it could not (exit 1). One
server per socket: an exclusive ``flock`` on ``PATH.lock`` held for the server's life
tells a second start (exit 0, "running") and anyone checking that it is alive.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import re
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from websockets.asyncio.server import ServerConnection, unix_serve
from websockets.exceptions import ConnectionClosed

from ..session import PtySession, RingBuffer, SocketSession
from .serial_log import SERIAL_LOG_MAX, SERIAL_LOG_MIN, check_every, trim
from .vga import BDA, BDA_SIZE, SPECIAL_CHORDS, VGAScreen, keys_for_input, parse_bda

QUERY = re.compile(rb"\x1b\[[?>]?[0-9;]*[cn]")


def strip_queries(data: bytes) -> bytes:
    """History without terminal queries (``ESC[6n``, ``ESC[c``…): replayed, they would make
    the viewer answer the guest again, typing the answers into its shell."""
    return QUERY.sub(b"", data)


class Hub:
    """The viewers of one console, and what they missed."""

    def __init__(self, history: int) -> None:
        self.ring = RingBuffer(history)
        self.viewers: dict[ServerConnection, asyncio.Queue[bytes | str | None]] = {}
        self.snapshot: Any = None  # callable giving the history, when not the ring

    def history(self) -> bytes:
        if self.snapshot is not None:
            return self.snapshot()
        return strip_queries(self.ring.getvalue())

    def feed(self, data: bytes) -> None:
        if not data:
            return
        self.ring.append(data)
        for ws, queue in list(self.viewers.items()):
            if queue.qsize() > 4096:  # a viewer that stopped reading
                self.viewers.pop(ws, None)
                asyncio.ensure_future(ws.close(1008, "viewer too slow"))
                continue
            queue.put_nowait(data)

    def event(self, name: str) -> None:
        """Tell every viewer something about the source, as a text frame."""
        for queue in self.viewers.values():
            queue.put_nowait(json.dumps({"event": name}))


class Server:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.hub = Hub(args.history)
        self.done = asyncio.Event()
        self.reason = ""
        self.source: Any = None
        self.vga: VGAScreen | None = None
        self.qmp: Any = None
        self.logged = 0
        """Bytes from the source since the serial log's size was last looked at."""
        self.display: Any = None  # a DisplayHub, for --vnc

    # Sources -----------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:  # ConsoleSink
        self.hub.feed(data)
        if self.args.log:
            self.logged += len(data)
            if self.logged >= check_every(self.args.log_max):  # (a stat per MiB at most)
                self.logged = 0
                trim(self.args.log, self.args.log_max)

    def closed(self, reason: str) -> None:  # ConsoleSink
        self.finish(reason)

    def finish(self, reason: str) -> None:
        if not self.done.is_set():
            self.reason = reason
            self.done.set()

    async def open_source(self) -> None:
        a = self.args
        if a.unix:
            if a.log:
                seed = await SocketSession(a.unix, a.log, history=a.history).history()
                self.hub.ring.append(seed)
            self.source = SocketSession(a.unix)
            await self.source.start(self)
            self.source.exit_reason = ""
        elif a.pty:
            env = dict(os.environ, TERM="xterm-256color")
            if a.escape:
                from ..session import EscapedPtySession
                self.source = EscapedPtySession(a.pty, escape=bytes.fromhex(a.escape),
                                                width=a.width, height=a.height, env=env)
            else:
                self.source = PtySession(a.pty, width=a.width, height=a.height, env=env)
            await self.source.start(self)
        elif a.vga_qmp:
            await self.open_vga(a.vga_qmp)
        elif a.vnc or a.vnc_fd is not None:
            from .display import DisplayHub
            self.display = DisplayHub(a.vnc or f"fd {a.vnc_fd}", a.fps, self.finish,
                                      fd=a.vnc_fd)
            await self.display.open()
        else:
            raise SystemExit("no console source given")

    async def open_vga(self, path: str) -> None:
        from qemu.qmp import QMPClient

        self.qmp = QMPClient("corral-vga")
        try:
            await asyncio.wait_for(self.qmp.connect(path), 5)
        except Exception as e:  # reported to whoever started us
            raise RuntimeError(f"cannot reach the VM's console monitor ({path}): {e}") from e
        self.vga = VGAScreen()
        self.hub.snapshot = self.vga.full
        await self.poll_vga_once()
        asyncio.ensure_future(self.poll_vga())

    async def read_memory(self, address: int, size: int) -> bytes:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(self.args.socket), prefix=".vga-")
        os.close(fd)
        try:
            await self.qmp.execute("pmemsave", {"val": address, "size": size,
                                                "filename": tmp})
            return Path(tmp).read_bytes()
        finally:
            os.unlink(tmp)

    async def poll_vga_once(self) -> None:
        assert self.vga is not None
        bda = await self.read_memory(BDA, BDA_SIZE)
        mode = parse_bda(bda)
        memory = await self.read_memory(mode.base, mode.size) if mode.text else None
        was_graphics = self.vga.graphics
        self.hub.feed(self.vga.update(bda, memory))
        if self.vga.graphics and not was_graphics:
            self.hub.event("graphics")  # the viewer may switch to the graphical screen

    async def poll_vga(self) -> None:
        idle = 0
        while not self.done.is_set():
            # 10 Hz while the screen changes, 4 Hz once it has been still for a while
            await asyncio.sleep(0.1 if idle < 20 else 0.25)
            before = self.vga.rows if self.vga else None
            try:
                await self.poll_vga_once()
            except Exception:  # QMP gone: the VM stopped
                self.finish("the VM stopped")
                return
            idle = idle + 1 if self.vga and self.vga.rows == before else 0

    async def write(self, data: bytes) -> None:
        if self.qmp is not None:
            for chord in keys_for_input(data):
                await self.send_chord(chord)
        elif self.source is not None:
            await self.source.send_bytes(data)

    async def send_chord(self, chord: list[str]) -> None:
        try:
            await self.qmp.execute("send-key", {
                "keys": [{"type": "qcode", "data": k} for k in chord]})
        except Exception:  # an unknown key is not worth ending the console
            pass

    async def control(self, text: str) -> None:
        try:
            message = json.loads(text)
            command = message.get("command")
            args = message.get("args") or {}
        except (ValueError, AttributeError):
            return
        if not isinstance(args, dict):
            return
        if command == "window-resize" and self.source is not None:
            try:
                width, height = int(args["width"]), int(args["height"])
            except (KeyError, TypeError, ValueError):
                return
            if 1 <= width <= 1000 and 1 <= height <= 1000:
                await self.source.resize(width, height)
        elif command == "keys" and self.qmp is not None and isinstance(args, dict):
            chord = SPECIAL_CHORDS.get(str(args.get("name", "")))
            if chord:
                await self.send_chord(chord)

    # Viewers -----------------------------------------------------------------------------

    async def viewer(self, ws: ServerConnection) -> None:
        if self.display is not None:
            await self.display.viewer(ws)
            return
        queue: asyncio.Queue[bytes | str | None] = asyncio.Queue()
        history = self.hub.history()
        if history:
            queue.put_nowait(history)
        if self.vga is not None and self.vga.graphics:
            queue.put_nowait(json.dumps({"event": "graphics"}))
        self.hub.viewers[ws] = queue

        async def send() -> None:
            while (data := await queue.get()) is not None:
                await ws.send(data)

        sender = asyncio.ensure_future(send())
        try:
            async for message in ws:
                if isinstance(message, bytes):
                    await self.write(message)
                else:
                    await self.control(message)
        except ConnectionClosed:
            pass
        finally:
            self.hub.viewers.pop(ws, None)
            queue.put_nowait(None)
            await asyncio.wait({sender}, timeout=2)
            sender.cancel()

    async def run(self, ready: int) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(sig, self.finish, "the console server was stopped")
        try:
            await self.open_source()
        except Exception as e:  # reported to whoever started us
            os.write(ready, f"error: {e}\n".encode())
            return 1
        sock = self.args.socket
        Path(sock).unlink(missing_ok=True)
        # bind with a strict umask: the socket is private from its first moment (a chmod
        # afterwards would leave a window, and follows a link planted at its path)
        umask = os.umask(0o077)
        try:
            serving = await unix_serve(self.viewer, sock, max_size=2**20, ping_interval=None)
        finally:
            os.umask(umask)
        async with serving:
            os.write(ready, b"ok\n")
            os.close(ready)
            await self.done.wait()
            # let the last output reach the viewers, then close them with the reason
            for queue in self.hub.viewers.values():
                queue.put_nowait(None)
            await asyncio.sleep(0.2)
            reason = (self.reason or "the console ended").encode()[:120].decode(
                errors="ignore")
            await asyncio.gather(*(ws.close(1000, reason) for ws in list(self.hub.viewers)),
                                 return_exceptions=True)
            if self.display is not None:
                await self.display.close(1000, reason)
            Path(sock).unlink(missing_ok=True)
        if self.source is not None and hasattr(self.source, "close"):
            await self.source.close()
        if self.qmp is not None:
            try:
                await self.qmp.disconnect()
            except Exception:
                pass
        return 0


def _parse(argv: list[str]) -> argparse.Namespace:
    program: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, program = argv[:at], argv[at + 1:]
    p = argparse.ArgumentParser(prog="corral-console-server")
    p.add_argument("--socket", required=True, help="unix socket to serve websockets on")
    p.add_argument("--history", type=int, default=256 * 1024, help="ring buffer bytes")
    p.add_argument("--width", type=int, default=80)
    p.add_argument("--height", type=int, default=24)
    p.add_argument("--foreground", action="store_true", help="do not detach")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--unix", help="a unix stream socket to relay (QEMU serial)")
    src.add_argument("--vga-qmp", help="a QMP socket to read VGA text memory through")
    src.add_argument("--vnc", help="a VNC unix socket whose screen to serve (QEMU -vnc)")
    src.add_argument("--vnc-fd", type=int,
                     help="an open, connected VNC socket inherited as this fd (libvirt)")
    src.add_argument("--pty", action="store_true",
                     help="run the program given after -- on a pty")
    p.add_argument("--fps", type=float, default=10.0, help="screen updates a second (--vnc)")
    p.add_argument("--log", help="the source's log file, to seed the history from")
    p.add_argument("--log-max", type=int, default=SERIAL_LOG_MAX,
                   help="bytes the log may reach before it is trimmed")
    p.add_argument("--escape", help="hex byte the pty program treats as escape (doubled)")
    args = p.parse_args(argv)
    if args.log_max < SERIAL_LOG_MIN:
        p.error(f"--log-max must be at least {SERIAL_LOG_MIN} bytes")
    args.pty = program if args.pty else None
    if args.pty == []:
        p.error("--pty needs a program after --")
    return args


def lock_path(sock: str) -> str:
    return sock + ".lock"


def _serve(args: argparse.Namespace, ready: int) -> int:
    lock = os.open(lock_path(args.socket), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.write(ready, b"running\n")
        return 0
    os.ftruncate(lock, 0)
    os.write(lock, f"{os.getpid()}\n".encode())
    return asyncio.run(Server(args).run(ready))


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    read_end, ready = os.pipe()
    if args.foreground:  # nobody waits for "ready": say it to /dev/null
        os.close(read_end)
        os.close(ready)
        return _serve(args, os.open(os.devnull, os.O_WRONLY))
    if os.fork() != 0:  # the caller's process: wait for the server to say it listens
        os.close(ready)
        with os.fdopen(read_end) as f:
            answer = f.read().strip()
        if answer in ("ok", "running"):
            print(answer)
            return 0
        print(answer.removeprefix("error: ") or "the console server failed to start",
              file=sys.stderr)
        return 1
    os.close(read_end)
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    log = os.open(args.socket + ".log",
                  os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.dup2(log, 2)
    os.close(devnull)
    os.close(log)
    try:
        code = _serve(args, ready)
    except BaseException as e:  # nobody is left to tell but the pipe/log
        try:
            os.write(ready, f"error: {e}\n".encode())
        except OSError:
            pass
        raise
    os._exit(code)
