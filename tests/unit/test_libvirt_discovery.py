"""libvirt remotes beside ``qemu:///system`` and ``libvirt.conf`` (``backends/libvirt/
discovery.py`` through ``backends.remotes.discover``): a non-root user's ``qemu:///session``
when its socket is in ``$XDG_RUNTIME_DIR/libvirt`` (a real unix socket in a temp dir; no
daemon), and the connections virt-manager saved, read with a fake ``gsettings`` program on
``PATH`` (it prints what the real one prints for that key; unreadable, failing or hanging,
it gives nothing and discovery does not wait on it)."""

from __future__ import annotations

import socket
import time

import pytest

from backends import remotes


@pytest.fixture(autouse=True)
def no_system_libvirt(monkeypatch):
    """The machine's own ``qemu:///system`` socket (if any) is not these tests' business."""
    monkeypatch.setattr(remotes, "LIBVIRT_SYSTEM_SOCKETS", ())


def _listening(path) -> socket.socket:
    path.parent.mkdir(parents=True, exist_ok=True)
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    return s


def _gsettings(tmp_path, body: str) -> dict[str, str]:
    """The env of a discovery with a fake ``gsettings`` (``body``: its shell script)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    program = bin_dir / "gsettings"
    program.write_text("#!/bin/sh\n" + body + "\n")
    program.chmod(0o755)
    return {"HOME": str(tmp_path), "PATH": f"{bin_dir}:/usr/bin:/bin"}


def _libvirt(env, uid: int = 1000) -> dict[str, str]:
    out = remotes.Discovery()
    return {n: r.address for n, r in remotes.libvirt_remotes(env, out, uid=uid).items()}


@pytest.mark.parametrize("sock", ["virtqemud-sock", "libvirt-sock"])
def test_a_users_session_daemon_is_a_remote(tmp_path, sock, monkeypatch):
    monkeypatch.setattr(remotes.os, "geteuid", lambda: 1000)  # discover() asks
    run = tmp_path / "run"
    with _listening(run / "libvirt" / sock):
        env = {"HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(run)}
        assert _libvirt(env) == {
            "libvirt-session": f"qemu+unix:///session?socket={run}/libvirt/{sock}"}
        assert _libvirt(env, uid=0) == {}  # root's session is not listed
        found = remotes.discover(env)
    assert any(r.name == "libvirt-session" and r.kind == "libvirt" for r in found.remotes)
    # the socket gone: no remote
    (run / "libvirt" / sock).unlink()
    assert _libvirt({"HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(run)}) == {}


def test_virt_manager_connections_are_remotes_named_and_deduplicated(tmp_path, monkeypatch):
    monkeypatch.setattr(remotes.os, "geteuid", lambda: 1000)
    conf = tmp_path / ".config" / "libvirt" / "libvirt.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text('uri_aliases = ["sleet=qemu+ssh://root@sleet/system"]\n')
    run = tmp_path / "run"
    env = _gsettings(tmp_path, """
[ "$1 $2 $3" = "get org.virt-manager.virt-manager.connections uris" ] || exit 1
echo "['qemu:///system', 'qemu+ssh://root@hail/system', 'qemu+ssh://ann@hail/session',
 'qemu+ssh://root@sleet/system/', 'qemu:///session', 'lxc:///', 'qemu+ssh://root@hail/system',
 'qemu+ssh://root@hail:2222/system']" | tr -d '\\n'""")
    env["XDG_RUNTIME_DIR"] = str(run)
    with _listening(run / "libvirt" / "virtqemud-sock"):
        assert _libvirt(env) == {
            "libvirt-session": f"qemu+unix:///session?socket={run}/libvirt/virtqemud-sock",
            "sleet": "qemu+ssh://root@sleet/system",
            "libvirt": "qemu:///system",
            "hail": "qemu+ssh://root@hail/system",
            "hail-session": "qemu+ssh://ann@hail/session",
            "libvirt-lxc": "lxc:///",
            "hail-2": "qemu+ssh://root@hail:2222/system",
        }
        found = {r.name: r for r in remotes.discover(env).remotes}
    assert found["hail"].source == "virt-manager (gsettings)"
    assert found["hail"].kind == "libvirt"


@pytest.mark.parametrize("body", [
    "echo 'No such schema “org.virt-manager.virt-manager.connections”' >&2; exit 1",
    "echo '@as []'",
    "echo 'not a list'",
    "echo \"'qemu:///system'\"",
])
def test_virt_manager_unreadable_or_empty_is_nothing(tmp_path, body):
    assert _libvirt(_gsettings(tmp_path, body)) == {}


def test_a_hanging_gsettings_is_not_waited_for(tmp_path):
    env = _gsettings(tmp_path, "exec sleep 30")
    began = time.monotonic()
    assert _libvirt(env) == {}
    assert time.monotonic() - began < 5


def test_without_gsettings_nothing_is_run(tmp_path):
    assert _libvirt({"HOME": str(tmp_path), "PATH": str(tmp_path / "empty")}) == {}
    assert _libvirt({"HOME": str(tmp_path)}) == {}
