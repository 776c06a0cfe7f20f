#!/usr/bin/env bash
# The ownership and text-gate tests as a user who is not root (uid 65534, "nobody"), run by
# scripts/test.sh beside the other tiers: corral's owner checks compare files with the
# effective user, and as root every file "of another user" is made by chown, so the same
# checks must also hold where the user is an ordinary one.
#
# The project's venv may use a Python that only root can reach (pyenv under /root here):
# in a private mount namespace that Python's installation and the venv's packages are bound
# to paths under a temp dir that the user may read, and the tests run from a copy of the
# tree. Nothing outside the temp dir changes; the binds end with the namespace.
# Extra arguments go to pytest (the default: the files below).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  echo "test-as-user: run as root (it switches to uid 65534 itself)" >&2
  exit 1
fi
uid=65534
base=$(.venv/bin/python -c 'import sys; print(sys.base_prefix)')
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
py=$(.venv/bin/python -c 'import os, sys; print(os.path.basename(os.path.realpath(sys.executable)))')
work=$(mktemp -d /tmp/corral-as-user-XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
mkdir -p "$work/python" "$work/site" "$work/src" "$work/home"
cp -r backends tui themes tests pyproject.toml "$work/src/"
find "$work/src" -name __pycache__ -prune -exec rm -rf {} +
chmod -R a+rX "$work/src"
chown -R "$uid:$uid" "$work/home"

if [ "$#" -gt 0 ]; then
  tests=("$@")
else
  tests=(-m "not lab" tests/unit/test_owned_files.py tests/unit/test_paths.py
         tests/unit/test_logfile.py tests/unit/test_cache.py tests/unit/test_lastframe.py
         tests/unit/test_archive_reader.py tests/unit/test_text_gate.py
         tests/tui/test_text_gate.py tests/tui/test_security_app.py tests/test_hermetic.py)
fi

# shellcheck disable=SC2016
unshare --mount --propagation private -- bash -c '
  set -euo pipefail
  work=$1 base=$2 site=$3 py=$4 uid=$5; shift 5
  mount --bind "$base" "$work/python"
  mount -o remount,bind,ro "$work/python"
  mount --bind "$site" "$work/site"
  mount -o remount,bind,ro "$work/site"
  cd "$work/src"
  exec setpriv --reuid="$uid" --regid="$uid" --clear-groups \
    env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$work/home" LANG=C.UTF-8 \
      LD_LIBRARY_PATH="$work/python/lib" PYTHONPATH="$work/src:$work/site" \
      PYTHONDONTWRITEBYTECODE=1 \
      "$work/python/bin/$py" -m pytest -p no:cacheprovider -q "$@"
' test-as-user "$work" "$base" "$site" "$py" "$uid" "${tests[@]}"
