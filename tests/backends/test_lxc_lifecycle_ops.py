"""Clone, rename, description, export and import of LXC containers, with the real lxc-*
tools in a private lxcpath (busybox template, no NIC), checked with lxc-ls, lxc-info,
lxc-snapshot and by starting the results."""

from __future__ import annotations

import asyncio
import os
import tarfile
from pathlib import Path

import pytest
from backend_checks import lxc, state

from backends.errors import Conflict, InvalidInput, Unsupported
from backends.models import InstanceRef, InstanceStatus


@pytest.fixture
def backend(lxc_backend):
    return lxc_backend


def names(path):
    return sorted(lxc(path, "lxc-ls", "-1").stdout.split())


def config(path, name, key):
    values = [line.partition("=")[2].strip()
              for line in (path / name / "config").read_text().splitlines()
              if line.partition("=")[0].strip() == key]
    return values[-1] if values else None


def snapshots(path, name):
    return [line.split()[0] for line in lxc(path, "lxc-snapshot", "-n", name, "-L").stdout
            .splitlines() if line.strip() and not line.startswith("No snapshots")]


def ref(name):
    return InstanceRef("lxc", name)


async def starts(backend, path, name):
    await backend.start(ref(name))
    try:
        assert state(path, name) == "RUNNING"
        hostname = lxc(path, "lxc-attach", "-n", name, "--", "/bin/hostname").stdout.strip()
        assert hostname == name
    finally:
        await backend.stop(ref(name), force=True)
    assert state(path, name) == "STOPPED"


async def test_full_and_linked_clones(backend, lxc_path):
    await backend.create("c1")
    await backend.set_description(ref("c1"), 'first "one"\nline two')
    await backend.create_snapshot(ref("c1"), "before")
    (lxc_path / "c1" / "rootfs" / "marker").write_text("c1\n")

    await backend.start(ref("c1"))
    with pytest.raises(Conflict, match="stop it first"):
        await backend.clone_instance(ref("c1"), "nope")
    await backend.stop(ref("c1"), force=True)

    said: list[str] = []
    full = await backend.clone_instance(ref("c1"), "full", progress=said.append)
    assert full.status is InstanceStatus.STOPPED and said[-1] == "cloned"
    assert full.description == 'first "one"\nline two'
    assert config(lxc_path, "full", "lxc.rootfs.path") == f"dir:{lxc_path}/full/rootfs"
    assert snapshots(lxc_path, "full") == ["snap0"]
    assert config(lxc_path / "full" / "snaps", "snap0", "lxc.rootfs.path") == \
        f"dir:{lxc_path}/full/snaps/snap0/rootfs"
    assert (lxc_path / "full" / "rootfs" / "marker").read_text() == "c1\n"
    flat = await backend.clone_instance(ref("c1"), "flat", with_snapshots=False)
    assert snapshots(lxc_path, "flat") == [] and flat.snapshot_count == 0
    with pytest.raises(Conflict, match="already exists"):
        await backend.clone_instance(ref("c1"), "full")

    lnk = await backend.clone_instance(ref("c1"), "lnk", linked=True)
    rootfs = config(lxc_path, "lnk", "lxc.rootfs.path")
    assert rootfs.startswith(f"overlay:{lxc_path}/c1/rootfs:"), rootfs
    assert lnk.snapshot_count == 0
    assert names(lxc_path) == ["c1", "flat", "full", "lnk"]
    await starts(backend, lxc_path, "full")
    await starts(backend, lxc_path, "lnk")
    (lxc_path / "lnk" / "overlay" / "delta" / "only-lnk").write_text("x")  # the clone's own
    assert not (lxc_path / "c1" / "rootfs" / "only-lnk").exists()

    # the source of a linked clone: LXC tracks it, corral says so
    with pytest.raises(Conflict, match="linked clone.*lnk"):
        await backend.delete(ref("c1"), force=True)
    with pytest.raises(Conflict, match="lnk"):
        await backend.rename_instance(ref("c1"), "c9")
    with pytest.raises(Unsupported, match="overlay"):
        await backend.rename_instance(ref("lnk"), "lnk2")
    # a full clone of the linked clone is a plain directory with both layers
    solo = await backend.clone_instance(ref("lnk"), "solo")
    assert config(lxc_path, "solo", "lxc.rootfs.path") == f"dir:{lxc_path}/solo/rootfs"
    assert (lxc_path / "solo" / "rootfs" / "only-lnk").exists()
    assert solo.status is InstanceStatus.STOPPED
    await starts(backend, lxc_path, "solo")

    await backend.delete(ref("lnk"))
    await backend.delete(ref("c1"))
    assert names(lxc_path) == ["flat", "full", "solo"]


