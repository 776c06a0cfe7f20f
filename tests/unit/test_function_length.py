"""No function in backends/, tui/ or themes/ runs over 80 lines (from its ``def`` to its
last line, the docstring included): a longer procedure is split into named steps (see
backends/steps.py for one undo on failure). A long function that is a flat table may stay, named below with
its reason."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 80

EXCEPTIONS: dict[str, str] = {
    # "backends/x.py:Class.function": "why it may stay long (a flat table, say)",
}
"""Functions allowed over the limit, ``path:qualified name`` -> the reason."""


def _long_functions() -> dict[str, int]:
    found: dict[str, int] = {}
    for path in sorted(p for pkg in ("backends", "tui", "themes")
                       for p in (ROOT / pkg).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        rel = path.relative_to(ROOT).as_posix()

        def visit(node: ast.AST, prefix: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    name = f"{prefix}{child.name}"
                    lines = (child.end_lineno or child.lineno) - child.lineno + 1
                    if lines > LIMIT:
                        found[f"{rel}:{name}"] = lines
                    visit(child, f"{name}.")
                elif isinstance(child, ast.ClassDef):
                    visit(child, f"{prefix}{child.name}.")
                else:
                    visit(child, prefix)

        visit(tree, "")
    return found


def test_functions_in_backends_stay_within_80_lines():
    found = _long_functions()
    over = {k: v for k, v in found.items() if k not in EXCEPTIONS}
    assert over == {}, (f"functions over {LIMIT} lines (split them into named steps, or "
                        f"name them in EXCEPTIONS with the reason): {over}")


def test_every_exception_is_still_needed():
    found = _long_functions()
    stale = sorted(k for k in EXCEPTIONS if k not in found)
    assert stale == [], f"no longer over {LIMIT} lines: drop them from EXCEPTIONS: {stale}"
    assert all(reason.strip() for reason in EXCEPTIONS.values())
