"""The hermetic environment and the socket guard (tests/hermetic.py) do what they say: a
connection to a "system" socket, to a host service on loopback or to the network fails the
test with the address and the reason; the lab's own sockets and ports pass; and discovery
with an environment built by hand cannot find a system LXD/Incus."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import hermetic
from backends import local, remotes
from backends.remotes import discover


def _listen_unix(path) -> socket.socket:
    """A listening unix socket at ``path``; its file goes when the test ends (fake_host is
    shared by the session)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.listen(1)
    _made.append(path)
    return s


_made: list = []


@pytest.fixture(autouse=True)
def _unlink_made():
    yield
    while _made:
        p = _made.pop()
        if os.path.lexists(p):
            os.unlink(p)


def test_a_fake_system_socket_is_blocked_and_named(fake_host, _socket_guard):
    """A real listening socket where the host's LXD lives (faked): connecting is refused with
    the path and why, and the test is marked as failed (the violation is recorded)."""
    path = fake_host.path("/var/lib/lxd/unix.socket")
    server = _listen_unix(path)
    try:
        with _socket_guard.expect() as caught:
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            with pytest.raises(hermetic.Violation) as e:
                c.connect(str(path))
            c.close()
        assert str(path) in str(e.value) and "host's own daemons" in str(e.value)
        assert caught == [e.value.strerror]
    finally:
        server.close()


@pytest.mark.parametrize("path", hermetic.SYSTEM_SOCKETS)
def test_the_real_system_sockets_are_blocked(path, _socket_guard):
    with _socket_guard.expect() as caught:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            with pytest.raises(hermetic.Violation, match=path):
                c.connect(path)
            with pytest.raises(hermetic.Violation, match=path):
                c.connect_ex(path)
    assert len(caught) == 2 and "system daemon" in caught[0]


async def test_asyncio_unix_and_tcp_connections_are_guarded(fake_host, _socket_guard):
    """asyncio's open_unix_connection and open_connection go through the same check."""
    path = fake_host.path("/run/incus/unix.socket")
    server = _listen_unix(path)
    try:
        with _socket_guard.expect() as caught:
            with pytest.raises(hermetic.Violation, match="run/incus/unix.socket"):
                await asyncio.open_unix_connection(str(path))
            with pytest.raises(hermetic.Violation, match="not a loopback address"):
                await asyncio.wait_for(asyncio.open_connection("192.0.2.1", 8443), 5)
        assert len(caught) == 2
    finally:
        server.close()


