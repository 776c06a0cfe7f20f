"""Hostile container archives against the real LXC import (private lxcpath, busybox
template, no NIC): every name trick, duplicate configs, the archive's top entry, links
leaving their root file system, hard links outside, device nodes, a config without LXC's
common restrictions, hook keys in a snapshot config, and the archive swapped while it is
read. Each refusal is said in words and leaves nothing on disk."""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import stat
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest

from backends.errors import InvalidInput
from backends.lxc import LXCBackend, lxc_remotes
from backends.lxc.archive import BASELINE
from backends.models import InstanceRef

REG, DIR, SYM, LNK = tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE
CHR, BLK, FIFO = tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE
PWNED = Path("/tmp/corral-archive-pwned")
HOOK = f"lxc.hook.pre-start = /bin/sh -c 'touch {PWNED}'\n"


@pytest.fixture
def backend(lxc_backend, tmp_path, monkeypatch):
    """The LXC backend, with a private temporary directory (checked to stay empty)."""
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    monkeypatch.setenv("TMPDIR", str(private))
    return lxc_backend


def ref(name):
    return InstanceRef("lxc", name)


def add(tar: tarfile.TarFile, name, kind, extra="", attrs=None) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode = kind, 0o755 if kind == DIR else 0o644
    for key, value in (attrs or {}).items():
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


def container_tar(path: Path, src: Path, *, drop=(), extra=(), top=None, attrs=None,
                  each=None) -> Path:
    """The container directory ``src`` as export writes it (``./config``, ``./rootfs``,
    ``./snaps``), without the members named in ``drop``, members named in ``attrs`` with
    those attributes (and each one given to ``each``), a ``./`` entry of ``top``'s
    attributes first and the ``extra`` members (name, type, data or link, attrs) last."""
    def change(info):
        if info.name[2:] in drop:
            return None
        for key, value in (attrs or {}).get(info.name[2:], {}).items():
            setattr(info, key, value)
        if each is not None:
            each(info)
        return info

    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        if top is not None:
            add(tar, "./", DIR, "", top)
        for member in ("config", "rootfs", "snaps"):
            if (src / member).exists():
                tar.add(src / member, arcname=f"./{member}", filter=change)
        for entry in extra:
            add(tar, *entry)
    return path


def left_behind(lxc_path: Path) -> list[str]:
    return sorted(p.name for p in lxc_path.iterdir()) + \
        sorted(f"tmp:{p.name}" for p in Path(tempfile.tempdir).iterdir())


async def source(backend, lxc_path) -> tuple[Path, str, str]:
    """A stopped busybox container ``src`` with one snapshot: (dir, config, snap config)."""
    await backend.create("src")
    await backend.create_snapshot(ref("src"), "s")
    src = lxc_path / "src"
    return src, (src / "config").read_text(), (src / "snaps/snap0/config").read_text()


