"""The one archive reader (backends/archive.py) on its own: canonical names, duplicates,
links against a root file system, modes and owners, xattrs, damaged archives and
single-pass reading, with a small policy (``root/`` is a root file system)."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from backends.archive import ArchiveRefused, Policy, canonical, link_target, read_archive
from backends.qemu.archive import DamagedArchive
from backends.qemu.archive import read_archive as read_vm_archive
from backends.work import in_thread

REG, DIR, SYM, LNK = tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE


class Rooted(Policy):
    """``root/`` is a root file system; ``keep.txt`` is kept in memory; elsewhere only
    plain files and directories."""

    where = "the test directory"

    def root_of(self, name):
        return "root" if name.startswith("root/") else None

    def is_root(self, name):
        return name == "root"

    def check(self, name, member):
        return None if member.isreg() or member.isdir() or self.root_of(name) else \
            f"'{name}' is not plain"

    def keep(self, name):
        return name == "keep.txt"


def make_tar(path: Path, entries) -> Path:
    """entries: (name, type, data-or-linkname, {attr: value})."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, extra, *attrs in entries:
            info = tarfile.TarInfo(name)
            info.type = kind
            info.mode = 0o755 if kind == DIR else 0o644
            for key, value in (attrs[0] if attrs else {}).items():
                setattr(info, key, value)
            if kind in (SYM, LNK):
                info.linkname = extra
                tar.addfile(info)
            elif kind == REG:
                data = extra.encode()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    return path


async def unpack(tmp_path: Path, entries, policy=None):
    into = tmp_path / "into"
    into.mkdir(mode=0o700, parents=True)
    archive = make_tar(tmp_path / "a.tar", entries)
    return into, await in_thread(read_archive, str(archive), into, policy or Rooted())


def test_canonical_names():
    assert canonical("./a/b/", "x") == "a/b"
    assert canonical("././a", "x") == "a"
    assert canonical("./", "x") == canonical(".", "x") == ""
    for bad in ("a/./b", "a//b", ".//a", "./a/.", "snaps//snap0/config",
                "./snaps/./rootfs/rootfs"):
        with pytest.raises(ArchiveRefused, match="empty or '.' part"):
            canonical(bad, "x")
    for bad in ("/etc/passwd", "a/../../b", "..", "./../a"):
        with pytest.raises(ArchiveRefused, match="leaves x"):
            canonical(bad, "x")


def test_link_targets_are_resolved_inside_their_root():
    assert link_target("rootfs/etc/l", "/usr/bin", "rootfs") == "rootfs/usr/bin"
    assert link_target("rootfs/etc/l", "/../../etc", "rootfs") == "rootfs/etc"
    assert link_target("rootfs/usr/bin/l", "../lib/x", "rootfs") == "rootfs/usr/lib/x"
    assert link_target("rootfs/l", "./a/./b/", "rootfs") == "rootfs/a/b"
    assert link_target("rootfs/etc/l", "../../etc", "rootfs") is None
    assert link_target("snaps/s/rootfs/a/l", "../../x", "snaps/s/rootfs") is None


async def test_duplicates_after_normalisation_are_refused(tmp_path):
    for first, second in [("./a", "a"), ("a", "a/"), ("root/x", "./root/x"),
                          ("keep.txt", "./keep.txt")]:
        with pytest.raises(ArchiveRefused, match="appears twice"):
            await unpack(tmp_path / first.replace("/", "_"),
                         [(first, REG, "one"), (second, REG, "two")])
    # a file where an earlier member's directory is
    with pytest.raises(ArchiveRefused, match="appears twice"):
        await unpack(tmp_path / "p", [("root/d/f", REG, "x"), ("root/d", REG, "y")])


