"""LXC file push, edit, pull and listing never leave the container's root: symlinks made
by the container's root (`/tmp/x -> /`, `-> /etc`, to a host path), a component swapped
into a symlink at every step of an operation, a directory flipped into a symlink by a
loop inside the container, FIFOs and device nodes at the destination. Each is refused
in words or resolved inside the container, and the host's files stay untouched. Real
LXC in a private lxcpath; the openat2 helper on a plain directory tree."""

from __future__ import annotations

import asyncio
import ctypes
import errno
import os
import shutil
import stat
import subprocess
import threading

import pytest

from backends.errors import BackendError, InvalidInput, NotFound, OperationFailed
from backends.lxc import LXCBackend, lxc_remotes
from backends.models import FileEntry, InstanceRef


@pytest.fixture
async def running(lxc_path):
    backend = LXCBackend(lxc_remotes([str(lxc_path)])[0], timeout=10)
    await backend.connect()
    await backend.create("r1")
    ref = InstanceRef("lxc", "r1")
    await backend.start(ref)
    yield backend, lxc_path, ref
    await backend.stop(ref, timeout=5, force=True)
    await backend.close()


def inside(path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["lxc-attach", "-P", str(path), "-n", "r1", "--", *argv],
                          capture_output=True, text=True, timeout=30)


def host_side(tmp_path):
    """A host directory the container cannot see, and a file in it."""
    side = tmp_path / "hostside"
    side.mkdir()
    (side / "keep").write_text("host\n")
    return side


def untouched(side) -> bool:
    return sorted(os.listdir(side)) == ["keep"] and (side / "keep").read_text() == "host\n"


async def test_symlinks_made_by_container_root_resolve_inside(running, tmp_path):
    backend, path, ref = running
    side = host_side(tmp_path)
    local = tmp_path / "payload"
    local.write_text("pushed\n")
    made = inside(path, "sh", "-c", f"mkdir -p /tmp && ln -s / /tmp/x && ln -s /etc /tmp/e "
                                    f"&& ln -s {side} /tmp/h && echo in > /etc/corral-in")
    assert made.returncode == 0, made.stderr
    await backend.write_file(ref, FileEntry("/tmp/x/etc/corral-a", "file", mode=0o640),
                             str(local))
    await backend.write_file(ref, FileEntry("/tmp/e/corral-b", "file", mode=0o600),
                             str(local))
    assert not os.path.exists("/etc/corral-a") and not os.path.exists("/etc/corral-b")
    got = inside(path, "cat", "/etc/corral-a", "/etc/corral-b").stdout
    assert got == "pushed\npushed\n"
    with pytest.raises(NotFound, match="does not exist"):  # the host path, not in there
        await backend.write_file(ref, FileEntry("/tmp/h/keep", "file"), str(local))
    with pytest.raises(NotFound):
        await backend.list_files(ref, "/tmp/h")
    listed = {e.name for e in await backend.list_files(ref, "/tmp/e")}
    assert "corral-in" in listed and "corral-a" in listed
    dest = tmp_path / "back"
    await backend.read_file(ref, FileEntry("/tmp/x/etc/corral-in", "file", mode=0o644),
                            str(dest))
    assert dest.read_text() == "in\n"
    # a directory through the link is made inside; a symlink written stays a symlink
    await backend.write_file(ref, FileEntry("/tmp/x/etc/corral-dir", "directory",
                                            mode=0o750))
    await backend.write_file(ref, FileEntry("/tmp/e/corral-ln", "symlink", target="/"))
    assert not os.path.exists("/etc/corral-dir") and not os.path.lexists("/etc/corral-ln")
    assert "drwxr-x---" in inside(path, "ls", "-ld", "/etc/corral-dir").stdout
    assert untouched(side)


