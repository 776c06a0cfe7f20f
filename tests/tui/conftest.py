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