async def test_links_stay_strictly_inside_their_root(tmp_path):
    cases = [
        ([("root/up", SYM, "../x")], "leaves its root file system"),
        ([("root/a", DIR, ""), ("root/a/up", SYM, "../../etc")], "leaves its root"),
        ([("root/e", SYM, "")], "leaves its root"),
        ([("root/etc", SYM, "/etc"), ("root/etc/passwd", REG, "x")],
         "beyond a symbolic link"),
        ([("root/etc", SYM, "/etc"), ("root/h", LNK, "root/etc/shadow")],
         "beyond a symbolic link"),
        ([("root/l", SYM, "/etc/shadow"), ("root/h", LNK, "root/l")], "not an earlier file"),
        ([("plain", REG, "x"), ("root/h", LNK, "plain")], "not an earlier file"),
        ([("root/h", LNK, "/etc/shadow")], "leaves the test directory"),
        ([("root/h", LNK, "root/later")], "not an earlier file"),
        ([("out", SYM, "root")], "not plain"),
    ]
    for i, (entries, why) in enumerate(cases):
        with pytest.raises(ArchiveRefused, match=why):
            await unpack(tmp_path / str(i), entries)
    into, _ = await unpack(tmp_path / "ok", [
        ("root/usr/bin/x", REG, "x", {"mode": 0o755}), ("root/abs", SYM, "/etc"),
        ("root/usr/rel", SYM, "../etc"),
        ("root/usr/bin/h", LNK, "./root/usr/bin/x", {"mode": 0o6777})])
    assert os.readlink(into / "root" / "abs") == "/etc"
    x = (into / "root/usr/bin/x").stat()
    assert (into / "root/usr/bin/h").stat().st_ino == x.st_ino
    assert stat.S_IMODE(x.st_mode) == 0o755  # a hard link entry does not set its file's mode
    with pytest.raises(ArchiveRefused, match="top is not a directory"):
        await unpack(tmp_path / "top", [("./", SYM, "/")])


async def test_modes_and_owners_are_the_archives_only_inside_a_root(tmp_path):
    me = os.geteuid()
    into, kept = await unpack(tmp_path, [
        ("./", DIR, "", {"mode": 0o777, "uid": 4321}),
        ("root", DIR, "", {"mode": 0o750}),
        ("root/suid", REG, "x", {"mode": 0o4755, "uid": 1234, "gid": 5678}),
        ("root/tmp", DIR, "", {"mode": 0o1777}),
        ("outside", DIR, "", {"mode": 0o2777, "uid": 1234}),
        ("outside/suid", REG, "x", {"mode": 0o6777, "uid": 1234}),
        ("keep.txt", REG, "kept"),
    ])
    assert kept == {"keep.txt": b"kept"} and not (into / "keep.txt").exists()
    assert stat.S_IMODE(os.stat(into).st_mode) == 0o700  # the './' entry is not applied
    assert os.stat(into).st_uid == me
    suid = os.stat(into / "root" / "suid")
    assert stat.S_IMODE(suid.st_mode) == 0o4755
    assert stat.S_IMODE(os.stat(into / "root").st_mode) == 0o750
    assert stat.S_IMODE(os.stat(into / "root" / "tmp").st_mode) == 0o1777
    if me == 0:
        assert (suid.st_uid, suid.st_gid) == (1234, 5678)
    for path, mode in (("outside", 0o755), ("outside/suid", 0o644)):
        st = os.stat(into / path)
        assert (stat.S_IMODE(st.st_mode), st.st_uid) == (mode, me), path


async def test_only_capabilities_and_user_attributes_are_kept_inside_a_root(tmp_path):
    headers = {"SCHILY.xattr.user.corral": "kept",
               "SCHILY.xattr.trusted.overlay.redirect": "/etc"}
    cap = bytes.fromhex("0100000200200000000000000000000000000000")  # cap_net_raw+ep
    if os.geteuid() == 0:  # setting a file capability needs root (the LXC suite's case)
        headers["SCHILY.xattr.security.capability"] = cap.decode("utf-8", "surrogateescape")
    into, _ = await unpack(tmp_path, [
        ("root/ping", REG, "x", {"pax_headers": headers, "uid": os.geteuid()}),
        ("outside", REG, "x", {"pax_headers": headers})])
    inside = os.listxattr(into / "root" / "ping")
    assert os.getxattr(into / "root" / "ping", "user.corral") == b"kept"
    assert "trusted.overlay.redirect" not in inside
    if os.geteuid() == 0:
        assert os.getxattr(into / "root" / "ping", "security.capability") == cap
    assert os.listxattr(into / "outside") == []


