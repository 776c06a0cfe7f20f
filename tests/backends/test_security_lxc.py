"""Hostile archives, the attach shell's environment, the console server's isolation and
private files, with the real lxc-* tools in a private lxcpath (busybox template, no NIC)
and the real console server."""

from __future__ import annotations

import asyncio
import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from backends.console.client import console_dir, ensure_server, server_pid
from backends.errors import InvalidInput
from backends.lxc import LXCBackend, lxc_remotes
from backends.models import InstanceRef
from tui.terminal.record import AsciicastRecorder


@pytest.fixture
async def backend(lxc_path, monkeypatch):
    run = f"/tmp/cq-sec-{os.getpid()}"
    monkeypatch.setenv("XDG_RUNTIME_DIR", run)
    b = LXCBackend(lxc_remotes([str(lxc_path)])[0], timeout=10)
    await b.connect()
    yield b
    await b.close()
    for sock in Path(run).rglob("*.ws"):
        pid = server_pid(str(sock))
        if pid:
            os.kill(pid, 15)


def ref(name):
    return InstanceRef("lxc", name)


def tar_of(path: Path, source: Path, *, config: str | None = None, extra=(), drop=()):
    """An archive of the container directory ``source`` (as export writes it), with its
    config replaced by ``config``, without the members named in ``drop`` and with
    ``extra`` members (name, type, data-or-linkname) appended."""
    with tarfile.open(path, "w") as tar:
        for member in ("config", "rootfs", "snaps"):
            if (source / member).exists() and not (member == "config" and config):
                tar.add(source / member, arcname=f"./{member}",
                        filter=lambda info: None if info.name[2:] in drop else info)
        if config is not None:
            data = config.encode()
            info = tarfile.TarInfo("./config")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, kind, extra_data in extra:
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
                info.linkname = extra_data
                tar.addfile(info)
            elif kind in (tarfile.DIRTYPE, tarfile.CHRTYPE):
                info.mode = 0o755
                tar.addfile(info)
            else:
                data = extra_data.encode()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


HOSTILE = [
    ("lxc.hook.pre-start = /bin/sh -c 'touch /tmp/pwned'", "lxc.hook.pre-start"),
    ("lxc.include = /etc/corral-evil.conf", "lxc.include"),
    ("lxc.mount.entry = /root host-root none bind,create=dir 0 0", "lxc.mount.entry"),
    ("lxc.mount.entry = /lib lib none rw,bind 0 0", "lxc.mount.entry"),
    ("lxc.mount.fstab = /etc/fstab", "lxc.mount.fstab"),
    ("lxc.cap.keep = sys_admin", "lxc.cap.keep"),
    ("lxc.cap.drop =", "lxc.cap.drop"),
    ("lxc.apparmor.profile = unconfined", "lxc.apparmor.profile"),
    ("lxc.seccomp.profile = /dev/null", "lxc.seccomp.profile"),
    ("lxc.cgroup2.devices.allow = b 8:* rwm", "lxc.cgroup2.devices.allow"),
    ("lxc.start.auto = 1", "lxc.start.auto"),
    ("lxc.net.0.script.up = /tmp/x", "lxc.net.0.script.up"),
    ("lxc.namespace.share.net = 1", "lxc.namespace.share.net"),
    ("lxc.log.file = /etc/cron.d/corral", "lxc.log.file"),
]


async def test_import_refuses_hostile_config_keys_naming_them(backend, lxc_path, tmp_path):
    await backend.create("src")
    src = lxc_path / "src"
    good = (src / "config").read_text()
    before = sorted(p.name for p in lxc_path.iterdir())
    for line, key in HOSTILE:
        archive = tmp_path / "hostile.tar"
        tar_of(archive, src, config=good + line + "\n")
        with pytest.raises(InvalidInput, match=rf"config has settings .*{key.replace('.', '[.]')}"):
            await backend.import_instance(str(archive), "imp")
        assert sorted(p.name for p in lxc_path.iterdir()) == before, line
        archive.unlink()
    # a snapshot's config is checked too (restoring it would bring the hook back)
    await backend.create_snapshot(ref("src"), "s")
    snap_cfg = (src / "snaps" / "snap0" / "config").read_text()
    archive = tmp_path / "snap.tar"
    tar_of(archive, src, drop=["snaps/snap0/config"],
           extra=[("./snaps/snap0/config", tarfile.REGTYPE,
                   snap_cfg + "lxc.hook.start-host = /bin/true\n")])
    with pytest.raises(InvalidInput, match="snaps/snap0/config has settings"):
        await backend.import_instance(str(archive), "imp")
    assert sorted(p.name for p in lxc_path.iterdir()) == before
    # corral's own containers still import and start
    plain = tmp_path / "plain.tar"
    await backend.export_instance(ref("src"), str(plain))
    await backend.set_limits(ref("src"), {"memory": "256MiB"})
    limited = tmp_path / "limited.tar"
    await backend.export_instance(ref("src"), str(limited))
    await backend.import_instance(str(plain), "ok1")
    await backend.import_instance(str(limited), "ok2")
    await backend.start(ref("ok2"))
    await backend.stop(ref("ok2"), force=True)
    assert not Path("/tmp/pwned").exists()


