"""The action table names its flows lazily (tui/actions.py: imported when first run, not
at start-up; those of ``tui/flows/`` and the views' verbs of ``tui/views/verbs*.py``):
every one of them must exist, so a misspelt name fails here, not on a key."""

from __future__ import annotations

import inspect
import subprocess
import sys
from importlib import import_module
from pathlib import Path

from tui.actions import ACTIONS, _Lazy

ROOT = Path(__file__).resolve().parents[2]


def resolve(lazy: _Lazy):
    return getattr(import_module(f"tui.{lazy.module}"), lazy.name, None)


def test_every_lazy_flow_names_a_function_of_its_module():
    flows = [(a.name, a.flow) for a in ACTIONS if isinstance(a.flow, _Lazy)]
    conditions = [(a.name, a.available) for a in ACTIONS if isinstance(a.available, _Lazy)]
    assert len(flows) > 30 and conditions  # the table's flows are all lazy
    for action, lazy in flows:
        function = resolve(lazy)
        assert inspect.iscoroutinefunction(function), \
            f"{action}: tui.{lazy.module}.{lazy.name} is not a flow"
    for action, lazy in conditions:
        assert callable(resolve(lazy)), \
            f"{action}: tui.{lazy.module}.{lazy.name} is missing"


def test_starting_corral_imports_no_wizard_or_file_browser():
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, tui.app; print(' '.join(sys.modules))"],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for module in ("tui.flows.create", "tui.flows.files", "tui.flows.transfer",
                   "tui.flows.cluster", "tui.flows.limits", "tui.views.verbs", "requests",
                   "pylxd", "PIL"):
        assert module not in loaded, f"{module} is imported on the way to the first screen"
