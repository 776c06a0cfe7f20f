"""Hostile LXD-style image tarballs (``metadata.yaml``, ``templates/``, ``rootfs/``)
against the real LXC create path (private lxcpath, no NIC): every name trick, duplicates,
links leaving the root file system or standing where a directory belongs, device nodes,
foreign members. Each is refused in words and leaves nothing on disk; links that point
at the host from inside a legitimate tree are never followed on the host; a legitimate
image with templates, links, a FIFO, a device and setuid files makes a container that
starts."""

from __future__ import annotations

import io
import os
import shutil
import stat
import tarfile
import tempfile
from pathlib import Path

import pytest

from backends.errors import InvalidInput
from backends.models import InstanceRef, InstanceStatus
from backends.create_models import CreateRequest, CreateSource

REG, DIR, SYM, LNK = tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE
CHR, BLK, FIFO = tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE
ESCAPE = Path("/tmp/corral-image-abs")


@pytest.fixture
def backend(lxc_backend, tmp_path, monkeypatch):
    """The LXC backend, with a private temporary directory (checked to stay empty)."""
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    monkeypatch.setenv("TMPDIR", str(private))
    return lxc_backend


@pytest.fixture
def tree(tmp_path) -> Path:
    """A busybox unified image's tree (``metadata.yaml``, ``rootfs/``), as the lab builds it."""
    import lab as labmod  # tests/ is on sys.path (conftest)

    work = tmp_path / "img"
    labmod.build_busybox_image(work)
    return work


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


def image_tar(path: Path, tree: Path, *, drop=(), extra=(), top=None) -> Path:
    """The unified image of ``tree`` (``metadata.yaml`` then ``rootfs/``, gzip), without
    the top members named in ``drop``, a ``./`` entry of ``top``'s attributes first and
    the ``extra`` members (name, type, data or link, attrs) last."""
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        if top is not None:
            add(tar, "./", DIR, "", top)
        for member in ("metadata.yaml", "rootfs"):
            if member not in drop:
                tar.add(tree / member, arcname=member)
        for entry in extra:
            add(tar, *entry)
    return path


def source(path: Path) -> CreateSource:
    return CreateSource("tarball", "LXD-style image tarball", value=str(path))


def left_behind(lxc_path: Path) -> list[str]:
    return sorted(p.name for p in lxc_path.iterdir()) + \
        sorted(f"tmp:{p.name}" for p in Path(tempfile.tempdir).iterdir())


