"""`corral --list-remotes` against the lab: every remote the UI shows (LXD, Incus, QEMU,
LXC) with its state; `--remote` narrows it; the exit status tells a problem."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(env, cfg, *args):
    return subprocess.run([sys.executable, "-m", "tui", "--list-remotes", *args],
                          env=dict(env, CORRAL_CONFIG_FILE=str(cfg)), cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def _config(tmp_path):
    (tmp_path / "lxcpath").mkdir()
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[ui]\nnetwork_timeout = 3\n[lxc]\npaths = ["{tmp_path / "lxcpath"}"]\n'
                   f'[qemu]\npath = "{tmp_path / "vms"}"\n')
    return cfg


def test_lists_every_remote_with_its_state(lab, lab_env, tmp_path):
    done = _run(lab_env, _config(tmp_path))
    states = {line.split()[0]: line.split()[2] for line in done.stdout.splitlines()
              if not line.startswith("problem:")}
    assert states["local"] == states["lab2"] == states["inc1"] == "connected", done.stdout
    assert states["qemu"] == "connected" and states["lxc"] == "connected", done.stdout
    # the incus CLI's built-in 'local' points at a socket that is not there
    assert states["incus-local"] == "offline"
    assert done.returncode == 1


def test_remote_narrows_and_all_connected_exits_0(lab, lab_env, tmp_path):
    done = _run(lab_env, _config(tmp_path), "--remote", "lab2", "--remote", "qemu")
    names = [line.split()[0] for line in done.stdout.splitlines()]
    assert names == ["lab2", "qemu"], done.stdout
    assert done.returncode == 0, done.stdout + done.stderr
    unknown = _run(lab_env, tmp_path / "config.toml", "--remote", "nope")
    assert unknown.returncode == 1 and "no remote named nope" in unknown.stdout
