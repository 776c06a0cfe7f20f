"""Runtime files live in a directory only this user can reach."""

from __future__ import annotations

import os
import stat

import pytest

from backends.errors import OperationFailed
from backends.paths import runtime_dir


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
    run.mkdir()
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
