"""A libvirt domain's graphical screen over ``qemu+ssh://`` (``backends/libvirt/ssh_tunnel.py``)
against the suite's private libvirtd and its sshd on loopback (``tests/lab_libvirt.py``).

- The ssh program (no ``known_hosts=``): libvirt's transport and the screen share corral's
  one ControlMaster; the frame equals ``virsh screenshot``, keys typed on it reach the
  guest's tty1, and the lab's sshd has one TCP connection from this process throughout.
- ``known_hosts=``: the same, the master pinned to that file: libvirt's transport and the
  screen (here a VNC server listening on a TCP port autoport chose) share it, one
  connection.
- Refused in words and at once: a changed or unknown host key, a key the server does not
  accept; a stale control socket never breaks a start.

OpenSSH reads the user's ``~/.ssh/known_hosts`` from the password database's home, not
``$HOME``: an ``ssh`` first on ``PATH`` that adds ``-o UserKnownHostsFile=`` plays that file
here (the lab's pinned host key, a changed one, an empty one).
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import pytest_asyncio
from PIL import Image

import lab_libvirt
from backends import get_backend
from backends.errors import AuthError, Unreachable
from backends.libvirt import ssh_tunnel
from backends.models import Capability, InstanceRef, Remote

from .libvirt_helpers import virsh
from .test_libvirt_display import Serial, differing, screenshot_of
from .test_qemu_display import Sink, typing

live = pytest.mark.asyncio(loop_scope="module")
PREFIX = "lvs-"
ROOT = Path(__file__).resolve().parents[2]

CORRAL = """
import asyncio, sys
from backends import get_backend
from backends.models import Remote