async def test_damaged_archives_and_non_files_are_refused(tmp_path):
    archive = make_tar(tmp_path / "a.tar", [("root/x", REG, "x" * 5000)])
    (tmp_path / "cut.tar").write_bytes(archive.read_bytes()[:1500])
    into = tmp_path / "into"
    into.mkdir()
    with pytest.raises(ArchiveRefused, match="damaged or not a tar"):
        await in_thread(read_archive, str(tmp_path / "cut.tar"), into, Rooted())
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ArchiveRefused, match="not a regular file"):
        await in_thread(read_archive, str(tmp_path / "fifo"), into, Rooted())


async def test_the_archive_is_opened_once_and_read_as_it_was_checked(tmp_path, monkeypatch):
    """Replacing the archive while it is being read changes nothing: the reader holds the
    one file it opened (tar reading the path again was the old race)."""
    good = make_tar(tmp_path / "good.tar", [("root/a", REG, "a" * (1 << 20)),
                                            ("root/b", REG, "b")])
    evil = make_tar(tmp_path / "evil.tar", [("root/a", REG, "a" * (1 << 20)),
                                            ("root/b", REG, "EVIL")])
    opened = []
    real_open = os.open

    def counting_open(path, *args, **kwargs):
        fd = real_open(path, *args, **kwargs)
        if str(path) == str(good):
            opened.append(path)
            os.replace(evil, good)  # swapped right after the open
        return fd

    monkeypatch.setattr(os, "open", counting_open)
    into = tmp_path / "into"
    into.mkdir()
    await in_thread(read_archive, str(good), into, Rooted())
    assert len(opened) == 1
    assert (into / "root" / "b").read_text() == "b"


async def test_vm_archives_use_the_same_reader(tmp_path):
    into = tmp_path / "vm"
    into.mkdir()

    def allowed(name):
        return name in ("vm.json", "disk0.qcow2")

    for entries, why in [
        ([("../evil", REG, "x")], "unexpected member"),
        ([("sub/vm.json", REG, "x")], "unexpected member"),
        ([("vm.json", REG, "{}"), ("./vm.json", REG, "{}")], "appears twice"),
        ([("disk0.qcow2", SYM, "/etc/passwd")], "not a plain file"),
        ([("vm.json", REG, "x" * ((1 << 20) + 1))], "implausibly large"),
    ]:
        archive = make_tar(tmp_path / "vm.tar", entries)
        with pytest.raises(DamagedArchive, match=why):
            await in_thread(read_vm_archive, str(archive), into, allowed, {"vm.json"})
        for p in into.iterdir():
            p.unlink()
    archive = make_tar(tmp_path / "vm.tar", [("./vm.json", REG, "{}"),
                                             ("disk0.qcow2", REG, "disk")])
    kept = await in_thread(read_vm_archive, str(archive), into, allowed, {"vm.json"})
    assert kept == {"vm.json": b"{}"} and (into / "disk0.qcow2").read_text() == "disk"


async def test_refusals_show_control_characters_as_escapes(tmp_path):
    osc52 = "root/\x1b]52;c;cHduZWQ=\x07"
    with pytest.raises(ArchiveRefused) as refused:
        await unpack(tmp_path, [(osc52, SYM, "../../x")])
    assert "\x1b" not in str(refused.value) and "\x07" not in str(refused.value)
    assert "\\x1b]52;c;cHduZWQ=\\x07" in str(refused.value)
