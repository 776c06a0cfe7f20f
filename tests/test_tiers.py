"""Tests are marked by what they start (tests/tiers.py): ``-m "not lab"`` selects exactly
the tests that start no daemon, and a test outside ``lab`` that starts one fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import tiers

TESTS = Path(__file__).parent


def _pytest(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env or {}),
           "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)])}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def test_kinds_come_from_fixtures_their_closure_and_dynamic_parameters():
    assert tiers.kinds_of(["tmp_path"], {}, set()) == set()
    assert tiers.kinds_of(["remote_backend", "lab", "lab_env"], {}, set()) == {"lxd", "incus"}
    assert tiers.kinds_of(["qemu", "tmp_path"], {}, set()) == {"qemu"}
    assert tiers.kinds_of(["cluster"], {"cluster": "incus"}, set()) == {"incus", "cluster"}
    assert tiers.kinds_of(["subject"], {"subject": "fake"}, set()) == set()
    assert tiers.kinds_of(["subject"], {"subject": "lxc"}, set()) == {"lxc"}
    assert tiers.kinds_of([], {}, {"qemu", "slow"}) == {"qemu"}


def test_not_lab_selects_only_tests_that_start_nothing():
    """Collected for real: the cluster tests (whose daemons come through getfixturevalue)
    and the QEMU tests are outside ``-m "not lab"``; what is left are the pure tests."""
    files = ["backends/test_lxd_cluster.py", "backends/test_qemu_kvm.py"]
    proc = _pytest("--co", "-q", "-m", "not lab", *files, cwd=TESTS)
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    assert ids, proc.stdout + proc.stderr
    assert not [i for i in ids if "test_lxd_cluster" in i], ids
    assert {i.split("::")[1] for i in ids if "test_qemu_kvm" in i} == {
        "test_kvm_errors_are_recognised", "test_fallback_holds_for_this_kernel_and_qemu_only",
        "test_error_type_carries_the_offer"}
    proc = _pytest("--co", "-q", "-m", "cluster", files[0], cwd=TESTS)
    clustered = {line for line in proc.stdout.splitlines() if "::" in line}
    proc = _pytest("--co", "-q", files[0], cwd=TESTS)
    by_parameter = {line for line in proc.stdout.splitlines()
                    if line.endswith(("[lxd]", "[incus]"))}  # the `cluster` fixture's kinds
    assert by_parameter and by_parameter <= clustered, by_parameter - clustered


def test_a_test_outside_lab_that_starts_a_daemon_fails(tmp_path):
    """A fake ``lxd`` and ``qemu-system-x86_64`` on PATH (they only exit): started by an
    unmarked test, the test fails naming the program; marked with its kind, it passes;
    ``qemu-system-x86_64 --version`` starts no guest and passes unmarked."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for name in ("lxd", "qemu-system-x86_64"):
        (bin_ / name).write_text("#!/bin/sh\nexit 0\n")
        (bin_ / name).chmod(0o755)
    (tmp_path / "test_spawn.py").write_text(
        "import subprocess, pytest\n"
        "def test_unmarked():\n"
        "    subprocess.run(['lxd', '--group', 'root'], check=True)\n"
        "@pytest.mark.lxd\n"
        "def test_marked():\n"
        "    subprocess.run(['lxd', '--group', 'root'], check=True)\n"
        "def test_version_only():\n"
        "    subprocess.run(['qemu-system-x86_64', '--version'], check=True)\n")
    proc = _pytest("-p", "conftest", "-q", "--rootdir", str(tmp_path), "-c", os.devnull,
                   "test_spawn.py", cwd=tmp_path,
                   env={"PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "ERROR at teardown of test_unmarked" in out, out
    assert "tier guard: test_spawn.py::test_unmarked started lxd but is not marked 'lab'" in out
    assert "3 passed, 1 error" in out, out  # test_unmarked's call passed, its teardown fails


def test_the_processes_of_the_test_script_take_every_test_once():
    """``scripts/test.sh`` runs the suite as a few pytest processes, each selecting by
    marker expression: for every combination of kinds a test can have, exactly one process
    takes it (the lab ones one of the lab processes; the rest ``unit``)."""
    import itertools
    import re

    from _pytest.mark.expression import Expression

    script = (TESTS.parent / "scripts" / "test.sh").read_text()
    parts = dict(re.findall(r"\[(\w+)\]='-m \"([^\"]+)\"", script))
    assert set(parts) == {"lxd", "local", "other", "unit"}, parts
    compiled = {name: Expression.compile(expr) for name, expr in parts.items()}
    kinds = sorted(tiers.KINDS)
    for n in range(len(kinds) + 1):
        for combo in itertools.combinations(kinds, n):
            marks = set(combo) | ({"lab"} if combo else set())
            takers = [name for name, e in compiled.items()
                      if e.evaluate(lambda m: m in marks)]
            assert len(takers) == 1, (combo, takers)