async def main():
    lv = get_backend(Remote(name="k", kind="libvirt", address=sys.argv[1]), timeout=30)
    await lv.connect()
    print(lv.lv.tunnel.proc.pid, lv.lv.tunnel.ctl, flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""
"""A corral process connected to a remote over the ssh program, until it is killed."""


@pytest.fixture(scope="module")
def vlab(request):
    return lab_libvirt.session_lab(request)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cleanup(vlab):
    yield
    for name in virsh(vlab, "list", "--all", "--name").stdout.split():
        if name.startswith(PREFIX):
            virsh(vlab, "destroy", name, check=False)
            virsh(vlab, "undefine", name, check=False)


def user_known_hosts(tmp_path: Path, monkeypatch, known_hosts: Path) -> None:
    """``ssh`` on PATH as if the user's known_hosts were ``known_hosts``."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    real = "/usr/bin/ssh"
    (bindir / "ssh").write_text(f"#!/bin/sh\nexec {real} -o 'UserKnownHostsFile={known_hosts}'"
                                f" \"$@\"\n")
    (bindir / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")


def program_uri(vlab, key: str = "id_ed25519") -> str:
    return f"qemu+ssh://root@127.0.0.1:{vlab.port}/system?keyfile={vlab.ssh / key}"


def ssh_connections(vlab) -> int:
    """Established TCP connections to the lab's sshd (the client ends, any process)."""
    out = subprocess.run(["ss", "-tnH", "state", "established", f"( dport = :{vlab.port} )"],
                         capture_output=True, text=True, check=True).stdout
    return len(out.splitlines())


async def until(check, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


def define_vnc(vlab, guest, graphics: str) -> str:
    name = f"{PREFIX}{uuid.uuid4().hex[:6]}"
    xml = lab_libvirt.guest_xml(name, *guest)
    lab_libvirt.define(vlab, xml.replace("</devices>", f"  {graphics}\n  </devices>"))
    return name


async def same_as_libvirt(vlab, name: str, session, tmp_path) -> None:
    """Wait until the frame is libvirt's own screenshot (but for the blinking cursor)."""
    deadline = time.monotonic() + 30
    while True:
        await asyncio.sleep(0.5)
        theirs = screenshot_of(vlab, name, tmp_path / "virsh.png")
        if theirs.size == session.image.size and differing(theirs, session.image) < 0.01:
            return
        assert time.monotonic() < deadline, "the screen differs from libvirt's screenshot"


@live
async def test_screen_keys_and_one_ssh_connection(vlab, guest, cleanup, tmp_path,
                                                  monkeypatch):
    user_known_hosts(tmp_path, monkeypatch, vlab.ssh / "known_hosts")
    uri = program_uri(vlab)
    before = ssh_connections(vlab)  # connections of earlier tests may linger
    lv = get_backend(Remote(name="lvs", kind="libvirt", address=uri), timeout=30)
    try:
        await lv.connect()
        assert Capability.DISPLAY in lv.capabilities
        master = lv.lv.tunnel
        assert master is not None and master.running() and ssh_connections(vlab) == before + 1
        assert oct(master.ctl.parent.stat().st_mode & 0o777) == "0o700"
        name = define_vnc(vlab, guest, "<graphics type='vnc'><listen type='socket'/></graphics>")
        ref = InstanceRef("lvs", name)
        assert lv.display_viewer_argv(ref) == ["virt-viewer", "--connect", uri, name]
        await lv.start(ref)
        serial = await lv.open_console(ref)
        out = Serial()
        await serial.start(out)
        await out.until(b"k42", session=serial, typed=b"echo k$((6*7))\r")
        await serial.send_bytes(b"mount -t devtmpfs dev /dev\r")
        await serial.send_bytes(b"(while read -r l; do echo \"tty1: $l\" > /dev/ttyS0; done)"
                                b" < /dev/tty1 > /dev/tty1 2>&1 &\r")
        await serial.send_bytes(b"echo corral over ssh > /dev/tty1\r")

        session = await lv.open_display(ref, fps=10)
        sink = Sink(session)
        await session.start(sink)
        await sink.until(lambda: session.image is not None, "the first frame")
        assert session.image.size == (720, 400)
        await session.keys(typing("over SSH!\n"))
        await out.until(b"tty1: over SSH!", timeout=30)
        await same_as_libvirt(vlab, name, session, tmp_path)
        shot = Image.open(session.screenshot(tmp_path / "shot.png"))
        assert shot.format == "PNG" and shot.convert("RGB").tobytes() == session.image.tobytes()
        # libvirt's transport, its console stream and the screen: one TCP connection
        assert ssh_connections(vlab) == before + 1
        await serial.close()
        await session.close()
    finally:
        await lv.close()
    # the master ended with the remote: no connection, no socket left
    await until(lambda: ssh_connections(vlab) == before, "the master to end")
    assert not master.ctl.exists() and not master.wrapper.exists()


@live
async def test_a_pinned_uris_screen_shares_the_one_pinned_connection_to_a_tcp_listen(
        vlab, guest, cleanup, tmp_path):
    uri = vlab.ssh_uri()  # known_hosts=: the ssh program, the key pinned by corral's master
    lv = get_backend(Remote(name="lvs2", kind="libvirt", address=uri), timeout=30)
    before = ssh_connections(vlab)
    try:
        await lv.connect()
        master = lv.lv.tunnel
        assert Capability.DISPLAY in lv.capabilities and master is not None
        assert master.running() and master.dest.known_hosts == str(vlab.ssh / "known_hosts")
        assert ssh_connections(vlab) == before + 1
        name = define_vnc(vlab, guest,
                          "<graphics type='vnc' autoport='yes' listen='127.0.0.1'/>")
        ref = InstanceRef("lvs2", name)
        await lv.start(ref)
        serial = await lv.open_console(ref)
        await serial.start(Serial())
        session = await lv.open_display(ref, fps=10)
        sink = Sink(session)
        await session.start(sink)
        await sink.until(lambda: session.image is not None, "the first frame")
        await same_as_libvirt(vlab, name, session, tmp_path)
        assert lv.lv.tunnel is master
        # libvirt's transport, its console stream and the screen: one TCP connection
        assert ssh_connections(vlab) == before + 1
        await serial.close()
        await session.close()
    finally:
        await lv.close()
    await until(lambda: ssh_connections(vlab) == before, "the master to end")
    assert not master.running() and not master.ctl.exists()


@live
@pytest.mark.parametrize("known, key, words", [
    ("known_hosts_changed", "id_ed25519", "not the one pinned for it"),
    ("known_hosts_empty", "id_ed25519", "is not known"),
    ("known_hosts", "stranger_ed25519", "did not accept corral's SSH key"),
])
async def test_refusals_are_said_at_once(vlab, tmp_path, monkeypatch, known, key, words):
    user_known_hosts(tmp_path, monkeypatch, vlab.ssh / known)
    before = ssh_connections(vlab)
    lv = get_backend(Remote(name="lvs3", kind="libvirt", address=program_uri(vlab, key)),
                     timeout=30)
    try:
        with pytest.raises(AuthError, match=words):
            await asyncio.wait_for(lv.connect(), 60)  # a prompt would hang: it must not
    finally:
        await lv.close()
    assert ssh_connections(vlab) == before


@live
async def test_the_master_checks_the_pinned_file(vlab):
    dest = ssh_tunnel.destination(vlab.ssh_uri(known_hosts=vlab.ssh / "known_hosts_changed"))
    master = ssh_tunnel.Master(dest)
    with pytest.raises(AuthError, match=r"not the one pinned for it \(.*known_hosts_changed"):
        await asyncio.wait_for(master.ensure(15), 60)
    await master.stop()


@live
async def test_a_stale_control_socket_does_not_break_a_start(vlab, tmp_path, monkeypatch):
    user_known_hosts(tmp_path, monkeypatch, vlab.ssh / "known_hosts")
    master = ssh_tunnel.Master(ssh_tunnel.destination(program_uri(vlab)))
    dead_pid = subprocess.Popen(["true"])  # a corral that is gone
    dead_pid.wait()
    for path in (master.ctl, master.ctl.with_name(f"{master.dest.key()}-{dead_pid.pid}")):
        with socket.socket(socket.AF_UNIX) as s:  # bound, never listened to, left behind
            s.bind(str(path))
    stale = master.ctl.with_name(f"{master.dest.key()}-{dead_pid.pid}")
    try:
        await asyncio.wait_for(master.ensure(15), 60)
        assert master.running() and not stale.exists()
    finally:
        await master.stop()
    assert not master.ctl.exists()


@live
async def test_the_master_ends_when_corral_is_killed(vlab, tmp_path, monkeypatch):
    user_known_hosts(tmp_path, monkeypatch, vlab.ssh / "known_hosts")
    before = ssh_connections(vlab)
    corral = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CORRAL, program_uri(vlab), cwd=ROOT,
        stdout=asyncio.subprocess.PIPE)
    try:
        line = await asyncio.wait_for(corral.stdout.readline(), 120)
        pid, ctl = line.decode().split()
        assert ssh_connections(vlab) == before + 1
    finally:
        corral.kill()  # SIGKILL: corral has no say in it
        await corral.wait()
    await until(lambda: not Path(f"/proc/{pid}").exists(), "the master to end")
    await until(lambda: ssh_connections(vlab) == before, "its connection to end")
    assert not Path(ctl).exists()  # ssh removed its socket as it ended


@live
async def test_a_killed_master_is_replaced_on_the_next_call(vlab, tmp_path, monkeypatch):
    """SIGKILL leaves the master's control socket behind and ends libvirt's session in it:
    the remote's next call opens libvirt again through a new master on the same path."""
    user_known_hosts(tmp_path, monkeypatch, vlab.ssh / "known_hosts")
    before = ssh_connections(vlab)
    lv = get_backend(Remote(name="lvs4", kind="libvirt", address=program_uri(vlab)),
                     timeout=30)
    try:
        await lv.connect()
        master = lv.lv.tunnel
        first = master.proc
        first.kill()
        await first.wait()
        assert master.ctl.exists()  # stale: nobody listens on it any more
        await until(lambda: lv.lv.conn is None, "libvirt to see its connection end")
        await lv.list_instances()
        assert master.proc is not first and master.running()
        assert ssh_connections(vlab) == before + 1
    finally:
        await lv.close()
    await until(lambda: ssh_connections(vlab) == before, "the master to end")


@live
async def test_a_stream_to_nothing_is_said_in_words(vlab, tmp_path, monkeypatch):
    user_known_hosts(tmp_path, monkeypatch, vlab.ssh / "known_hosts")
    master = ssh_tunnel.Master(ssh_tunnel.destination(program_uri(vlab)))
    try:
        with pytest.raises(Unreachable, match="could not connect to the VNC screen of x "
                                              r"\(/run/libvirt/none.sock\) for corral"):
            await asyncio.wait_for(master.stream("/run/libvirt/none.sock", 15,
                                                 "the VNC screen of x"), 60)
        assert master.running() and not list(master.ctl.parent.glob("*.sock"))
    finally:
        await master.stop()


@live
async def test_two_remotes_on_one_host_share_its_master(vlab, tmp_path, monkeypatch):
    """Two remotes with the same destination (an alias and corral's own entry): one master,
    one connection, until the last of them closes."""
    user_known_hosts(tmp_path, monkeypatch, vlab.ssh / "known_hosts")
    before = ssh_connections(vlab)
    a, b = (get_backend(Remote(name=n, kind="libvirt", address=program_uri(vlab)), timeout=30)
            for n in ("lvs5", "lvs6"))
    try:
        await a.connect()
        await b.connect()
        assert a.lv.tunnel is b.lv.tunnel and ssh_connections(vlab) == before + 1
        await a.close()
        await b.list_instances()  # b's libvirt session is untouched
        assert b.lv.tunnel.running() and ssh_connections(vlab) == before + 1
    finally:
        await a.close()
        await b.close()
    await until(lambda: ssh_connections(vlab) == before, "the shared master to end")


def _graphics(inner: str) -> str:
    return f"<domain><devices><graphics type='spice'/>{inner}</devices></domain>"


@pytest.mark.parametrize("graphics, target, why", [
    ("<graphics type='vnc' socket='/run/v.sock'><listen type='socket' socket='/run/v.sock'/>"
     "</graphics>", "/run/v.sock", ""),
    ("<graphics type='vnc'><listen type='socket' socket='/run/w.sock'/></graphics>",
     "/run/w.sock", ""),
    ("<graphics type='vnc' port='5901' autoport='yes' listen='127.0.0.1'>"
     "<listen type='address' address='127.0.0.1'/></graphics>", "127.0.0.1:5901", ""),
    ("<graphics type='vnc' port='5902' listen='0.0.0.0'/>", "localhost:5902", ""),
    ("<graphics type='vnc' port='5903'><listen type='address' address='::1'/></graphics>",
     "[::1]:5903", ""),
    ("<graphics type='vnc' port='-1' autoport='yes'/>", "", "has no port yet"),
    ("<graphics type='vnc'><listen type='none'/></graphics>", "", "listens nowhere"),
    ("<graphics type='vnc' port='5904' passwd='x'/>", "", "has a password"),
    ("", "", "no VNC screen"),
])
def test_where_a_vnc_screen_listens_on_the_server(graphics, target, why):
    """Read from the running domain's XML (libvirt's live XML: autoport's port filled in)."""
    from backends.libvirt.display import vnc_target

    found, reason = vnc_target(_graphics(graphics))
    assert found == target and why in reason and bool(reason) == bool(why)