async def test_the_hostile_corpus_is_refused_in_words_leaving_nothing(backend, lxc_path,
                                                                       tmp_path):
    await backend.create("victim")
    src, cfg, snap_cfg = await source(backend, lxc_path)
    victim = (lxc_path / "victim" / "config").read_text()
    snap = "snaps/snap0/config"
    corpus = {
        # names that read as one thing when checked and another when written
        "dot-in-snapshot-rootfs": ({"extra": [("./snaps/./rootfs", DIR),
                                              ("./snaps/./rootfs/rootfs", SYM, "/")]},
                                   "empty or '.' part"),
        "snapshot-rootfs-is-a-link": ({"extra": [("./snaps/rootfs", DIR),
                                                 ("./snaps/rootfs/config", REG, snap_cfg),
                                                 ("./snaps/rootfs/rootfs", SYM, "/")]},
                                      "is a link"),
        "double-slash-config": ({"extra": [("snaps//snap0/config", REG, snap_cfg + HOOK)]},
                                "empty or '.' part"),
        "dot-config": ({"extra": [("./snaps/snap0/./config", REG, snap_cfg + HOOK)]},
                       "empty or '.' part"),
        "dotdot-name": ({"extra": [("./rootfs/../../escape", REG, "x")]},
                        "leaves the container's directory"),
        "absolute-name": ({"extra": [("/tmp/corral-archive-abs", REG, "x")]},
                          "leaves the container's directory"),
        # the same member twice: the one checked would not be the one written
        "duplicate-snapshot-config": ({"extra": [("snaps/snap0/config", REG,
                                                  snap_cfg + HOOK)]}, "appears twice"),
        "duplicate-config": ({"extra": [("config", REG, cfg + HOOK)]}, "appears twice"),
        "duplicate-rootfs-file": ({"extra": [("rootfs/bin/busybox", REG, "x")]},
                                  "appears twice"),
        # links leaving the root file system they belong to
        "symlink-dotdot": ({"extra": [("./rootfs/up", SYM, "../../../../etc")]},
                           "leaves its root file system rootfs/"),
        "snapshot-symlink-dotdot": ({"extra": [("./snaps/snap0/rootfs/bin/up", SYM,
                                                "../../../rootfs")]},
                                    "leaves its root file system snaps/snap0/rootfs/"),
        "write-through-symlink": ({"extra": [("./rootfs/hostetc", SYM, "/etc"),
                                             ("./rootfs/hostetc/cron.d/x", REG, "boom")]},
                                  "beyond a symbolic link"),
        "hardlink-absolute": ({"extra": [("./rootfs/shadow", LNK, "/etc/shadow")]},
                              "leaves the container's directory"),
        "hardlink-through-symlink": ({"extra": [("./rootfs/hostetc", SYM, "/etc"),
                                                ("./rootfs/stolen", LNK,
                                                 "rootfs/hostetc/shadow")]},
                                     "beyond a symbolic link"),
        "hardlink-to-symlink": ({"extra": [("./rootfs/l", SYM, "/etc/shadow"),
                                           ("./rootfs/h", LNK, "rootfs/l")]},
                                "not an earlier file"),
        "hardlink-across-roots": ({"extra": [("./snaps/snap0/rootfs/x", LNK,
                                              "rootfs/bin/busybox")]},
                                  "not an earlier file of its root file system"),
        "hardlink-to-config": ({"extra": [("./rootfs/c", LNK, "config")]},
                               "not an earlier file"),
        # device nodes
        "block-device": ({"extra": [("./rootfs/dev/sda", BLK, "",
                                     {"devmajor": 8, "devminor": 0})]}, "block device node"),
        "mem-device": ({"extra": [("./rootfs/dev/mem", CHR, "",
                                   {"devmajor": 1, "devminor": 1})]},
                       "character device node .1:1."),
        "device-outside": ({"extra": [("./snaps/dev", CHR, "",
                                       {"devmajor": 1, "devminor": 3})]},
                           "device or special file outside"),
        # snapshot configs pass the same allow-list
        "snapshot-hook": ({"drop": [snap], "extra": [(
            f"./{snap}", REG, snap_cfg + "lxc.hook.start-host = /bin/true\n")]},
            "snaps/snap0/config has settings .*lxc[.]hook[.]start-host"),
        "snapshot-include": ({"drop": [snap], "extra": [(
            f"./{snap}", REG, snap_cfg + "lxc.include = /tmp/evil.conf\n")]},
            "snaps/snap0/config has settings .*lxc[.]include"),
        "snapshot-seccomp-off": ({"drop": [snap], "extra": [(
            f"./{snap}", REG, snap_cfg + "lxc.seccomp.profile = /dev/null\n")]},
            "snaps/snap0/config has settings .*lxc[.]seccomp"),
        # what a snapshot directory holds
        "snapshot-without-config": ({"extra": [("./snaps/snap1", DIR),
                                               ("./snaps/snap1/rootfs", DIR)]},
                                    "snapshot 'snap1' has no config"),
        "foreign-in-snapshot": ({"extra": [("./snaps/snap0/hooks", DIR),
                                           ("./snaps/snap0/hooks/x", REG, "x")]},
                                "not part of a container"),
        "top-is-a-link": ({"top": None, "extra": [("./", SYM, "/")]},
                          "top is not a directory|appears twice"),
    }
    before = left_behind(lxc_path)
    for name, (how, why) in corpus.items():
        archive = container_tar(tmp_path / f"{name}.tar", src, **how)
        with pytest.raises(InvalidInput, match=why):
            await backend.import_instance(str(archive), "imp")
        assert left_behind(lxc_path) == before, name
        assert (lxc_path / "victim" / "config").read_text() == victim, name
    assert not PWNED.exists()
    assert not Path("/tmp/corral-archive-abs").exists()
    assert not (lxc_path.parent / "escape").exists()