async def test_rename_with_snapshots(backend, lxc_path):
    await backend.create("r1")
    await backend.set_description(ref("r1"), "kept")
    await backend.create_snapshot(ref("r1"), "s")
    await backend.create("taken")
    await backend.start(ref("r1"))
    with pytest.raises(Conflict, match="stop it first"):
        await backend.rename_instance(ref("r1"), "r2")
    await backend.stop(ref("r1"), force=True)
    with pytest.raises(Conflict, match="already exists"):
        await backend.rename_instance(ref("r1"), "taken")
    with pytest.raises(InvalidInput, match="not a valid container name"):
        await backend.rename_instance(ref("r1"), "bad name")

    inst = await backend.rename_instance(ref("r1"), "r2")
    assert inst.name == "r2" and inst.description == "kept" and inst.snapshot_count == 1
    assert names(lxc_path) == ["r2", "taken"] and not (lxc_path / "r1").exists()
    assert not list(lxc_path.glob(".corral-*"))
    assert config(lxc_path, "r2", "lxc.uts.name") == "r2"
    assert config(lxc_path, "r2", "lxc.rootfs.path") == f"dir:{lxc_path}/r2/rootfs"
    assert snapshots(lxc_path, "r2") == ["snap0"]
    snap_cfg = lxc_path / "r2" / "snaps"
    assert config(snap_cfg, "snap0", "lxc.rootfs.path") == \
        f"dir:{lxc_path}/r2/snaps/snap0/rootfs"
    assert state(lxc_path, "r2") == "STOPPED"
    await starts(backend, lxc_path, "r2")
    # the snapshot still restores, under the new name
    (lxc_path / "r2" / "rootfs" / "after").write_text("x")
    await backend.restore_snapshot((await backend.list_snapshots(ref("r2")))[0])
    assert not (lxc_path / "r2" / "rootfs" / "after").exists()
    await starts(backend, lxc_path, "r2")


async def test_export_import_round_trip(backend, lxc_path, tmp_path):
    await backend.create("e1")
    await backend.set_description(ref("e1"), "exported")
    owned = lxc_path / "e1" / "rootfs" / "owned"
    owned.write_text("data\n")
    os.chown(owned, 1234, 5678)
    os.chmod(owned, 0o4750)
    await backend.create_snapshot(ref("e1"), "snap")

    await backend.start(ref("e1"))
    with pytest.raises(Conflict, match="stop it first"):
        await backend.export_instance(ref("e1"), str(tmp_path / "run.tar"))
    await backend.stop(ref("e1"), force=True)

    archive = tmp_path / "e1.tar.gz"
    said: list[str] = []
    size = await backend.export_instance(ref("e1"), str(archive), progress=said.append)
    assert size == archive.stat().st_size and said[-1] == "exported"
    assert not Path(str(archive) + ".part").exists()
    with tarfile.open(archive) as tar:
        members = tar.getnames()
        info = tar.getmember("./rootfs/owned")
    assert "./config" in members and "./snaps/snap0/config" in members
    assert (info.uid, info.gid, info.mode) == (1234, 5678, 0o4750)
    with pytest.raises(InvalidInput, match="exists already"):
        await backend.export_instance(ref("e1"), str(archive))

    inst = await backend.import_instance(str(archive), "e2")
    assert inst.status is InstanceStatus.STOPPED and inst.description == "exported"
    assert names(lxc_path) == ["e1", "e2"]
    st = os.stat(lxc_path / "e2" / "rootfs" / "owned")
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (1234, 5678, 0o4750)
    assert config(lxc_path, "e2", "lxc.rootfs.path") == f"dir:{lxc_path}/e2/rootfs"
    assert config(lxc_path, "e2", "lxc.uts.name") == "e2"
    assert snapshots(lxc_path, "e2") == ["snap0"]
    assert config(lxc_path / "e2" / "snaps", "snap0", "lxc.rootfs.path") == \
        f"dir:{lxc_path}/e2/snaps/snap0/rootfs"
    assert "/e1/" not in (lxc_path / "e2" / "config").read_text()
    await starts(backend, lxc_path, "e2")
    await starts(backend, lxc_path, "e1")  # the original is untouched

    with pytest.raises(Conflict, match="already exists"):
        await backend.import_instance(str(archive), "e2")
    with pytest.raises(InvalidInput, match="storage pools"):
        await backend.import_instance(str(archive), "e3", storage_pool="x")

    # without snapshots, uncompressed
    plain = tmp_path / "plain.tar"
    await backend.export_instance(ref("e1"), str(plain), with_snapshots=False)
    with tarfile.open(plain) as tar:
        assert not [n for n in tar.getnames() if n.startswith("./snaps")]
    await backend.import_instance(str(plain), "e4")
    assert snapshots(lxc_path, "e4") == []
    await starts(backend, lxc_path, "e4")


