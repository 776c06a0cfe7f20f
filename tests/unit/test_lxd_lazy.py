"""The LXD backend connects, lists and follows events without importing pylxd or requests
(backends/lxd/lazy.py; the pylxd client is built in the background once connected)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_backend_module_imports_neither_pylxd_nor_requests():
    out = _run("import sys, backends.lxd.backend, backends.lxd.quick\n"
               "print(sorted(m for m in ('pylxd', 'requests', 'urllib3', 'cryptography')"
               " if m in sys.modules))")
    assert out == "[]"


def test_no_backend_loads_the_console_client_until_a_console_opens():
    """The console client (corral's console server, the VGA reader) is the first
    console's to load: the backends' modules, imported at start for every remote, do not
    (the LXD and LXC ones did, through a module-level import)."""
    out = _run("import sys, backends\n"
               "for kind in ('lxd', 'incus', 'lxc', 'qemu'):\n"
               "    backends.preload(kind)\n"
               "print(sorted(m for m in ('backends.console.client', 'backends.console.server')"
               " if m in sys.modules))")
    assert out == "[]"


def test_pylxd_exceptions_match_nothing_until_pylxd_is_imported_then_are_its_own():
    out = _run(
        "from backends.lxd.lazy import NeverRaised, pylxd_exc, requests_exc\n"
        "before = pylxd_exc.NotFound is NeverRaised and requests_exc.Timeout is NeverRaised\n"
        "try:\n"
        "    raise ValueError('x')\n"
        "except (pylxd_exc.NotFound, requests_exc.Timeout):\n"
        "    caught = 'wrongly'\n"
        "except ValueError:\n"
        "    caught = 'right'\n"
        "import pylxd.exceptions, requests.exceptions\n"
        "after = (pylxd_exc.NotFound is pylxd.exceptions.NotFound\n"
        "         and requests_exc.Timeout is requests.exceptions.Timeout)\n"
        "print(before, caught, after, isinstance(ValueError(), pylxd_exc.LXDAPIException))")
    assert out == "True right True False"