async def test_hostile_images_are_refused_in_words_leaving_nothing(backend, lxc_path,
                                                                   tree, tmp_path):
    corpus = {
        # names that read as one thing when checked and another when written
        "dotdot-name": ({"extra": [("rootfs/../../escape", REG, "x")]}, "leaves the image"),
        "dotdot-top": ({"extra": [("../escape", REG, "x")]}, "leaves the image"),
        "absolute-name": ({"extra": [(str(ESCAPE), REG, "x")]}, "leaves the image"),
        "dot-inside": ({"extra": [("./rootfs/./etc/passwd", REG, "evil::0:0::/:/bin/sh")]},
                       "empty or '.' part"),
        "double-slash": ({"extra": [("rootfs//etc/shadow", REG, "root::0:::::")]},
                         "empty or '.' part"),
        "duplicate-file": ({"extra": [("rootfs/etc/passwd", REG, "evil::0:0::/:/bin/sh")]},
                           "appears twice"),
        "duplicate-dot-slash": ({"extra": [("./rootfs/bin/busybox", REG, "x")]},
                                "appears twice"),
        "duplicate-metadata": ({"extra": [("./metadata.yaml", REG, "architecture: x")]},
                               "appears twice"),
        # links leaving their root file system, or written through
        "symlink-dotdot": ({"extra": [("rootfs/up", SYM, "../../../../etc")]},
                           "leaves its root file system rootfs/"),
        "write-through-symlink": ({"extra": [("rootfs/hostetc", SYM, "/etc"),
                                             ("rootfs/hostetc/cron.d/x", REG, "boom")]},
                                  "beyond a symbolic link"),
        "hardlink-absolute": ({"extra": [("rootfs/shadow", LNK, "/etc/shadow")]},
                              "leaves the image"),
        "hardlink-dotdot": ({"extra": [("rootfs/shadow", LNK, "../../../etc/shadow")]},
                            "leaves the image"),
        "hardlink-to-symlink": ({"extra": [("rootfs/l", SYM, "/etc/shadow"),
                                           ("rootfs/h", LNK, "rootfs/l")]},
                                "not an earlier file"),
        "hardlink-to-metadata": ({"extra": [("rootfs/m", LNK, "metadata.yaml")]},
                                 "not an earlier file"),
        "hardlink-to-template": ({"extra": [("templates", DIR),
                                            ("templates/t.tpl", REG, "x"),
                                            ("rootfs/t", LNK, "templates/t.tpl")]},
                                 "not an earlier file of its root file system"),
        # the root file system itself a link (to the host's /)
        "rootfs-is-a-link": ({"drop": ["rootfs"], "extra": [
            ("rootfs", SYM, "/"), ("rootfs/etc/cron.d/x", REG, "boom")]}, "'rootfs' is a link"),
        "rootfs-is-a-file": ({"drop": ["rootfs"], "extra": [("rootfs", REG, "x")]},
                             "'rootfs' is a file"),
        "rootfs-only-dotted": ({"drop": ["rootfs"], "extra": [
            ("./rootfs/.", DIR), ("rootfs/./bin/sh", REG, "x")]}, "empty or '.' part"),
        # device nodes
        "block-device": ({"extra": [("rootfs/dev/sda", BLK, "",
                                     {"devmajor": 8, "devminor": 0})]}, "block device node"),
        "mem-device": ({"extra": [("rootfs/dev/mem", CHR, "",
                                   {"devmajor": 1, "devminor": 1})]},
                       "character device node .1:1."),
        "device-in-templates": ({"extra": [("templates", DIR),
                                           ("templates/null", CHR, "",
                                            {"devmajor": 1, "devminor": 3})]},
                                "outside the root file system"),
        # what lies outside rootfs/
        "metadata-is-a-link": ({"drop": ["metadata.yaml"], "extra": [
            ("metadata.yaml", SYM, "/etc/shadow")]}, "'metadata.yaml' is not a plain file"),
        "template-is-a-link": ({"extra": [("templates", DIR),
                                          ("templates/hostname.tpl", SYM, "/etc/shadow")]},
                               "is a link"),
        "templates-is-a-link": ({"extra": [("templates", SYM, "/etc")]}, "is a link"),
        "foreign-member": ({"extra": [("hooks", DIR), ("hooks/pre-start", REG, "x")]},
                           "not part of an LXD-style image"),
        "no-metadata": ({"drop": ["metadata.yaml"]}, "no metadata.yaml"),
        "no-rootfs": ({"drop": ["rootfs"]}, "no metadata.yaml and rootfs/"),
    }
    victim = Path("/etc/passwd").read_bytes()
    before = left_behind(lxc_path)
    assert before == []
    for name, (how, why) in corpus.items():
        image = image_tar(tmp_path / f"{name}.tar.gz", tree, **how)
        with pytest.raises(InvalidInput, match=why):
            await backend.create_instance(CreateRequest("img", source(image)))
        assert left_behind(lxc_path) == before, name
    damaged = tmp_path / "damaged.tar.gz"
    damaged.write_bytes(b"\x1f\x8b" + os.urandom(4096))
    with pytest.raises(InvalidInput, match="not an LXD-style image tarball: it is damaged"):
        await backend.create_instance(CreateRequest("img", source(damaged)))
    assert left_behind(lxc_path) == before
    assert not ESCAPE.exists()
    assert not (lxc_path.parent / "escape").exists()
    assert Path("/etc/passwd").read_bytes() == victim


