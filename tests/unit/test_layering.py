"""backends/ never imports Textual, Rich or pyte; tui/ never imports pylxd/qemu.qmp/websockets."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_backends_import_no_ui_libraries():
    code = (
        "import sys, importlib, pkgutil, backends\n"
        "for m in pkgutil.walk_packages(backends.__path__, 'backends.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in ('textual', 'rich', 'pyte', 'tui'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "", f"backends pulled in: {out.stdout.strip()}"


def test_tui_never_imports_backend_libraries():
    forbidden = {"pylxd", "qemu", "websockets", "requests"}
    offenders = []
    for path in (ROOT / "tui").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names
                          if n.split(".")[0] in forbidden]
    assert offenders == []
