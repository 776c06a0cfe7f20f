"""backends.trust's surface: the CLI step uses its pinned session by a public name, and
nothing is left of the token issuing the CLI step no longer does (corral issues no trust
tokens: it trusts the CLI's certificate over its own pinned connection)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from backends import cli_remote, trust

ROOT = Path(__file__).resolve().parents[2]


def test_cli_remote_imports_only_public_names_of_trust():
    tree = ast.parse((ROOT / "backends" / "cli_remote.py").read_text())
    names = [alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             and node.module == "trust" for alias in node.names]
    assert "pinned_session" in names
    assert [n for n in names if n.startswith("_")] == []
    assert cli_remote.pinned_session is trust.pinned_session


def test_trust_issues_no_tokens():
    source = inspect.getsource(trust)
    assert not hasattr(trust, "new_token")
    assert '"token": True' not in source and "'token': True" not in source