async def test_links_to_the_host_inside_a_tree_are_not_followed_on_the_host(
        backend, lxc_path, tree, tmp_path):
    """A root file system whose ``etc`` and ``dev`` are absolute links (legitimate inside
    the container, where they resolve from its own root) is placed as it is: nothing on
    the host is written through them (LXC's ``local`` template edits
    ``rootfs/etc/init/tty.conf`` and makes ``rootfs/dev/pts`` through whatever the tree
    holds)."""
    host = Path(tempfile.mkdtemp(prefix="corral-host-", dir="/tmp"))
    try:
        (host / "etc" / "init").mkdir(parents=True)
        tty = host / "etc" / "init" / "tty.conf"
        tty.write_text("exec /sbin/mingetty tty1\n")
        (host / "dev").mkdir()
        for name in ("etc", "dev"):  # the tree's etc and dev: absolute links to the host's
            shutil.rmtree(tree / "rootfs" / name)
            (tree / "rootfs" / name).symlink_to(host / name)
        image = image_tar(tmp_path / "links.tar.gz", tree)
        inst = await backend.create_instance(CreateRequest("links", source(image)))
        assert inst.status is InstanceStatus.STOPPED
        rootfs = lxc_path / "links" / "rootfs"
        assert os.readlink(rootfs / "etc") == str(host / "etc")
        assert os.readlink(rootfs / "dev") == str(host / "dev")
        assert tty.read_text() == "exec /sbin/mingetty tty1\n"
        assert list((host / "dev").iterdir()) == []
        assert sorted(p.name for p in lxc_path.iterdir()) == ["links"]
        assert list(Path(tempfile.tempdir).iterdir()) == []
    finally:
        shutil.rmtree(host, ignore_errors=True)


async def test_a_legitimate_image_makes_a_container_that_starts(backend, lxc_path, tree,
                                                                tmp_path):
    """Templates, a ``./`` entry, absolute and relative links, a hard link, a FIFO, a
    device a container may use and a setuid file with a foreign owner: the container's
    root file system holds them as the image says; the image's own files
    (``metadata.yaml``, ``templates/``) are not placed; the container starts."""
    foreign = {"uid": 1234, "gid": 1234}
    image = image_tar(tmp_path / "ok.tar.gz", tree, top={"mode": 0o777, **foreign}, extra=[
        ("templates", DIR), ("templates/hostname.tpl", REG, "{{ container.name }}\n"),
        ("rootfs/suid", REG, "x", {"mode": 0o4755, **foreign}),
        ("rootfs/etc-link", SYM, "/etc"),
        ("rootfs/root/rel", SYM, "../etc/passwd"),
        ("rootfs/bin/hard", LNK, "rootfs/bin/busybox"),
        ("rootfs/fifo", FIFO, ""),
        ("rootfs/dev/null", CHR, "", {"devmajor": 1, "devminor": 3}),
    ])
    said = []
    inst = await backend.create_instance(CreateRequest("ok", source(image), start=True),
                                         progress=said.append)
    try:
        assert inst.status is InstanceStatus.RUNNING
        assert said[0] == "unpacking image…"
        top = lxc_path / "ok"
        assert sorted(p.name for p in top.iterdir() if not p.name.endswith(".log")) == \
            ["config", "rootfs"]
        st = os.lstat(top)
        assert (stat.S_IMODE(st.st_mode), st.st_uid) == (0o770, os.geteuid())
        rootfs = top / "rootfs"
        st = os.lstat(rootfs / "suid")
        assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o4755, 1234, 1234)
        assert os.readlink(rootfs / "etc-link") == "/etc"
        assert os.readlink(rootfs / "root" / "rel") == "../etc/passwd"
        assert os.lstat(rootfs / "bin/hard").st_ino == os.lstat(rootfs / "bin/busybox").st_ino
        assert stat.S_ISFIFO(os.lstat(rootfs / "fifo").st_mode)
        assert os.lstat(rootfs / "dev" / "null").st_rdev == os.makedev(1, 3)
        config = (top / "config").read_text()
        assert "lxc.include = /usr/share/lxc/config/common.conf" in config
        assert f"lxc.rootfs.path = dir:{rootfs}" in config
        assert "lxc.uts.name = ok" in config and "lxc.net.0.type = empty" in config
        assert sorted(p.name for p in lxc_path.iterdir()) == ["ok"]
        assert list(Path(tempfile.tempdir).iterdir()) == []
        code, out, _ = await backend.lxc.run("lxc-attach", "-n", "ok", "--", "/bin/cat",
                                             "/etc/hostname")
        assert (code, out) == (0, "busybox\n")
    finally:
        await backend.stop(InstanceRef("lxc", "ok"), force=True)