async def test_a_component_swapped_at_every_step(running, tmp_path, monkeypatch):
    """Between each step of a push (opening the parent, creating the new file, renaming
    it), the container's root turns the parent directory into a symlink to a host path:
    the write lands inside the container or is refused, never on the host."""
    from backends import rootfs

    backend, path, ref = running
    side = host_side(tmp_path)
    rootfs_dir = f"/proc/{(await backend.lxc.run('lxc-info', '-n', 'r1', '-p', '-H'))[1].strip()}/root"
    local = tmp_path / "payload"
    local.write_text("pushed\n")

    def swap(_step: str) -> None:
        d = f"{rootfs_dir}/srv/w"
        if os.path.islink(d):
            return
        os.rename(d, f"{rootfs_dir}/srv/w-moved")
        os.symlink(str(side), d)  # an absolute host path, as container root can write

    for step in ("mkdir", "create", "rename", "symlink", "reopen", "listdir"):
        inside(path, "sh", "-c", "rm -rf /srv/w /srv/w-moved; mkdir -p /srv/w; "
                                 "echo old > /srv/w/keep")
        monkeypatch.setattr(rootfs.Root, "between", staticmethod(
            lambda s, step=step: swap(s) if s == step else None))
        entry = {"mkdir": FileEntry("/srv/w/d", "directory", mode=0o700),
                 "symlink": FileEntry("/srv/w/l", "symlink", target="x"),
                 "reopen": FileEntry("/srv/w/keep", "file")}.get(
                     step, FileEntry("/srv/w/keep", "file", mode=0o644))
        if step == "reopen":
            await backend.read_file(ref, entry, str(tmp_path / f"got-{step}"))
            assert (tmp_path / f"got-{step}").read_text() == "old\n"  # the file opened
        elif step == "listdir":
            assert [e.name for e in await backend.list_files(ref, "/srv/w")] == ["keep"]
        else:
            await backend.write_file(ref, entry, str(local))
        # the operation finished in the directory it had opened, now /srv/w-moved
        moved = f"{rootfs_dir}/srv/w-moved"
        if step in ("create", "rename"):
            assert open(f"{moved}/keep").read() == "pushed\n", step
        elif step == "mkdir":
            assert os.path.isdir(f"{moved}/d") and not os.path.islink(f"{moved}/d")
        elif step == "symlink":
            assert os.readlink(f"{moved}/l") == "x"
        assert os.path.islink(f"{rootfs_dir}/srv/w"), step  # the swap did happen
        assert untouched(side), step
    monkeypatch.setattr(rootfs.Root, "between", None)


async def test_a_directory_flipped_into_a_symlink_meanwhile(running, tmp_path):
    """The race for real: /tmp/r is exchanged with a symlink to a host path
    (renameat2 RENAME_EXCHANGE, which container root can do) as fast as a thread can,
    while corral pushes into it again and again: every push lands inside or is refused."""
    backend, path, ref = running
    side = host_side(tmp_path)
    local = tmp_path / "payload"
    local.write_text("pushed\n")
    inside(path, "sh", "-c", f"mkdir -p /tmp/r && ln -s {side} /tmp/r-alt")
    pid = (await backend.lxc.run("lxc-info", "-n", "r1", "-p", "-H"))[1].strip()
    tmp = os.open(f"/proc/{pid}/root/tmp", os.O_PATH | os.O_DIRECTORY)
    libc = ctypes.CDLL(None, use_errno=True)
    stop = threading.Event()

    def flip() -> None:
        while not stop.is_set():
            libc.renameat2(tmp, b"r", tmp, b"r-alt", 2)  # RENAME_EXCHANGE

    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    landed = refused = 0
    try:
        for _ in range(150):
            try:
                await backend.write_file(ref, FileEntry("/tmp/r/probe", "file", mode=0o644),
                                         str(local))
                landed += 1
            except BackendError:
                refused += 1
    finally:
        stop.set()
        flipper.join()
        os.close(tmp)
    assert landed + refused == 150 and landed > 0  # some pushes went through meanwhile
    assert untouched(side), os.listdir(side)


