#!/usr/bin/env bash
# The whole test suite, on a fresh Debian/Ubuntu machine: installs what the tests need
# (Debian packages when root: LXD, Incus, LXC, QEMU, busybox; Python deps in .venv) and
# runs `ruff check` and every test against real daemons, which the suite starts and stops
# itself.
# Extra arguments go to pytest (e.g. -k stop, -m "not lab"); without any, the tier without
# daemons runs in three parallel processes, then the lab tier in two, then (as root) the
# ownership and text-gate tests as a user who is not root (scripts/test-as-user.sh).
#
# Run it as it is, as root or not: the lab needs root (private LXD/Incus daemons, LXC, Debian
# packages), so a user who is not root re-runs it through sudo when sudo is there. Without
# sudo (a root-only machine has none; root needs none) it says what to do instead.
# CORRAL_TESTS_AS_USER=1 runs it unprivileged, e.g. for the no-daemon tier (-m "not lab").
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ "$(id -u)" != 0 ] && [ "${CORRAL_TESTS_AS_USER:-}" != 1 ]; then
  if command -v sudo >/dev/null 2>&1; then
    echo "test.sh: not root; running it again with sudo (CORRAL_TESTS_AS_USER=1 runs it as you)" >&2
    exec sudo -- "$here/test.sh" "$@"
  fi
  echo "test.sh: the lab tests need root and there is no sudo here: run it as root," >&2
  echo "  or CORRAL_TESTS_AS_USER=1 $0 -m \"not lab\" for the tests without daemons." >&2
  exit 1
fi
cd "$here/.."

bash scripts/setup-lab.sh

if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get install -y -qq python3-venv >/dev/null
  else
    echo "python3-venv is missing: sudo apt-get install python3-venv" >&2
    exit 1
  fi
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade "pip>=25.1"
# the versions the suite was last run with (requirements.lock), not whatever is newest
.venv/bin/python -m pip install -q -e . --group test -c requirements.lock

# Lint first (pyflakes and bugbear catch real bugs; rules in pyproject.toml [tool.ruff.lint])
.venv/bin/ruff check .

if [ "$#" -gt 0 ]; then
  exec .venv/bin/python -m pytest "$@"
fi
# The whole suite: the tier without daemons in parallel processes (its tests share no
# state: each has its own temp HOME, runtime dir and fake host), then the lab tier in two
# processes, each taking whole groups of tests that share the session's daemons of one kind
# (tests/tiers.py GROUPS: the LXD/Incus lab, the clusters, QEMU, LXC, libvirt), so every
# daemon is started by one process only. (Tried and dropped: the LXD tests split over three
# processes, each with a lab of its own, beside the tier without daemons: a daemon of one
# lab stopped answering and a dozen tests failed; the cause was not found.)
status=0
.venv/bin/python -m pytest -m "not lab" -n 3 -p no:cacheprovider || status=$?
.venv/bin/python -m pytest -m lab -n 2 --dist loadgroup -p no:cacheprovider || status=$?
# The ownership and text-gate tests once more as a user who is not root (uid 65534)
if [ "$(id -u)" = 0 ]; then
  bash scripts/test-as-user.sh || status=$?
fi
exit "$status"
