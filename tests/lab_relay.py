"""A lab daemon reached through a relay that the test turns on and off: a TCP relay from a
loopback port of the test process to the daemon's HTTPS port, and a private copy of the
lab's CLI config in which a remote points at the relay. While the relay is down nothing
listens on its port and every connection it passed is cut, as when the daemon stops; the
daemon itself, which the other tests share, keeps running."""

from __future__ import annotations

import asyncio
import shutil
import threading
from pathlib import Path

import yaml

import lab as labmod


class Relay:
    """A TCP relay from a loopback port of this process to ``daemon``'s HTTPS port, in a
    thread of its own (corral's connections never wait on the test's event loop). Down
    when made; ``up``: it listens and passes each connection on; ``down``: it stops
    listening and cuts every connection it passed. A context manager (closed on exit)."""

    def __init__(self, daemon: labmod.Daemon) -> None:
        self.port = labmod._free_port()  # bound by this process: the socket guard allows it
        self.target_port = int(daemon.https_address.rpartition(":")[2])
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._server: asyncio.AbstractServer | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self._passing: set[asyncio.Task] = set()

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    def up(self) -> None:
        self._call(self._up())

    def down(self) -> None:
        self._call(self._down())

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._loop.is_running():
            self._call(self._down())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._loop.close()

    async def _up(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def _down(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._open):
            writer.transport.abort()
        self._open.clear()
        if self._passing:
            await asyncio.wait(self._passing, timeout=10)

    async def _serve(self, reader, writer) -> None:
        task = asyncio.current_task()
        self._passing.add(task)
        try:
            await self._pass(reader, writer)
        finally:
            self._passing.discard(task)

    async def _pass(self, reader, writer) -> None:
        try:
            far_reader, far_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._open |= {writer, far_writer}

        async def pipe(src, dst) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                dst.transport.abort()

        await asyncio.gather(pipe(reader, far_writer), pipe(far_reader, writer))
        self._open -= {writer, far_writer}


def through(lab: labmod.Lab, env: dict[str, str], tmp_path: Path, remote: str,
            daemon: labmod.Daemon, relay: Relay, name: str | None = None) -> dict[str, str]:
    """``env`` (the lab's) with a private copy of the CLI config of ``daemon``'s kind in
    which remote ``name`` (``remote`` itself when None: its address changes) is ``daemon``
    reached through ``relay``, its certificate pinned as ``remote``'s is."""
    conf = lab.lxd_conf if daemon.kind == "lxd" else lab.incus_conf
    mine = tmp_path / f"{daemon.client}-conf"
    shutil.copytree(conf, mine)
    name = name or remote
    cfg = yaml.safe_load((mine / "config.yml").read_text())
    cfg["remotes"][name] = {**cfg["remotes"][remote], "addr": f"https://127.0.0.1:{relay.port}"}
    (mine / "config.yml").write_text(yaml.safe_dump(cfg))
    if name != remote:
        shutil.copy(mine / "servercerts" / f"{remote}.crt", mine / "servercerts" / f"{name}.crt")
    return {**env, daemon.conf_var: str(mine)}
