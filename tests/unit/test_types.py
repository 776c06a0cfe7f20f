"""corral's code under a type checker (mypy), as CI runs it.

``[tool.mypy]`` in ``pyproject.toml`` holds the settings and, in its one override, the
modules that do not pass yet (``ignore_errors``). This test runs mypy once over the whole
code with those settings but without that override, then:

- an error in a module that is not listed fails the test (new code is checked, and an
  unused ``# type: ignore`` is an error too: ``warn_unused_ignores``);
- a listed module with no error left fails it as well, so the list only shrinks.

``.venv/bin/mypy`` alone (the settings in ``pyproject.toml``) gives the same verdict on the
modules not listed.

mypy's cache is kept between runs beside the lab's other cached set-up
(tests/qemu_guest.py ``cache_dir``): a cold run takes ~20 s of CPU, a warm one a few; mypy
checks each cached module against its source, so the cache never changes the verdict.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from qemu_guest import cache_dir  # tests/ (tests/conftest.py puts it on the path)

ROOT = Path(__file__).resolve().parents[2]
MYPY_CACHE = cache_dir() / "mypy"
"""Read when the module is collected: a test runs with a private ``HOME``."""


def settings() -> tuple[dict, list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    overrides = config.pop("overrides", [])
    pending = [m for o in overrides if o.get("ignore_errors") for m in o["module"]]
    return config, pending


def module_of(path: str) -> str:
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def test_mypy_passes_and_the_list_of_modules_not_yet_checked_only_shrinks(tmp_path):
    config, pending = settings()
    ini = ["[mypy]"] + [f"{k} = {', '.join(v) if isinstance(v, list) else str(v).lower()}"
                        for k, v in config.items()]
    (tmp_path / "mypy.ini").write_text("\n".join(ini) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYPY")}
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(tmp_path / "mypy.ini"),
         "--cache-dir", str(MYPY_CACHE), "--no-error-summary",
         "--python-executable", sys.executable],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode in (0, 1), run.stderr or run.stdout
    errors: dict[str, list[str]] = {}
    for line in run.stdout.splitlines():
        m = re.match(r"([\w/]+\.py):\d+: error: ", line)
        if m:
            errors.setdefault(module_of(m.group(1)), []).append(line)
    new = {m: lines for m, lines in errors.items() if m not in pending}
    assert not new, "type errors in checked modules:\n" + "\n".join(
        line for lines in new.values() for line in lines)
    clean = [m for m in pending if m not in errors]
    assert not clean, (f"these modules pass mypy now: take them out of [tool.mypy]'s "
                       f"ignore_errors list in pyproject.toml: {', '.join(clean)}")
