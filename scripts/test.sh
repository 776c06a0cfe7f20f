#!/usr/bin/env bash
# The whole test suite, on a fresh Debian/Ubuntu machine: installs what the tests need
# (Debian packages when root: LXD, Incus, LXC, QEMU, busybox; Python deps in .venv) and
# runs `ruff check` and every test against real daemons, which the suite starts and stops
# itself.
# Extra arguments go to pytest (e.g. -k stop, -m "not lab").
set -euo pipefail
cd "$(dirname "$0")/.."

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
.venv/bin/python -m pip install -q -e . --group test

# Lint first (pyflakes and bugbear catch real bugs; rules in pyproject.toml [tool.ruff.lint])
.venv/bin/ruff check .

exec .venv/bin/python -m pytest "$@"
