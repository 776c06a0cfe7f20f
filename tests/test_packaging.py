"""The package tells the truth: `pipx install .` (as the README says) gives a working
`corral` command with its stylesheet and licence, and what the code imports is declared."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_pipx_install_gives_a_working_command(tmp_path):
    env = dict(os.environ, PIPX_HOME=str(tmp_path / "pipx"), PIPX_BIN_DIR=str(tmp_path / "bin"),
               PIPX_MAN_DIR=str(tmp_path / "man"), HOME=str(tmp_path / "home"))
    # an empty machine: no LXD/Incus, QEMU and LXC switched off
    (tmp_path / "config.toml").write_text("[qemu]\nenabled = false\n[lxc]\nenabled = false\n")
    env["CORRAL_CONFIG_FILE"] = str(tmp_path / "config.toml")
    pipx = [sys.executable, "-m", "pipx"]
    done = subprocess.run([*pipx, "install", str(ROOT)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    corral = tmp_path / "bin" / "corral"
    version = subprocess.run([str(corral), "--version"], env=env, capture_output=True,
                             text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("corral "), version
    venv = tmp_path / "pipx" / "venvs" / "corral"
    assert list(venv.rglob("themes/app.tcss")), "the stylesheet is not in the package"
    assert list(venv.rglob("corral-*.dist-info/licenses/LICENSE")), "no licence shipped"
    listed = subprocess.run([str(corral), "--list-remotes"], env=env, capture_output=True,
                            text=True, timeout=60)
    # an empty machine: says what it looked for, and fails
    assert listed.returncode == 1 and "Looked for" in listed.stdout, listed


def _imported_top_level(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_every_third_party_import_is_declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = [d for extra in project.get("optional-dependencies", {}).values()
                for d in extra]  # (an extra's module is imported only where it is installed)
    declared = {d.split(";")[0].split("[")[0].split("=")[0].split("<")[0].split(">")[0]
                .strip().lower().replace("-", "_") for d in [*project["dependencies"],
                                                              *optional]}
    module_of = {"yaml": "pyyaml", "qemu": "qemu.qmp", "PIL": "pillow",
                 "libvirt": "libvirt_python", "libvirtaio": "libvirt_python"}
    ours = {"tui", "backends", "themes"}
    used: set[str] = set()
    for package in ours:
        for path in (ROOT / package).rglob("*.py"):
            used |= _imported_top_level(path)
    third_party = {n for n in used - ours - set(sys.stdlib_module_names) if n != "__future__"}
    missing = {n for n in third_party if module_of.get(n, n).lower() not in declared}
    assert not missing, f"imported but not declared in pyproject.toml: {sorted(missing)}"
