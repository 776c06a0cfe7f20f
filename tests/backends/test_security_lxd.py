"""LXD/Incus remotes, against the real lab daemons. Certificate pinning on every TLS path
(lxd2, remote lab2): REST, the events/console websockets, the fast ``/state`` path and the
first listing all compare the server certificate's fingerprint with the pinned one. The
impostor is a proxy that relays to the real daemon but presents a certificate signed by
the pinned file (a CA): trusting the pin as a CA would accept it. A remote without a pin,
or with a key others can read, is flagged in the remotes pane. Exports are private
files."""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import stat
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from backends import first_listing, get_backend
from backends.lxd.fasthttp import FastGet
from backends.lxd.rest import Rest
from backends.lxd.sockets import Sockets
from backends.models import InstanceRef
from backends.remotes import discover, remote_warnings


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture
def impostor_certs(tmp_path):
    """A CA, and a server certificate it signed (what the impostor presents)."""
    ca_key, ca = tmp_path / "ca.key", tmp_path / "ca.crt"
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-subj", "/CN=corral test CA", "-days", "2", "-keyout", str(ca_key),
            "-out", str(ca), "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    key, csr, crt = tmp_path / "srv.key", tmp_path / "srv.csr", tmp_path / "srv.crt"
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(csr))
    ext = tmp_path / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
            "-CAcreateserial", "-days", "2", "-out", str(crt), "-extfile", str(ext))
    return ca, crt, key


@contextlib.asynccontextmanager
async def relay(cert, key, upstream: str, client_cert: str, client_key: str):
    """A TLS proxy on 127.0.0.1 presenting ``cert`` and relaying to the real daemon at
    ``upstream`` (host:port) with the lab's trusted client certificate. Yields (port,
    number of bytes clients sent through it)."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(str(cert), str(key))
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_ctx.check_hostname = False
    client_ctx.verify_mode = ssl.CERT_NONE
    client_ctx.load_cert_chain(client_cert, client_key)
    host, port = upstream.rsplit(":", 1)
    sent = [0]

    async def pump(reader, writer, count):
        try:
            while data := await reader.read(65536):
                if count:
                    sent[0] += len(data)
                writer.write(data)
                await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def handle(reader, writer):
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port),
                                                                 ssl=client_ctx)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pump(reader, up_writer, True), pump(up_reader, writer, False))

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_ctx)
    try:
        yield server.sockets[0].getsockname()[1], sent
    finally:
        server.close()


async def test_websockets_and_the_fast_path_compare_the_pinned_fingerprint(lab, lab_env,
                                                                          impostor_certs):
    lab2 = {r.name: r for r in discover(lab_env).remotes}["lab2"]
    # the genuine pin reaches the real daemon on every path
    sockets = Sockets(Rest(lab2, 10, "LXD"))
    ws = await sockets.websocket("/1.0/events?type=lifecycle")
    await ws.close()
    fast = FastGet(lab2, 10)
    assert isinstance(await asyncio.to_thread(fast.get_json, "instances"), list)
    fast.close()

    ca, crt, key = impostor_certs
    async with relay(crt, key, lab.lxd2.https_address, lab2.client_cert,
                     lab2.client_key) as (port, sent):
        impostor = replace(lab2, address=f"https://127.0.0.1:{port}", server_cert=str(ca))
        sockets = Sockets(Rest(impostor, 5, "LXD"))
        with pytest.raises(ssl.SSLCertVerificationError, match="not the pinned one"):
            ws = await sockets.websocket("/1.0/events?type=lifecycle")
            await ws.close()
        fast = FastGet(impostor, 5)
        with pytest.raises(ssl.SSLCertVerificationError, match="not the pinned one"):
            await asyncio.to_thread(fast.get_json, "instances")
        fast.close()
        with pytest.raises(ssl.SSLCertVerificationError, match="not the pinned one"):
            await asyncio.to_thread(first_listing, impostor, timeout=5)  # before the UI
        await asyncio.sleep(0.2)
        assert sent[0] == 0  # not one byte of HTTP (nor a client's request) went through


def test_unpinned_remotes_and_readable_keys_are_flagged(lab, lab_env, tmp_path):
    lab2 = {r.name: r for r in discover(lab_env).remotes}["lab2"]
    assert remote_warnings(lab2) == []
    unpinned = replace(lab2, server_cert=None)
    assert any(w.startswith("not pinned") for w in remote_warnings(unpinned))
    key = tmp_path / "client.key"
    key.write_bytes(Path(lab2.client_key).read_bytes())
    os.chmod(key, 0o644)
    shared = replace(lab2, client_key=str(key))
    assert any("readable by other users (mode 0644)" in w for w in remote_warnings(shared))
    local = {r.name: r for r in discover(lab_env).remotes}["local"]
    assert remote_warnings(local) == []  # a unix socket needs neither


async def test_lxd_exports_are_private(lab, lab_env, unique, tmp_path):
    local = {r.name: r for r in discover(lab_env).remotes}["local"]
    name = unique()
    lab.lxd1.cli("init", "busybox", name)
    backend = get_backend(local, timeout=10)
    await backend.connect()
    old = os.umask(0o022)
    try:
        await backend.export_instance(InstanceRef("local", name), str(tmp_path / "b.tar.gz"))
    finally:
        os.umask(old)
        await backend.close()
        lab.lxd1.cli("delete", "--force", name)
    assert stat.S_IMODE(os.stat(tmp_path / "b.tar.gz").st_mode) == 0o600


def test_the_shared_rest_context_is_not_reconfigured_per_connection(lab, lab_env,
                                                                    monkeypatch):
    """pylxd's session shares one ssl context among its threads; urllib3 re-applied its
    settings to it (client certificate, CA file, ALPN) at every new connection, racing with
    handshakes in other threads (a segfault). Many new connections from several threads:
    they all work, and none changes the context."""
    from concurrent.futures import ThreadPoolExecutor

    from backends.lxd.http_session import make_session
    from backends.lxd.tls import base_url

    lab2 = {r.name: r for r in discover(lab_env).remotes}["lab2"]
    session = make_session(lab2)
    calls = []
    for name in ("load_cert_chain", "load_verify_locations", "set_alpn_protocols",
                 "load_default_certs"):
        original = getattr(ssl.SSLContext, name)

        def spy(self, *args, _name=name, _original=original, **kwargs):
            calls.append(_name)
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(ssl.SSLContext, name, spy)
    url = base_url(lab2) + "/1.0"

    def get(_):
        # a new connection each time, so each one is set up again
        return session.get(url, headers={"Connection": "close"}, timeout=10).status_code

    with ThreadPoolExecutor(4) as pool:
        statuses = list(pool.map(get, range(24)))
    assert statuses == [200] * 24
    assert calls == []