async def test_the_archive_does_not_set_what_corral_owns(backend, lxc_path, tmp_path):
    """The ``./`` entry, the snapshot directories and their files get corral's owner and
    modes; inside the root file system owners, setuid bits, inner links, FIFOs and the
    devices a container may use are kept; the container starts."""
    src, _, _ = await source(backend, lxc_path)
    foreign = {"uid": 1234, "gid": 1234}
    archive = container_tar(tmp_path / "a.tar", src, top={"mode": 0o777, **foreign}, attrs={
        "snaps": {"mode": 0o777, **foreign}, "snaps/snap0/ts": {"mode": 0o6777, **foreign},
    }, extra=[
        ("./rootfs/suid", REG, "x", {"mode": 0o4755, **foreign}),
        ("./rootfs/etc-link", SYM, "/etc"),
        ("./rootfs/usr/rel", SYM, "../etc"),
        ("./rootfs/bin/hard", LNK, "./rootfs/bin/busybox"),
        ("./rootfs/fifo", FIFO, ""),
        ("./rootfs/null2", CHR, "", {"devmajor": 1, "devminor": 3}),
    ])
    await backend.import_instance(str(archive), "imp")
    top = lxc_path / "imp"
    me = (os.geteuid(), os.getegid())
    for path, mode in [(top, 0o770), (top / "snaps", 0o755), (top / "snaps/snap0/ts", 0o644)]:
        st = os.lstat(path)
        assert (stat.S_IMODE(st.st_mode), (st.st_uid, st.st_gid)) == (mode, me), path
    st = os.lstat(top / "rootfs" / "suid")
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o4755, 1234, 1234)
    assert os.readlink(top / "rootfs" / "etc-link") == "/etc"
    assert os.readlink(top / "rootfs" / "usr" / "rel") == "../etc"
    assert os.lstat(top / "rootfs/bin/hard").st_ino == os.lstat(top / "rootfs/bin/busybox").st_ino
    assert stat.S_ISFIFO(os.lstat(top / "rootfs" / "fifo").st_mode)
    assert os.lstat(top / "rootfs" / "null2").st_rdev == os.makedev(1, 3)
    await backend.start(ref("imp"))
    await backend.stop(ref("imp"), force=True)


@pytest.fixture
async def open_lxcpath():
    """A private lxcpath whose parents every user may traverse (an unprivileged
    container's root must reach its rootfs; pytest's own directories are 0700)."""
    path = Path(tempfile.mkdtemp(prefix="corral-unpriv-", dir="/tmp"))
    os.chmod(path, 0o755)
    b = LXCBackend(lxc_remotes([str(path)])[0], timeout=10)
    await b.connect()
    yield b, path
    await b.close()
    for entry in path.iterdir():
        lxc(path, "lxc-stop", "-n", entry.name, "-k")
        lxc(path, "lxc-destroy", "-n", entry.name, "-s")
    shutil.rmtree(path, ignore_errors=True)


