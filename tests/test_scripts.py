"""The README's test command, ``./scripts/test.sh``, as written: as root (with or without
sudo: a fresh root-only Debian has none) it runs; a user who is not root gets it re-run
through sudo with the same arguments; without root or sudo it stops at once and says
what to do. The privilege step runs for real with a fake ``id``, ``sudo`` and ``bash`` on a
minimal PATH, so the rest of the script (packages, venv, the suite) is not run here."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "test.sh"


def _bin(tmp_path, uid: int, sudo: bool) -> Path:
    fake = tmp_path / "bin"
    fake.mkdir()
    log = tmp_path / "log"

    def tool(name: str, body: str) -> None:
        (fake / name).write_text(f"#!/bin/sh\n{body}\n")
        (fake / name).chmod(0o755)

    tool("id", f'[ "$1" = -u ] && echo {uid} && exit 0\nexec /usr/bin/id "$@"')
    # the next step of the script after the privilege check: record it, stop there
    tool("bash", f'echo "bash $*" >> {log}\nexit 3')
    if sudo:
        tool("sudo", f'echo "sudo $*" >> {log}\nexit 0')
    os.symlink(shutil.which("dirname"), fake / "dirname")
    return fake


def _run(tmp_path, uid: int, sudo: bool, *args: str, **env: str):
    fake = _bin(tmp_path, uid, sudo)
    proc = subprocess.run(["/bin/bash", str(SCRIPT), *args], capture_output=True, text=True,
                          env={"PATH": str(fake), **env}, timeout=30)
    log = tmp_path / "log"
    return proc, (log.read_text().splitlines() if log.exists() else [])


def test_a_user_with_sudo_is_run_again_through_sudo(tmp_path):
    proc, log = _run(tmp_path, 1000, True, "-m", "not lab", "-k", "stop")
    assert proc.returncode == 0, proc.stderr
    assert log == [f"sudo -- {SCRIPT} -m not lab -k stop"]
    assert "running it again with sudo" in proc.stderr


def test_root_without_sudo_runs_on(tmp_path):
    proc, log = _run(tmp_path, 0, False, "-x")
    assert proc.returncode == 3, proc.stderr  # stopped by the fake bash, past the check
    assert log == ["bash scripts/setup-lab.sh"]
    assert "sudo" not in proc.stderr


def test_a_user_without_sudo_is_told_what_to_do(tmp_path):
    proc, log = _run(tmp_path, 1000, False)
    assert proc.returncode == 1 and log == []
    assert "need root and there is no sudo here" in proc.stderr
    assert 'CORRAL_TESTS_AS_USER=1' in proc.stderr


def test_a_user_may_run_it_unprivileged_on_purpose(tmp_path):
    proc, log = _run(tmp_path, 1000, True, "-m", "not lab", CORRAL_TESTS_AS_USER="1")
    assert proc.returncode == 3 and log == ["bash scripts/setup-lab.sh"], proc.stderr


def test_the_readme_documents_the_command_these_tests_run():
    """The README's test command is the script as it is (no `sudo` in front: a root-only
    machine has none), the one the tests above run, and .ci/run runs the same."""
    readme = (SCRIPT.parents[1] / "README.md").read_text()
    section = readme[readme.index("## Run the tests"):]
    section = section[:section.index("\n## ", 1)]
    assert "```sh\n./scripts/test.sh\n```" in section
    assert "sudo ./scripts/test.sh" not in readme
    assert "exec ./scripts/test.sh" in (SCRIPT.parents[1] / ".ci" / "run").read_text()