def local_tarballs(tmp_path: Path, host: Path) -> list[str]:
    """The ``-m``/``-f`` tarballs of LXC's ``local`` template: a meta tarball (a config)
    and a root file system whose ``etc`` is an absolute link to ``host``'s."""
    meta, rootfs = tmp_path / "meta.tar.xz", tmp_path / "rootfs.tar.xz"
    with tarfile.open(meta, "w:xz") as tar:
        add(tar, "config", REG, "lxc.include = /usr/share/lxc/config/common.conf\n"
                                f"lxc.arch = {os.uname().machine}\n")
    with tarfile.open(rootfs, "w:xz") as tar:
        add(tar, "bin", DIR)
        add(tar, "etc", SYM, str(host / "etc"))
    return ["-m", str(meta), "-f", str(rootfs)]


async def test_templates_that_unpack_outside_input_are_refused(backend, lxc_path, tmp_path):
    """LXC's ``local`` template unpacks its tarballs itself, not through corral's archive
    reader, then edits the tree on the host (``sed -i`` on ``rootfs/etc/init/tty.conf``)
    through the tree's own links: it rewrote the host file an ``etc`` link led to. Only
    the templates corral runs run, with only the options it passes: ``local``, ``oci``, a
    download server of one's choice and LXC's internal options are refused in words,
    through both entries, before anything is made."""
    host = Path(tempfile.mkdtemp(prefix="corral-host-", dir="/tmp"))
    try:
        (host / "etc" / "init").mkdir(parents=True)
        tty = host / "etc" / "init" / "tty.conf"
        tty.write_text("exec /sbin/mingetty tty1\n")
        local = local_tarballs(tmp_path, host)
        with pytest.raises(InvalidInput, match="does not run LXC's 'local' template: it "
                                               "unpacks the tarballs"):
            await backend.create("loc", template="local", template_args=local)
        assert left_behind(lxc_path) == []
        refused = [
            ("local", " ".join(local), "does not run LXC's 'local' template"),
            ("oci", "--url oci:/nowhere:latest", "does not run LXC's 'oci' template"),
            ("download", "-d debian -r bookworm -a amd64 --server example.invalid",
             "does not pass '--server' to the download template"),
            ("download", "-d debian --no-validate", "does not pass '--no-validate'"),
            ("busybox", f"--rootfs {host}", "does not pass '--rootfs' to the busybox"),
            ("busybox", "--busybox-path", "--busybox-path needs a value"),
        ]
        for template, args, why in refused:
            request = CreateRequest("loc", CreateSource("template", template, value=template),
                                    options={"template_args": args})
            with pytest.raises(InvalidInput, match=why):
                await backend.create_instance(request)
            assert left_behind(lxc_path) == [], template
        assert tty.read_text() == "exec /sbin/mingetty tty1\n"
        assert sorted(p.name for p in host.iterdir()) == ["etc"]
        sources = await backend.create_sources()
        assert {s.value for s in sources if s.kind == "template"} <= {"busybox", "download"}
    finally:
        shutil.rmtree(host, ignore_errors=True)
