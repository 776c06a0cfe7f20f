"""Bad input and faults, against real daemons and real sockets: wrong pinned certificate,
missing client certificate, untrusted client, a remote that never answers, and a daemon
killed while we follow its events."""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import threading
import time
from dataclasses import replace

import pytest

from backend_checks import stranger_remotes
from backends import get_backend
from backends.errors import AuthError, NotResponding, Unreachable
from backends.models import EventKind
from backends.remotes import discover


class Listener:
    """A TCP server on 127.0.0.1 that records what clients send.

    ``tls`` = (cert, key) makes it a TLS server; ``silent`` accepts and never answers."""

    def __init__(self, tls: tuple[str, str] | None = None, silent: bool = False) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.received = b""
        self.tls = tls
        self.silent = silent
        self._stop = threading.Event()
        self._held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            if self.silent:
                self._held.append(conn)
                continue
            try:
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                ctx.load_cert_chain(*self.tls)
                conn.settimeout(5)
                with ctx.wrap_socket(conn, server_side=True) as tls_conn:
                    while chunk := tls_conn.recv(4096):
                        self.received += chunk
            except (OSError, ssl.SSLError):
                pass

    def close(self) -> None:
        self._stop.set()
        self.thread.join(2)
        for c in self._held:
            c.close()
        self.sock.close()


def lab_remotes(lab_env):
    return {r.name: r for r in discover(lab_env).remotes}


async def test_wrong_server_certificate_is_refused_and_nothing_is_sent(lab, lab_env):
    lab2 = lab_remotes(lab_env)["lab2"]
    # An impostor at a new address that presents lxd1's certificate, while the remote
    # pins lxd2's certificate.
    server = Listener(tls=(str(lab.lxd1.dir / "server.crt"), str(lab.lxd1.dir / "server.key")))
    try:
        impostor = replace(lab2, address=f"https://127.0.0.1:{server.port}")
        backend = get_backend(impostor, timeout=5)
        with pytest.raises(AuthError) as err:
            await backend.connect()
        await backend.close()
        assert "does not match the pinned certificate" in err.value.message
        assert lab2.server_cert in err.value.message
        time.sleep(0.3)
        assert server.connections == 1
        assert server.received == b""  # not one byte of HTTP reached it
    finally:
        server.close()


async def test_real_remote_with_wrong_pin_is_refused(lab, lab_env, tmp_path):
    conf = tmp_path / "lxc"
    shutil.copytree(lab.lxd_conf, conf)
    (conf / "servercerts" / "lab2.crt").write_text(lab.lxd1.cert_pem)
    env = dict(lab_env, LXD_CONF=str(conf))
    backend = get_backend(lab_remotes(env)["lab2"], timeout=5)
    with pytest.raises(AuthError, match="does not match"):
        await backend.connect()
    await backend.close()
    # events are refused the same way
    stream = backend.watch()
    ev = await asyncio.wait_for(anext(stream), 10)
    await stream.aclose()
    assert ev.action == "disconnected" and "pinned" in ev.message


async def test_https_remote_without_client_certificate_sends_nothing(lab_env, tmp_path):
    server = Listener(tls=None, silent=True)
    try:
        conf = tmp_path / "lxc"
        conf.mkdir()
        (conf / "config.yml").write_text(
            f"remotes:\n  bare:\n    addr: https://127.0.0.1:{server.port}\n"
            "    protocol: lxd\n    public: false\n")
        remote = lab_remotes(dict(lab_env, LXD_CONF=str(conf)))["bare"]
        assert remote.client_cert is None
        backend = get_backend(remote, timeout=5)
        with pytest.raises(AuthError, match="No client certificate"):
            await backend.connect()
        await backend.close()
        assert server.connections == 0
    finally:
        server.close()


async def test_untrusted_client_certificate_is_explained(lab, lab_env, tmp_path):
    backend = get_backend(stranger_remotes(lab, lab_env, tmp_path)["lab2"], timeout=5)
    with pytest.raises(AuthError, match="does not trust this client"):
        await backend.connect()
    await backend.close()


async def test_remote_that_never_answers_is_not_responding_in_bounded_time(lab, lab_env):
    server = Listener(silent=True)
    try:
        lab2 = lab_remotes(lab_env)["lab2"]
        hung = replace(lab2, address=f"https://127.0.0.1:{server.port}")
        backend = get_backend(hung, timeout=1.5)
        started = time.monotonic()
        with pytest.raises(NotResponding, match="not responding"):
            await backend.connect()
        assert time.monotonic() - started < 5
        await backend.close()
    finally:
        server.close()


async def test_missing_socket_is_unreachable_in_words(lab_env, fake_host):
    incus_local = lab_remotes(lab_env)["incus-local"]
    backend = get_backend(incus_local)
    missing = fake_host.path("/var/lib/incus/unix.socket")  # the system path, moved
    with pytest.raises(Unreachable, match=f"No Incus socket at {missing}"):
        await backend.connect()
    await backend.close()


async def test_events_follow_a_killed_and_restarted_daemon(lab, lab_env):
    backend = get_backend(lab_remotes(lab_env)["lab2"], timeout=5)
    await backend.connect()
    stream = backend.watch()
    try:
        ev = await asyncio.wait_for(anext(stream), 10)
        assert ev.action == "connected"
        await asyncio.to_thread(lab.lxd2.kill)
        ev = await asyncio.wait_for(anext(stream), 10)
        assert ev.kind is EventKind.CONNECTION and ev.action == "disconnected"
        assert "lab2" in ev.message
        await asyncio.to_thread(lab.lxd2.start)
        deadline = time.monotonic() + 40
        while True:
            ev = await asyncio.wait_for(anext(stream), max(1, deadline - time.monotonic()))
            if ev.action == "connected":
                break
        # and REST works again on the same backend object
        await backend.list_instances()
    finally:
        await stream.aclose()
        await backend.close()
        if not lab.lxd2.alive():
            lab.lxd2.start()