async def test_fifo_and_device_nodes_at_the_destination_are_refused(running, tmp_path):
    backend, path, ref = running
    pid = (await backend.lxc.run("lxc-info", "-n", "r1", "-p", "-H"))[1].strip()
    root = f"/proc/{pid}/root"
    assert inside(path, "mkfifo", "/tmp/fifo").returncode == 0
    # device nodes as container root could make them (made from the host here, so that
    # no device cgroup is in the way): /dev/null's numbers, harmless if written
    os.mknod(f"{root}/tmp/null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    os.mknod(f"{root}/tmp/blk", stat.S_IFBLK | 0o600, os.makedev(7, 200))
    local = tmp_path / "payload"
    local.write_text("pushed\n")
    try:
        for name, words in (("fifo", "a FIFO"), ("null", "a character device"),
                            ("blk", "a block device")):
            with pytest.raises(InvalidInput, match=f"is {words}"):
                await asyncio.wait_for(backend.write_file(
                    ref, FileEntry(f"/tmp/{name}", "file", mode=0o644), str(local)), 10)
            with pytest.raises(InvalidInput, match=f"is {words}, not a regular file"):
                await asyncio.wait_for(backend.read_file(
                    ref, FileEntry(f"/tmp/{name}", "file"), str(tmp_path / name)), 10)
            assert not (tmp_path / name).exists()
            mode = os.stat(f"{root}/tmp/{name}", follow_symlinks=False).st_mode
            assert not stat.S_ISREG(mode), name  # still the node, not replaced
    finally:
        # before the fix a write blocked on the FIFO: let it go
        fd = os.open(f"{root}/tmp/fifo", os.O_RDONLY | os.O_NONBLOCK)
        os.close(fd)


async def test_stopped_container_through_its_rootfs_dir(lxc_path, tmp_path):
    backend = LXCBackend(lxc_remotes([str(lxc_path)])[0], timeout=10)
    await backend.connect()
    try:
        await backend.create("s1")
        ref = InstanceRef("lxc", "s1")
        rootfs = lxc_path / "s1" / "rootfs"
        side = host_side(tmp_path)
        os.makedirs(rootfs / "tmp", exist_ok=True)
        os.symlink("/", rootfs / "tmp" / "x")
        os.symlink(str(side), rootfs / "tmp" / "h")
        os.mkfifo(rootfs / "tmp" / "fifo")
        local = tmp_path / "payload"
        local.write_text("pushed\n")
        await backend.write_file(ref, FileEntry("/tmp/x/etc/corral-s", "file", mode=0o600),
                                 str(local))
        assert (rootfs / "etc" / "corral-s").read_text() == "pushed\n"
        assert not os.path.exists("/etc/corral-s")
        with pytest.raises(NotFound):
            await backend.write_file(ref, FileEntry("/tmp/h/keep", "file"), str(local))
        with pytest.raises(InvalidInput, match="a FIFO"):
            await asyncio.wait_for(backend.write_file(
                ref, FileEntry("/tmp/fifo", "file"), str(local)), 10)
        assert untouched(side)
        # the rootfs dir itself is opened safely: beneath a directory anyone can change,
        # it is refused in words
        shared = tmp_path / "shared"
        shared.mkdir()
        os.chmod(shared, 0o777)
        shutil.move(str(rootfs), str(shared / "rootfs"))
        config = (lxc_path / "s1" / "config").read_text()
        (lxc_path / "s1" / "config").write_text(
            config.replace(str(rootfs), str(shared / "rootfs")))
        with pytest.raises(OperationFailed, match="can be changed by other users"):
            await backend.list_files(ref, "/")
    finally:
        await backend.close()


async def test_a_pulled_file_never_keeps_setuid_bits_on_the_host(lxc_path, tmp_path):
    """A file the container's root made setuid (its mode as listed, 04755) is pulled as
    this user's file with its permission bits only: a setuid-root copy of the container's
    program in a folder other users can reach would be their way to host root."""
    backend = LXCBackend(lxc_remotes([str(lxc_path)])[0], timeout=10)
    await backend.connect()
    try:
        await backend.create("s2")
        ref = InstanceRef("lxc", "s2")
        tool = lxc_path / "s2" / "rootfs" / "tool"
        tool.write_text("#!/bin/sh\n")
        os.chmod(tool, 0o6755)
        [entry] = [e for e in await backend.list_files(ref, "/") if e.name == "tool"]
        assert entry.mode == 0o6755
        dest = tmp_path / "pulled"
        await backend.read_file(ref, entry, str(dest))
        assert stat.S_IMODE(os.stat(dest).st_mode) == 0o755
    finally:
        await backend.close()


def test_openat2_helper_on_a_plain_tree(tmp_path):
    from backends.rootfs import RESOLVE_NO_MAGICLINKS, Root, open_root, openat2

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("host\n")
    root = tmp_path / "rootfs"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "passwd").write_text("inside\n")
    os.symlink("/etc", root / "abs")
    os.symlink("../../../../..", root / "up")
    os.symlink(str(outside), root / "host")
    os.symlink("/proc/self/root/etc", root / "magic")
    os.mkfifo(root / "fifo")
    with open_root(str(root)) as r:
        def read(p: str) -> str:
            fd = r.open_regular(p)
            try:
                return os.read(fd, 100).decode()
            finally:
                os.close(fd)

        assert read("/abs/passwd") == "inside\n"
        assert read("/up/etc/passwd") == "inside\n"
        assert read("../../../etc/passwd") == "inside\n"
        with pytest.raises(NotFound):
            read("/host/secret")  # the host path means the tree's own /<tmp>/outside
        with pytest.raises(NotFound):
            read("/magic/passwd")  # /proc inside the tree: there is none
        with pytest.raises(InvalidInput, match="a symlink, not a regular file"):
            read("/abs")
        with pytest.raises(InvalidInput, match="a FIFO"):
            read("/fifo")
        r.replace_file("/abs/new", os.getuid(), os.getgid(), 0o640,
                       lambda fd: os.write(fd, b"new\n"))
        assert (root / "etc" / "new").read_text() == "new\n"
        assert stat.S_IMODE(os.stat(root / "etc" / "new").st_mode) == 0o640
        with pytest.raises(InvalidInput, match="never through a symlink"):
            r.replace_file("/host", 0, 0, 0o644, lambda fd: None)
        # a failing fill leaves the old file and no temp file
        with pytest.raises(RuntimeError):
            r.replace_file("/etc/new", 0, 0, 0o644, lambda fd: (_ for _ in ()).throw(
                RuntimeError("boom")))
        assert sorted(os.listdir(root / "etc")) == ["new", "passwd"]
        assert (root / "etc" / "new").read_text() == "new\n"
        assert {e.name for e in r.listdir("/up")} == {"etc", "abs", "up", "host", "magic",
                                                        "fifo"}
        with pytest.raises(InvalidInput, match="not a directory"):
            list(r.listdir("/etc/passwd"))
        assert isinstance(r, Root)
    # magic links are refused even without RESOLVE_IN_ROOT's re-rooting
    base = os.open(str(root), os.O_PATH)
    try:
        with pytest.raises(OSError) as refused:
            openat2(base, "magic", os.O_PATH, resolve=RESOLVE_NO_MAGICLINKS)
        assert refused.value.errno == errno.ELOOP
    finally:
        os.close(base)
    assert (outside / "secret").read_text() == "host\n"
    # open_root: a world-writable (not sticky) directory on the way is refused, a sticky
    # one with our entry in it is fine
    loose = tmp_path / "loose"
    (loose / "rootfs").mkdir(parents=True)
    os.chmod(loose, 0o777)
    from backends.errors import OperationFailed as Failed
    with pytest.raises(Failed, match="can be changed by other users"):
        open_root(str(loose / "rootfs"))
    os.chmod(loose, 0o1777)
    open_root(str(loose / "rootfs")).close()
    os.symlink(str(root), tmp_path / "via")  # our own symlink on the way: followed
    with open_root(str(tmp_path / "via")) as r:
        assert {e.name for e in r.listdir("/")} >= {"etc", "fifo"}


def test_no_openat2_is_said_in_words(monkeypatch):
    """A kernel without openat2 (ENOSYS): a clear refusal, never a fallback walk."""
    from backends import rootfs

    class NoSyscall:
        @staticmethod
        def syscall(*_args):
            ctypes.set_errno(errno.ENOSYS)
            return -1

    monkeypatch.setattr(rootfs, "_libc", NoSyscall())
    with pytest.raises(OperationFailed, match="Linux 5.6 or later"):
        rootfs.openat2(-100, "/", os.O_PATH)
