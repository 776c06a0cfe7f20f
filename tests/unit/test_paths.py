"""Runtime files live in a directory only this user can reach."""

from __future__ import annotations

import os
import stat

import pytest

from backends.errors import OperationFailed
from backends.paths import private_file, runtime_dir


def test_the_tmp_fallback_is_made_private_and_checked(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    base = tmp_path / "base"
    monkeypatch.setattr("backends.paths._fallback", lambda: base)
    path = runtime_dir("consoles", "x")
    assert path.is_dir()
    for p in (base, base / "corral", base / "corral" / "consoles", path):
        assert stat.S_IMODE(os.lstat(p).st_mode) == 0o700
    # an older corral's world-readable directory of ours is fixed
    os.chmod(base / "corral", 0o755)
    runtime_dir("consoles", "x")
    assert stat.S_IMODE(os.lstat(base / "corral").st_mode) == 0o700


def test_a_planted_symlink_or_foreign_directory_is_refused(tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "corral").symlink_to(elsewhere)
    with pytest.raises(OperationFailed, match="symlink"):
        runtime_dir("qemu")
    (run / "corral").unlink()
    (run / "corral").mkdir(mode=0o700)
    if os.getuid() == 0:  # as root we can make a directory someone else owns
        (run / "corral" / "qemu").mkdir(mode=0o700)
        os.chown(run / "corral" / "qemu", 65534, 65534)
        with pytest.raises(OperationFailed, match="belongs to uid 65534"):
            runtime_dir("qemu")


def test_an_xdg_runtime_dir_not_private_to_us_is_not_used(tmp_path, monkeypatch):
    base = tmp_path / "fallback"
    monkeypatch.setattr("backends.paths._fallback", lambda: base)
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    assert runtime_dir("qemu") == run / "corral" / "qemu"
    os.chmod(run, 0o755)  # readable by others: not ours to trust
    assert runtime_dir("qemu") == base / "corral" / "qemu"
    os.chmod(run, 0o700)
    link = tmp_path / "link"
    link.symlink_to(run)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(link))
    assert runtime_dir("qemu") == base / "corral" / "qemu"
    if os.geteuid() == 0:  # another user's runtime dir (root under su / sudo -E)
        other = tmp_path / "other"
        other.mkdir(mode=0o700)
        os.chown(other, 65534, 65534)
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(other))
        assert runtime_dir("qemu") == base / "corral" / "qemu"
        assert not (other / "corral").exists()
    assert stat.S_IMODE(os.lstat(base).st_mode) == 0o700


def test_a_planted_link_is_never_chmodded(tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    target = tmp_path / "victim"
    target.mkdir(mode=0o755)
    (run / "corral").symlink_to(target)
    with pytest.raises(OperationFailed, match="symlink"):
        runtime_dir()
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o755


def test_private_files_are_0600_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        with private_file(tmp_path / "a") as f:
            f.write(b"x")
        with private_file(tmp_path / "b", binary=False, exclusive=False) as f:
            f.write("x")
    finally:
        os.umask(old)
    for name in "ab":
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o600
    with pytest.raises(FileExistsError):
        private_file(tmp_path / "a")
    (tmp_path / "l").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError):
        private_file(tmp_path / "l", exclusive=False)
    assert not (tmp_path / "elsewhere").exists()


def test_publish_export_names_the_part_and_never_replaces_a_file(tmp_path):
    from backends.errors import InvalidInput
    from backends.paths import publish_export

    part, path = tmp_path / "a.tar.part", tmp_path / "a.tar"
    part.write_bytes(b"archive")
    publish_export(str(part), str(path))
    assert path.read_bytes() == b"archive" and not part.exists()
    part.write_bytes(b"second")
    with pytest.raises(InvalidInput, match="appeared during the export"):
        publish_export(str(part), str(path))
    assert path.read_bytes() == b"archive" and part.exists()  # the caller removes it