async def test_an_id_mapped_container_gets_its_roots_group_and_starts(open_lxcpath,
                                                                     tmp_path):
    """An unprivileged container's directory: root's, readable by the group its root is
    mapped to (0750), whatever the archive's ``./`` says; it starts."""
    backend, lxc_path = open_lxcpath
    src, cfg, _ = await source(backend, lxc_path)
    idmap = "lxc.idmap = u 0 100000 65536\nlxc.idmap = g 0 100000 65536\n"

    def shift(info):
        if info.name.startswith(("./rootfs", "./snaps/snap0/rootfs")):
            info.uid, info.gid = info.uid + 100000, info.gid + 100000

    archive = container_tar(tmp_path / "u.tar", src, drop=["config"], each=shift,
                            top={"mode": 0o777, "uid": 100000, "gid": 100000},
                            extra=[("./config", REG, cfg + idmap)])
    await backend.import_instance(str(archive), "unpriv")
    st = os.lstat(lxc_path / "unpriv")
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o750, os.geteuid(), 100000)
    assert os.lstat(lxc_path / "unpriv" / "rootfs").st_uid == 100000
    await backend.start(ref("unpriv"))
    await backend.stop(ref("unpriv"), force=True)


def lxc(lxc_path: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([argv[0], "-P", str(lxc_path), *argv[1:]], capture_output=True,
                          text=True, timeout=60)


async def test_a_config_without_lxcs_common_include_gets_corrals_baseline(backend, lxc_path,
                                                                          tmp_path):
    """LXC's busybox template writes no ``lxc.include`` of common.conf: imported, the
    container runs with LXC's common capability drops, device cgroup and seccomp filter
    (not with every capability, every device and no filter)."""
    await source(backend, lxc_path)
    plain = tmp_path / "plain.tar"
    await backend.export_instance(ref("src"), str(plain))
    await backend.import_instance(str(plain), "base")
    for config in (lxc_path / "base/config", lxc_path / "base/snaps/snap0/config"):
        lines = {" ".join(line.split()) for line in config.read_text().splitlines()}
        assert set(BASELINE) <= lines, config
    await backend.start(ref("base"))
    try:
        pid = lxc(lxc_path, "lxc-info", "-n", "base", "-p", "-H").stdout.strip()
        status = Path(f"/proc/{pid}/status").read_text()
        assert "Seccomp:\t2" in status
        caps = int(status.split("CapBnd:\t")[1].split()[0], 16)
        assert not caps & (1 << 17)  # CAP_SYS_RAWIO dropped
        kmsg = await asyncio.to_thread(lxc, lxc_path, "lxc-attach", "-n", "base", "--",
                                       "/bin/sh", "-c",
                                       "mknod /dev/k c 1 11 && head -c1 /dev/k")
        assert "Operation not permitted" in kmsg.stderr  # the device cgroup
    finally:
        await backend.stop(ref("base"), force=True)
    # exported again and imported: the baseline is there once, not twice
    again = tmp_path / "again.tar"
    await backend.export_instance(ref("base"), str(again))
    await backend.import_instance(str(again), "base2")
    text = (lxc_path / "base2" / "config").read_text()
    assert text.count("lxc.seccomp.profile") == 1
    # a config that includes the common settings is kept as it is
    src = lxc_path / "src"
    cfg = (src / "config").read_text() + "lxc.include = /usr/share/lxc/config/common.conf\n"
    archive = container_tar(tmp_path / "inc.tar", src, drop=["config"],
                            extra=[("./config", REG, cfg)])
    await backend.import_instance(str(archive), "inc")
    assert "lxc.seccomp.profile" not in (lxc_path / "inc" / "config").read_text()


async def test_the_archive_swapped_while_it_is_read_changes_nothing(backend, lxc_path,
                                                                    tmp_path):
    """The archive checked is the archive unpacked: replacing the file once the import
    has begun (a second reader, such as ``tar -xpf`` after the check, would read the
    new one) leaves the import as it was checked."""
    src, _, snap_cfg = await source(backend, lxc_path)
    archive = container_tar(tmp_path / "a.tar", src)
    evil = container_tar(tmp_path / "evil.tar", src, drop=["snaps/snap0/config"],
                         extra=[("./snaps/snap0/config", REG, snap_cfg + HOOK)])
    swapped = []

    def progress(text):
        if not swapped and text.startswith("unpacking"):
            os.replace(evil, archive)
            swapped.append(text)

    await backend.import_instance(str(archive), "imp", progress=progress)
    assert swapped
    assert "lxc.hook" not in (lxc_path / "imp/snaps/snap0/config").read_text()
    assert "lxc.hook" not in (lxc_path / "imp/config").read_text()


async def test_settings_that_undo_the_baseline_or_map_onto_host_ids_are_refused(
        backend, lxc_path, tmp_path):
    """One step aside from the allow-list: ``userns.conf`` clears the capability drops
    and the device cgroup (refused without a map of the container's root), an id map onto
    host root or a local user's ids would hand that user the container's directory and
    its setuid files, and a ``<dist>.common.conf`` that does not include LXC's common.conf
    (``oci.common.conf`` holds only comments) does not stand in for the baseline."""
    src, cfg, _ = await source(backend, lxc_path)
    common = "lxc.include = /usr/share/lxc/config/common.conf\n"
    userns = "lxc.include = /usr/share/lxc/config/userns.conf\n"
    corpus = {
        "userns-privileged": (cfg + common + userns, "lxc[.]include = .*userns[.]conf"),
        "idmap-onto-root": (cfg + "lxc.idmap = u 0 0 65536\nlxc.idmap = g 0 0 65536\n",
                            "lxc[.]idmap = u 0 0 65536"),
        "idmap-onto-a-user": (cfg + "lxc.idmap = u 0 100000 65536\n"
                              "lxc.idmap = g 0 1000 1\n", "lxc[.]idmap = g 0 1000 1"),
        "idmap-garbage": (cfg + "lxc.idmap = u 0 100000\n", "lxc[.]idmap = u 0 100000"),
        "cgroup-rw": (cfg + "lxc.mount.auto = proc:mixed cgroup\n",
                      "lxc[.]mount[.]auto = proc:mixed cgroup"),
    }
    before = left_behind(lxc_path)
    for name, (config, why) in corpus.items():
        archive = container_tar(tmp_path / f"{name}.tar", src, drop=["config"],
                                extra=[("./config", REG, config)])
        with pytest.raises(InvalidInput, match=why):
            await backend.import_instance(str(archive), "imp")
        assert left_behind(lxc_path) == before, name
    oci = cfg + "lxc.include = /usr/share/lxc/config/oci.common.conf\n"
    archive = container_tar(tmp_path / "oci.tar", src, drop=["config"],
                            extra=[("./config", REG, oci)])
    await backend.import_instance(str(archive), "oci")
    lines = {" ".join(line.split())
             for line in (lxc_path / "oci" / "config").read_text().splitlines()}
    assert set(BASELINE) <= lines


async def test_paths_in_a_config_are_written_as_they_were_checked(backend, lxc_path,
                                                                  tmp_path):
    """A check and a use that read different things: the archive says its container
    lived in ``/usr/share/lxc/config``, and rewriting the paths that named that old
    directory moved the common include and the baseline's seccomp policy into the new
    container's directory, where no such files are. Only ``lxc.rootfs.path`` and
    ``lxc.uts.name`` change; what was checked is what is written."""
    src, cfg, _ = await source(backend, lxc_path)
    old = "lxc.rootfs.path = dir:/usr/share/lxc/config/rootfs\n"
    moved = "".join(line + "\n" for line in cfg.splitlines()
                    if not line.startswith("lxc.rootfs.path")) + old
    for name, config in (("plain", moved),
                         ("inc", moved + "lxc.include = /usr/share/lxc/config/common.conf\n")):
        archive = container_tar(tmp_path / f"{name}.tar", src, drop=["config"],
                                extra=[("./config", REG, config)])
        await backend.import_instance(str(archive), name)
        lines = {" ".join(line.split())
                 for line in (lxc_path / name / "config").read_text().splitlines()}
        assert f"lxc.rootfs.path = dir:{lxc_path / name / 'rootfs'}" in lines
        if name == "plain":
            assert set(BASELINE) <= lines
        else:
            assert "lxc.include = /usr/share/lxc/config/common.conf" in lines
        assert not any(str(lxc_path / name) in line for line in lines
                       if not line.startswith("lxc.rootfs.path")), lines
