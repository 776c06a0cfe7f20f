"""The file panel's verbs and tree copies against the real things: LXD and Incus through
their file API (checked with `lxc file pull/push` / `incus file …` and checksums), and
LXC containers through the host's view of their rootfs (checked with lxc-attach)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess

import pytest

from backends import files, get_backend
from backends.errors import InvalidInput, NotFound, OperationFailed
from backends.lxc import LXCBackend, lxc_remotes
from backends.models import FileEntry, InstanceRef
from backends.remotes import discover

REMOTES = ["local", "inc1"]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tree(tmp_path):
    """A local tree: a binary file, a 0600 file, a nested dir, a symlink pointing out."""
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "big.bin").write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    (src / "secret").write_text("s3cret\n")
    os.chmod(src / "secret", 0o600)
    (src / "sub" / "note.txt").write_text("hello\n")
    os.chmod(src / "sub", 0o750)
    os.symlink("/etc/shadow", src / "out")
    os.chown(src / "secret", 1234, 2345)
    return src


@pytest.fixture(params=REMOTES)
async def lxd_subject(request, lab, lab_env, unique):
    remotes = {r.name: r for r in discover(lab_env).remotes}
    backend = get_backend(remotes[request.param], timeout=10)
    await backend.connect()
    daemon = {"local": lab.lxd1, "inc1": lab.incus1}[request.param]
    name = unique()
    daemon.cli("launch", "busybox", name)
    yield backend, daemon, InstanceRef(request.param, name)
    daemon.cli("delete", "--force", name)
    await backend.close()


async def test_push_tree_then_cli_pulls_the_same_bytes(lxd_subject, tmp_path):
    backend, daemon, ref = lxd_subject
    src = tree(tmp_path)
    seen = []
    tally = await files.push(backend, ref, str(src), "/root", seen.append)
    assert tally.files == 3 and tally.directories == 2 and tally.links == 1, tally.text
    assert seen and "3.0 MiB" in seen[-1]
    # the CLI sees what was pushed: content, mode, owner, the symlink as a symlink
    out = tmp_path / "cli-big"
    daemon.cli("file", "pull", f"{ref.name}/root/src/big.bin", str(out))
    assert sha(out.read_bytes()) == sha((src / "big.bin").read_bytes())
    ls = daemon.cli("exec", ref.name, "--", "ls", "-ln", "/root/src", "/root/src/sub").stdout
    assert "-rw-------    1 1234     2345" in ls, ls
    assert "drwxr-x---" in ls and "out -> /etc/shadow" in ls, ls
    # the listing says the same
    listed = {e.name: e for e in await backend.list_files(ref, "/root/src")}
    assert listed["secret"].mode == 0o600 and (listed["secret"].uid, listed["secret"].gid) == (
        1234, 2345)
    assert listed["out"].kind == "symlink" and listed["out"].target == "/etc/shadow"
    assert listed["sub"].kind == "directory" and listed["sub"].mode == 0o750
    with pytest.raises(InvalidInput, match="not a directory"):
        await backend.list_files(ref, "/root/src/secret")
    with pytest.raises(NotFound):
        await backend.list_files(ref, "/nowhere")


async def test_cli_pushes_then_pull_tree_keeps_bytes_mode_and_links(lxd_subject, tmp_path):
    backend, daemon, ref = lxd_subject
    payload = os.urandom(2 * 1024 * 1024 + 5)
    (tmp_path / "p.bin").write_bytes(payload)
    daemon.cli("exec", ref.name, "--", "mkdir", "-p", "/srv/data/deep")
    daemon.cli("file", "push", str(tmp_path / "p.bin"), f"{ref.name}/srv/data/deep/p.bin",
               "--mode", "0604")
    daemon.cli("exec", ref.name, "--", "ln", "-s", "../../..", "/srv/data/up")
    listed = {e.name: e for e in await backend.list_files(ref, "/srv")}
    dest = tmp_path / "dest"
    dest.mkdir()
    tally = await files.pull(backend, ref, listed["data"], str(dest))
    assert tally.files == 1 and tally.links == 1
    got = dest / "data" / "deep" / "p.bin"
    assert sha(got.read_bytes()) == sha(payload)
    assert os.stat(got).st_mode & 0o7777 == 0o604
    # a symlink stays a symlink, not followed; the daemon answers a relative target
    # resolved inside the instance (here "/"), never a host path
    assert os.path.islink(dest / "data" / "up")
    assert os.readlink(dest / "data" / "up") in ("../../..", "/")
    with pytest.raises(InvalidInput, match="exists already"):
        await files.pull(backend, ref, listed["data"], str(dest))


async def test_a_pulled_tree_is_the_pullers_with_permission_bits_only(lxd_subject, tmp_path):
    """A container's owners and special bits stay inside: a setuid file of its uid 1000
    and a setgid, world-writable directory land on the host as the puller's, with their
    permission bits only (the container's uid 1000 is a host user's)."""
    backend, daemon, ref = lxd_subject
    (tmp_path / "tool").write_bytes(b"#!/bin/sh\n")
    daemon.cli("exec", ref.name, "--", "mkdir", "-p", "/srv/drop")
    daemon.cli("exec", ref.name, "--", "chmod", "2777", "/srv/drop")
    daemon.cli("file", "push", str(tmp_path / "tool"), f"{ref.name}/srv/drop/tool")
    daemon.cli("exec", ref.name, "--", "chown", "1000:1000", "/srv/drop/tool")
    daemon.cli("exec", ref.name, "--", "chmod", "4755", "/srv/drop/tool")
    listed = {e.name: e for e in await backend.list_files(ref, "/srv")}
    dest = tmp_path / "dest"
    dest.mkdir()
    await files.pull(backend, ref, listed["drop"], str(dest))
    for path, bits in ((dest / "drop", 0o777), (dest / "drop" / "tool", 0o755)):
        st = os.lstat(path)
        assert st.st_mode & 0o7777 == bits, (path, oct(st.st_mode))
        assert (st.st_uid, st.st_gid) == (os.geteuid(), os.getegid()), path


async def test_cancel_a_push_and_refusals_in_words(lxd_subject, tmp_path):
    backend, daemon, ref = lxd_subject
    big = tmp_path / "huge.bin"
    with open(big, "wb") as f:
        f.truncate(400 * 1024 * 1024)
    task = asyncio.ensure_future(files.push(backend, ref, str(big), "/root"))
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(InvalidInput, match="does not exist"):
        await files.push(backend, ref, str(tmp_path / "missing"), "/root")
    # a directory in the way of a file
    daemon.cli("exec", ref.name, "--", "mkdir", "-p", "/root/clash")
    (tmp_path / "clash").write_text("x")
    with pytest.raises(OperationFailed):
        await backend.write_file(ref, FileEntry("/root/clash", "file", mode=0o644),
                                 str(tmp_path / "clash"))


@pytest.fixture
async def lxc_subject(lxc_path):
    backend = LXCBackend(lxc_remotes([str(lxc_path)])[0], timeout=10)
    await backend.connect()
    await backend.create("f1")
    yield backend, lxc_path, InstanceRef("lxc", "f1")
    await backend.close()


def attach(path, name, *argv):
    return subprocess.run(["lxc-attach", "-P", str(path), "-n", name, "--", *argv],
                          capture_output=True, text=True, timeout=30)


async def test_lxc_push_pull_stopped_and_running(lxc_subject, tmp_path):
    backend, path, ref = lxc_subject
    src = tree(tmp_path)
    # stopped: through the dir rootfs
    tally = await files.push(backend, ref, str(src), "/root")
    assert tally.files == 3 and tally.links == 1
    await backend.start(ref)
    try:
        out = attach(path, "f1", "sha256sum", "/root/src/big.bin").stdout
        assert out.split()[0] == sha((src / "big.bin").read_bytes())
        ls = attach(path, "f1", "ls", "-ln", "/root/src").stdout
        assert "-rw-------    1 1234     2345" in ls and "out -> /etc/shadow" in ls, ls
        # running: through /proc/<pid>/root; a symlink pointing out of the container is
        # resolved inside it (here: the container's /etc, not the host's)
        attach(path, "f1", "sh", "-c", "echo inside > /etc/corral-marker; "
                                       "ln -s /etc /root/etclink")
        listed = {e.name: e for e in await backend.list_files(ref, "/root/etclink")}
        assert "corral-marker" in listed
        dest = tmp_path / "back"
        dest.mkdir()
        await files.pull(backend, ref, listed["corral-marker"], str(dest))
        assert (dest / "corral-marker").read_text() == "inside\n"
        root = {e.name: e for e in await backend.list_files(ref, "/root")}
        await files.pull(backend, ref, root["src"], str(dest))
        assert sha((dest / "src" / "big.bin").read_bytes()) == sha(
            (src / "big.bin").read_bytes())
        assert os.readlink(dest / "src" / "out") == "/etc/shadow"
        with pytest.raises(NotFound):
            await backend.list_files(ref, "/root/nothing/here")
    finally:
        await backend.stop(ref, timeout=5, force=True)


def test_lxc_paths_never_leave_the_root(tmp_path):
    from backends.rootfs import open_root

    root = tmp_path / "rootfs"
    (root / "etc").mkdir(parents=True)
    os.symlink("/etc", root / "abs")
    os.symlink("../../../../..", root / "up")
    with open_root(str(root)) as r:  # more in test_rootfs_files.py
        assert {e.name for e in r.listdir("/abs/../up/etc/..")} == {"etc", "abs", "up"}
        assert not list(r.listdir("/../../etc"))
        assert {e.name: e.target for e in r.listdir("/")}["abs"] == "/etc"


async def test_lxd_write_refusals_in_words(lxd_subject, tmp_path):
    backend, daemon, ref = lxd_subject
    local = tmp_path / "x"
    local.write_text("x")
    with pytest.raises(OperationFailed, match="does not exist there"):
        await backend.write_file(ref, FileEntry("/no/such/dir/x", "file"), str(local))
    with pytest.raises(OperationFailed, match="[Pp]ermission denied"):
        await backend.write_file(ref, FileEntry("/sys/corral", "file"), str(local))


async def test_lxc_no_space_is_said_and_leaves_no_partial_file(lxc_subject, tmp_path):
    backend, path, ref = lxc_subject
    small = path / "f1" / "rootfs" / "mnt" / "small"
    small.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(small)],
                   check=True)
    try:
        big = tmp_path / "big.bin"
        big.write_bytes(os.urandom(1024 * 1024))
        with pytest.raises(OperationFailed, match="no space left"):
            await files.push(backend, ref, str(big), "/mnt/small")
        assert not (small / "big.bin").exists()
        # a directory in the way of a file, and an unmapped owner in words too
        (small / "d").mkdir()
        with pytest.raises(OperationFailed):
            await backend.write_file(ref, FileEntry("/mnt/small/d", "file"), str(big))
    finally:
        subprocess.run(["umount", str(small)], check=True)


def test_a_stopped_lxd_vm_offers_no_files():
    from backends.lxd.backend import LXDBackend
    from backends.models import Capability, Instance, InstanceStatus, InstanceType, Remote

    b = LXDBackend(Remote("r", "lxd", "unix:///nowhere"))
    vm = Instance(InstanceRef("r", "v"), InstanceType.VM, InstanceStatus.STOPPED)
    ct = Instance(InstanceRef("r", "c"), InstanceType.CONTAINER, InstanceStatus.STOPPED)
    assert Capability.FILES not in b.instance_capabilities(vm)
    assert Capability.FILES in b.instance_capabilities(ct)  # containers: the daemon reads the disk
    running = Instance(InstanceRef("r", "v"), InstanceType.VM, InstanceStatus.RUNNING)
    assert Capability.FILES in b.instance_capabilities(running)


def test_lxc_owners_through_the_idmap():
    from backends.lxc.files import IdMap

    ids = IdMap("lxc.idmap = u 0 100000 65536\nlxc.idmap = g 0 100000 65536\n")
    assert ids.inside("u", 100000) == 0 and ids.inside("u", 101000) == 1000
    assert ids.outside("g", 1000) == 101000
    assert ids.inside("u", 5) == 65534  # a host id the container cannot see: nobody
    with pytest.raises(InvalidInput, match="not mapped"):
        ids.outside("u", 70000)
    plain = IdMap("lxc.uts.name = c1\n")  # privileged: the same ids
    assert plain.inside("u", 1234) == 1234 == plain.outside("u", 1234)


async def test_listing_through_sftp_has_every_detail_in_one_round_trip(lxd_subject):
    """Through the instance's SFTP channel (LXD 5.0.2 and Incus 6.0 have it), a directory's names come with their
    type, size, mode, owner and link target at once, equal to what the instance's own
    ``stat`` says and to the ``/files`` API's answer; the channel is kept for the next
    listing; a missing path or a file is refused in the ``/files`` API's words."""
    backend, daemon, ref = lxd_subject
    daemon.cli("exec", ref.name, "--", "sh", "-c",
               "mkdir -p /srv/t/sub && chmod 750 /srv/t/sub && head -c 12345 /dev/zero "
               "> /srv/t/data && chown 1234:2345 /srv/t/data && chmod 640 /srv/t/data && "
               "ln -s ../etc/hostname /srv/t/link && : > '/srv/t/with space'")
    names = await backend.list_names(ref, "/srv/t")
    assert names == ["data", "link", "sub", "with space"]
    assert (ref, "/srv/t") in backend.sftp.listed  # the details came with the names
    entries = {e.name: e for e in await backend.stat_files(ref, "/srv/t", names)}
    truth = daemon.cli("exec", ref.name, "--", "stat", "-c", "%n|%s|%a|%u|%g|%F",
                       "/srv/t/data", "/srv/t/sub", "/srv/t/link", "/srv/t/with space").stdout
    kinds = {"regular file": "file", "directory": "directory", "symbolic link": "symlink",
             "regular empty file": "file"}
    for line in truth.splitlines():
        path, size, mode, uid, gid, kind = line.split("|")
        e = entries[path.rsplit("/", 1)[1]]
        assert (e.kind, e.uid, e.gid) == (kinds[kind], int(uid), int(gid)), line
        if e.kind != "symlink":
            assert e.mode == int(mode, 8), line
        if e.kind == "file":
            assert e.size == int(size), line
    # the target as stored, as readlink says (the /files API answers it made absolute:
    # /srv/etc/hostname)
    assert entries["link"].target == "../etc/hostname" == daemon.cli(
        "exec", ref.name, "--", "readlink", "/srv/t/link").stdout.strip()
    assert entries["data"].size == 12345
    # the /files API (one HEAD per name) says the same of type, mode and owner
    by_head = {e.name: e for e in await backend.stat_files(ref, "/srv/t", names)}
    for name, e in entries.items():
        assert (by_head[name].kind, by_head[name].uid, by_head[name].gid) \
            == (e.kind, e.uid, e.gid), name
    assert [e.name for e in await backend.list_files(ref, "/srv/t/sub")] == []
    with pytest.raises(NotFound, match="does not exist"):
        await backend.list_names(ref, "/srv/nothing-here")
    with pytest.raises(InvalidInput, match="not a directory"):
        await backend.list_names(ref, "/srv/t/data")
    assert not backend.sftp.failed and not backend.sftp.absent  # (refusals, not failures)
    # a listing whose details were never asked for does not stay behind
    await backend.list_names(ref, "/srv/t")
    await backend.list_names(ref, "/srv")
    assert [k for k in backend.sftp.listed if k[0] == ref] == [(ref, "/srv")]
    # no channel is left open: the container stops at once, and is listed stopped too
    daemon.cli("stop", "--force", ref.name, timeout=20)
    assert "data" in await backend.list_names(ref, "/srv/t")
    assert (ref, "/srv/t") in backend.sftp.listed