def test_a_loopback_service_of_another_process_is_blocked(_socket_guard):
    """A port some other process listens on (here a child that picked its own port, as a
    host service or another session's daemon would) is refused; after the child is gone the
    same port is harmless (nothing listens) and allowed."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import socket,sys\n"
         "s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(1)\n"
         "print(s.getsockname()[1], flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port = int(child.stdout.readline())
        with _socket_guard.expect() as caught:
            with socket.socket() as c, pytest.raises(hermetic.Violation, match=f"127.0.0.1:{port}"):
                c.connect(("127.0.0.1", port))
        assert len(caught) == 1 and "another process" in caught[0]
    finally:
        child.stdin.close()
        child.wait(10)
    with socket.socket() as c:
        assert c.connect_ex(("127.0.0.1", port)) != 0  # refused, and not a violation


def test_the_labs_own_sockets_and_ports_pass(tmp_path, _socket_guard):
    """A socket under tmp_path, one under a /tmp dir this session made, and a TCP server this
    process bound (also reached by name, localhost) all connect; nothing is recorded."""
    short = hermetic.runtime_dir()
    servers = [_listen_unix(tmp_path / "a.sock"), _listen_unix(short / "b.sock")]
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(2)
    port = tcp.getsockname()[1]
    try:
        with _socket_guard.expect() as caught:
            for s in servers:
                with socket.socket(socket.AF_UNIX) as c:
                    c.connect(s.getsockname())
            for host in ("127.0.0.1", "localhost"):
                with socket.create_connection((host, port), timeout=5):
                    pass
        assert caught == []
    finally:
        for s in [*servers, tcp]:
            s.close()
        shutil.rmtree(short)


def test_a_connection_from_a_thread_fails_the_test_too(fake_host, _socket_guard):
    """The refusal is recorded wherever it happens, so a backend that swallows the error in a
    worker thread still fails its test."""
    path = fake_host.path("/var/lib/incus/unix.socket")
    server = _listen_unix(path)
    try:
        with _socket_guard.expect() as caught:
            def attempt():
                try:
                    socket.socket(socket.AF_UNIX).connect(str(path))
                except OSError:
                    pass  # what a careless backend does
            t = threading.Thread(target=attempt)
            t.start()
            t.join(10)
        assert len(caught) == 1 and str(path) in caught[0]
    finally:
        server.close()


def test_environment_names_nothing_of_the_host(hermetic_env, fake_host):
    """os.environ during a test names only temp dirs (and an LXD_DIR that a test's own
    ``{**os.environ, "LXD_DIR": d}`` overrides); a hand-built environment's defaults
    are the fake host's, not the real system's (looked up at call time: the fake host
    patches the module attributes)."""
    for var in hermetic.OS_VARS:
        assert os.environ[var] == hermetic_env[var]
        assert os.environ[var].startswith("/tmp/"), (var, os.environ[var])
    for var in hermetic.HOST_VARS:
        if var not in hermetic.OS_VARS:
            assert var not in os.environ, var
    for var, value in hermetic_env.items():
        if var.startswith(("XDG_", "LXD_", "INCUS_")) or var == "HOME":
            assert value.startswith("/tmp/"), (var, value)
    assert not os.path.exists(os.environ["LXD_DIR"]) and not os.path.exists(os.environ["INCUS_DIR"])
    assert [r.name for r in discover(os.environ).remotes] == []
    bare = {"HOME": hermetic_env["HOME"]}
    root = str(fake_host.root) + "/"
    assert remotes.lxd_socket_path(bare).startswith(root)
    assert remotes.incus_socket_path(bare).startswith(root)
    looked = discover(bare).looked_in
    assert not [p for p in looked if p.startswith(("/etc/", "/var/", "/run/"))], looked
    assert str(fake_host.path("/etc/lxd/config.yml")) in looked
    if os.geteuid() == 0:
        assert local.default_lxcpath() == str(fake_host.path("/var/lib/lxc"))


def test_a_system_lxd_on_the_fake_host_is_found_by_a_bare_env_only(hermetic_env, fake_host):
    """The fake host is faithful (a hand-built environment finds the "system" LXD there, as
    it would on a host with one), and the hermetic environment does not find it."""
    path = remotes.lxd_socket_path({"HOME": hermetic_env["HOME"]})
    server = _listen_unix(type(fake_host.root)(path))
    try:
        bare = {r.name: r for r in discover({"HOME": hermetic_env["HOME"]}).remotes}
        assert bare["local"].address == f"unix://{path}"
        assert [r.name for r in discover(hermetic_env).remotes] == []
    finally:
        server.close()


def test_a_test_that_connects_outside_its_lab_fails(tmp_path):
    """Run in a pytest of its own (with this suite's conftest), a test that reaches a
    "system" socket and swallows the error fails, and the report names the socket."""
    (tmp_path / "test_leak.py").write_text(
        "import socket\n"
        "def test_leak(fake_host):\n"
        "    p = fake_host.path('/var/lib/lxd/unix.socket')\n"
        "    p.parent.mkdir(parents=True, exist_ok=True)\n"
        "    s = socket.socket(socket.AF_UNIX); s.bind(str(p)); s.listen(1)\n"
        "    try:\n"
        "        socket.socket(socket.AF_UNIX).connect(str(p))\n"
        "    except OSError:\n"
        "        pass\n"
        "def test_clean(tmp_path):\n"
        "    assert tmp_path.exists()\n")
    tests = Path(__file__).parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tests), str(tests.parent)])}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "conftest", "-q",
         "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_leak.py")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "2 passed, 1 error" in out, out  # test_leak: its call passed, its teardown fails
    assert "ERROR at teardown of test_leak" in out and "var/lib/lxd/unix.socket" in out, out
    assert "blocked a connection to the unix socket" in out, out