def evil_tar(path: Path, entries):
    import io

    with tarfile.open(path, "w") as tar:
        for name, kind, extra in entries:
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.SYMTYPE or kind == tarfile.LNKTYPE:
                info.linkname = extra
                tar.addfile(info)
            elif kind == tarfile.DIRTYPE:
                info.mode = 0o755
                tar.addfile(info)
            else:
                data = extra.encode()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


async def test_damaged_or_foreign_archives_are_refused(backend, lxc_path, tmp_path):
    await backend.create("src")
    good = tmp_path / "good.tar.gz"
    await backend.export_instance(ref("src"), str(good))
    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    cfg = (lxc_path / "src" / "config").read_text()
    reg, sym, lnk, dr = tarfile.REGTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.DIRTYPE
    cases = {truncated: "damaged or not a tar"}
    for name, entries, why in [
        ("dotdot", [("config", reg, cfg), ("rootfs", dr, ""), ("rootfs/../../x", reg, "x")],
         "leaves the container"),
        ("absolute", [("config", reg, cfg), ("/etc/x", reg, "x")], "leaves the container"),
        ("foreign", [("config", reg, cfg), ("rootfs", dr, ""), ("home/x", reg, "x")],
         "not part of a container"),
        ("through-link", [("config", reg, cfg), ("rootfs", dr, ""),
                          ("rootfs/etc", sym, "/etc"), ("rootfs/etc/passwd", reg, "x")],
         "beyond a symbolic link"),
        ("hardlink-out", [("config", reg, cfg), ("rootfs", dr, ""),
                          ("rootfs/shadow", lnk, "/etc/shadow")], "leaves the container"),
        ("norootfs", [("config", reg, cfg)], "no config and rootfs"),
        ("noconfig", [("rootfs", dr, "")], "no config and rootfs"),
        ("overlaycfg", [("config", reg, "lxc.rootfs.path = overlay:/a:/b\n"),
                        ("rootfs", dr, "")], "no directory rootfs"),
    ]:
        path = tmp_path / f"{name}.tar"
        evil_tar(path, entries)
        cases[path] = why
    before = sorted(p.name for p in lxc_path.iterdir())
    for path, why in cases.items():
        with pytest.raises(InvalidInput, match=why):
            await backend.import_instance(str(path), "imp")
        assert sorted(p.name for p in lxc_path.iterdir()) == before, path
    assert not Path("/etc/x").exists()


async def test_export_and_clone_cancelled_leave_nothing(backend, lxc_path, tmp_path):
    await backend.create("big")
    with open(lxc_path / "big" / "rootfs" / "blob", "wb") as f:
        for _ in range(48):
            f.write(os.urandom(1 << 20))
    before = sorted(p.name for p in lxc_path.iterdir())
    out = tmp_path / "out"
    out.mkdir()

    task = asyncio.ensure_future(backend.export_instance(ref("big"), str(out / "big.tgz")))
    for _ in range(100):
        await asyncio.sleep(0.05)
        if (out / "big.tgz.part").exists():
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert list(out.iterdir()) == []

    task = asyncio.ensure_future(backend.clone_instance(ref("big"), "copy"))
    for _ in range(100):
        await asyncio.sleep(0.02)
        if (lxc_path / "copy").exists():
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(p.name for p in lxc_path.iterdir()) == before
    assert names(lxc_path) == ["big"]

    # an import cancelled while checking or unpacking leaves nothing either
    archive = out / "whole.tar"
    await backend.export_instance(ref("big"), str(archive))
    for stage in ("checking the archive", "unpacking"):
        reached = asyncio.Event()
        tasks: list[asyncio.Future] = []

        def progress(text, stage=stage, tasks=tasks, reached=reached):
            # cancelled the moment the stage is said: on a busy machine a sleep here
            # could outlast the whole import
            if text.startswith(stage) and not reached.is_set():
                reached.set()
                tasks[0].cancel()

        task = asyncio.ensure_future(backend.import_instance(str(archive), "imp",
                                                             progress=progress))
        tasks.append(task)
        await asyncio.wait_for(reached.wait(), 30)
        with pytest.raises(asyncio.CancelledError):
            await task
        assert sorted(p.name for p in lxc_path.iterdir()) == before, stage
