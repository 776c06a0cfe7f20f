#!/usr/bin/env bash
# The whole test suite, on a fresh Debian/Ubuntu machine: installs what the tests need
# (Debian packages when root: LXD, Incus, LXC, QEMU, busybox; Python deps in .venv) and
# runs `ruff check` and every test against real daemons, which the suite starts and stops
# itself.
# Extra arguments go to pytest (e.g. -k stop, -m "not lab"); without any, the whole suite runs
# as processes side by side (below), the ownership and text-gate tests as a user who is not
# root among them (scripts/test-as-user.sh, as root).
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
# The whole suite, as pytest processes side by side (each starts its own daemons, so no
# daemon is shared between processes):
#   lxd   - the LXD/Incus lab's tests (lxd1, lxd2, incus)
#   qemu  - local QEMU (TCG guests)
#   other - the clusters, libvirt and LXC
#   unit  - the tier without daemons, in two workers at a lower priority: the lab tests
#           mostly wait on their daemons, and this tier fills the idle CPU without
#           slowing them
#   user  - (as root) the ownership and text-gate tests once more as a user who is not
#           root (uid 65534, scripts/test-as-user.sh), also at the lower priority.
# The groups follow tests/tiers.py GROUPS: a test goes with the first kind it starts in
# the order cluster, lxd/incus, libvirt, qemu, lxc. Each process writes its own log,
# printed when it ends.
# (Tried and dropped: the LXD tests split over three processes, each with a lab of its own:
# a daemon of one lab stopped answering and a dozen tests failed; the cause was not found.)
logs="$(mktemp -d /tmp/corral-test-logs.XXXXXX)"
declare -A part=(
  [lxd]='-m "lab and not cluster and (lxd or incus)"'
  [local]='-m "lab and not cluster and not lxd and not incus and not libvirt and (qemu or lxc or root)"'
  [other]='-m "lab and (cluster or (not lxd and not incus and (libvirt or not (qemu or lxc or root))))"'
  [unit]='-m "not lab" -n 3'
)
names=(lxd local other unit)
declare -A pids=()
for name in "${names[@]}"; do
  prio=0
  [ "$name" = unit ] && prio=15
  eval "nice -n $prio .venv/bin/python -m pytest ${part[$name]} -p no:cacheprovider --durations=15" \
    >"$logs/$name.log" 2>&1 &
  pids[$name]=$!
done
if [ "$(id -u)" = 0 ]; then
  names+=(user)
  nice -n 15 bash scripts/test-as-user.sh >"$logs/user.log" 2>&1 &
  pids[user]=$!
fi
status=0
for name in "${names[@]}"; do
  rc=0
  wait "${pids[$name]}" || rc=$?
  echo "=== $name tests (exit $rc) ==="
  cat "$logs/$name.log"
  [ "$rc" = 0 ] || status=$rc
done
rm -rf "$logs"
exit "$status"
