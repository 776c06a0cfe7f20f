"""Fixtures shared by the UI tests."""

from __future__ import annotations

import os

import pytest

import hermetic  # tests/ is on sys.path (tests/conftest.py)


@pytest.fixture
def setup(tmp_path, hermetic_env):
    """A config with one LXD remote, ``alpha``, that only fake backends serve (and no
    local QEMU or LXC), and an environment without any CLI remote: ``(config, env)``."""
    cfg = tmp_path / "config.toml"
    cfg.write_text('[ui]\nmetrics_interval = 60\n[lxc]\nenabled = false\n[qemu]\n'
                   'enabled = false\n[[remote]]\nname = "alpha"\nkind = "lxd"\n'
                   'address = "/nonexistent/a.sock"\n')
    env = hermetic.environment(tmp_path, os.environ["XDG_RUNTIME_DIR"])
    env.update(LXD_SOCKET=str(tmp_path / "no.sock"), INCUS_SOCKET=str(tmp_path / "no2.sock"))
    return cfg, env


class GCRecorder:
    """Stands in for the ``gc`` module in tui.app: records the start-up freeze."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def collect(self) -> None:
        self.calls.append("collect")

    def freeze(self) -> None:
        self.calls.append("freeze")

    def enable(self) -> None:
        self.calls.append("enable")

    def unfreeze(self) -> None:  # the app's end: not part of what the tests look at
        pass


@pytest.fixture
def gc_calls(monkeypatch):
    """tui.app's ``gc`` replaced by a recorder (and its delays shortened): its calls."""
    import tui.app as app_module

    recorder = GCRecorder()
    monkeypatch.setattr(app_module, "gc", recorder)
    monkeypatch.setattr(app_module, "FREEZE_QUIET", 0.05)
    return recorder.calls