async def test_import_refuses_links_leaving_the_archive(backend, lxc_path, tmp_path):
    await backend.create("victim")
    await backend.create("src")
    await backend.create_snapshot(ref("src"), "s")
    src = lxc_path / "src"
    victim_config = (lxc_path / "victim" / "config").read_text()
    sym, lnk, chr_ = tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE
    cases = {
        # the example: snaps/x -> another container; its config would be rewritten
        "snapdir-link": ([("./snaps/x", sym, str(lxc_path / "victim"))], "is a link"),
        "snapcfg-link": ([("./snaps/y", tarfile.DIRTYPE, ""),
                          ("./snaps/y/config", sym, str(lxc_path / "victim" / "config"))],
                         "is a link"),
        "snaps-link": (None, "is a link"),
        "rootfs-link": (None, "is a link"),
        "hardlink-through-link": ([("./rootfs/hostetc", sym, "/etc"),
                                   ("./rootfs/stolen", lnk, "rootfs/hostetc/shadow")],
                                  "beyond a symbolic link"),
        "device-outside": ([("./snaps/dev", chr_, "")], "device or special file"),
    }
    before = sorted(p.name for p in lxc_path.iterdir())
    for name, (extra, why) in cases.items():
        archive = tmp_path / f"{name}.tar"
        if name == "snaps-link":
            with tarfile.open(archive, "w") as tar:
                tar.add(src / "config", arcname="./config")
                tar.add(src / "rootfs", arcname="./rootfs")
                info = tarfile.TarInfo("./snaps")
                info.type, info.linkname = sym, str(lxc_path / "victim")
                tar.addfile(info)
        elif name == "rootfs-link":
            with tarfile.open(archive, "w") as tar:
                tar.add(src / "config", arcname="./config")
                info = tarfile.TarInfo("./rootfs")
                info.type, info.linkname = sym, "/"
                tar.addfile(info)
        else:
            tar_of(archive, src, extra=extra)
        with pytest.raises(InvalidInput, match=why):
            await backend.import_instance(str(archive), "imp")
        assert sorted(p.name for p in lxc_path.iterdir()) == before, name
        assert (lxc_path / "victim" / "config").read_text() == victim_config, name
    # links inside the root file system are the container's own: they import (absolute
    # ones as the container sees them; a relative one climbing above it would leave it
    # on the host: see test_security_lxc_archives.py)
    archive = tmp_path / "inner-links.tar"
    tar_of(archive, src, extra=[("./rootfs/etc-link", sym, "/etc"),
                                ("./rootfs/usr/up", sym, "../etc")])
    await backend.import_instance(str(archive), "imp")
    assert os.readlink(lxc_path / "imp" / "rootfs" / "etc-link") == "/etc"
    assert os.readlink(lxc_path / "imp" / "rootfs" / "usr" / "up") == "../etc"
    assert (lxc_path / "victim" / "config").read_text() == victim_config


async def test_attach_shell_gets_a_clean_environment(backend, lxc_path, monkeypatch):
    monkeypatch.setenv("CORRAL_TEST_TOKEN", "s3cret-token")
    monkeypatch.setenv("SSH_AUTH_SOCK", "/tmp/agent.sock")
    await backend.create("envc")
    await backend.start(ref("envc"))
    try:
        dump = lxc_path / "envc" / "rootfs" / "env.txt"
        session = await backend.open_shell(
            ref("envc"), ["/bin/sh", "-c", "cat /proc/self/environ > /env.txt"])
        for _ in range(100):
            if dump.exists() and dump.stat().st_size:
                break
            await asyncio.sleep(0.1)
        await session.close()
        env = dict(item.split("=", 1) for item in dump.read_text().split("\0") if item)
    finally:
        await backend.stop(ref("envc"), force=True)
    assert "CORRAL_TEST_TOKEN" not in env and "SSH_AUTH_SOCK" not in env
    assert "CORRAL_CONFIG_FILE" not in env
    assert env["TERM"] == "xterm-256color" and env["HOME"] == "/root"
    assert "/bin" in env["PATH"].split(":") and env["LANG"]


async def test_console_server_ignores_a_hostile_backends_package(tmp_path, monkeypatch):
    """corral started (as root) from a directory holding a ``backends/`` package: the
    console server must import corral's own code, not run that one."""
    evil = tmp_path / "evil"
    (evil / "backends" / "console").mkdir(parents=True)
    marker = tmp_path / "pwned"
    payload = f"open({str(marker)!r}, 'w').write('ran')\n"
    (evil / "backends" / "__init__.py").write_text(payload)
    (evil / "backends" / "console" / "__init__.py").write_text(payload)
    (evil / "backends" / "console" / "__main__.py").write_text(payload)
    monkeypatch.chdir(evil)
    monkeypatch.setenv("PYTHONPATH", str(evil))  # ignored too (-I)
    monkeypatch.setenv("XDG_RUNTIME_DIR", f"/tmp/cq-sec-iso-{os.getpid()}")
    sock = str(console_dir("test", "iso") / "x.ws")
    started = await ensure_server(sock, ["--pty", "--", "/bin/sh", "-c", "sleep 30"])
    pid = server_pid(sock)
    try:
        assert started and pid
        assert not marker.exists()
        assert os.readlink(f"/proc/{pid}/cwd") == "/"
        assert os.stat(sock).st_mode & 0o077 == 0
    finally:
        if pid:
            os.kill(pid, 15)


async def test_exports_and_recordings_are_private(backend, lxc_path, tmp_path):
    old = os.umask(0o022)
    try:
        await backend.create("priv")
        await backend.export_instance(ref("priv"), str(tmp_path / "p.tar"))
        assert stat.S_IMODE(os.stat(tmp_path / "p.tar").st_mode) == 0o600
        rec = tmp_path / "rec" / "x.cast"
        AsciicastRecorder(rec, 80, 24).close()
        assert stat.S_IMODE(os.stat(rec).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(rec.parent).st_mode) == 0o700
    finally:
        os.umask(old)
