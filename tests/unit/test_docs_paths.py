"""docs/ARCHITECTURE.md stays true where that is cheap to check: every path it names
exists, every ``module.Name`` it names is defined there, each backend's table row names
every concern the backend class is composed of, the ``LXDBackend`` example lists exactly
the class's bases, and every part of the contract (a base of ``Backend``) is named."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ARCHITECTURE.md"
TEXT = DOC.read_text()
ROOTS = ("backends", "tui", "tests", "themes", "docs", "scripts")
PATH = re.compile(rf"(?:{'|'.join(ROOTS)})/[\w./-]*")
EXTENSIONS = (".py", ".md", ".sh", ".tcss", ".toml", ".json")
BACKENDS = ("lxd", "qemu", "lxc", "libvirt")


def spans() -> list[str]:
    """Everything the document puts in backticks."""
    return re.findall(r"`([^`\n]+)`", TEXT)


def defines(path: Path, name: str) -> bool:
    """Whether the module at ``path`` defines ``name`` (a class, function or assignment)."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name == name:
                return True
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
    return False


def test_every_path_named_exists():
    missing = []
    for span in spans():
        text = span.split("::")[0]
        if "<" in text or not PATH.fullmatch(text):
            continue
        if text.endswith("/") or text.endswith(EXTENSIONS) or "." not in text.rsplit("/", 1)[-1]:
            if not (ROOT / text).exists():
                missing.append(text)
            continue
        # `tui/flows/context.Context`: a module and a name it defines
        module, _, name = text.rpartition(".")
        path = ROOT / f"{module}.py"
        if not path.exists():
            missing.append(text)
        elif not defines(path, name):
            missing.append(f"{text} (no {name} in {module}.py)")
    assert missing == [], f"docs/ARCHITECTURE.md names what is not there: {missing}"


def backend_class(package: str) -> ast.ClassDef:
    tree = ast.parse((ROOT / "backends" / package / "backend.py").read_text())
    return next(node for node in tree.body if isinstance(node, ast.ClassDef)
                and any(isinstance(b, ast.Name) and b.id == "Backend" for b in node.bases))


def concern_modules(package: str) -> dict[str, str]:
    """Each base of the package's backend class (but ``Backend``) → the module it is from."""
    path = ROOT / "backends" / package / "backend.py"
    tree = ast.parse(path.read_text())
    origin = {alias.asname or alias.name: node.module.split(".")[0]
              for node in tree.body if isinstance(node, ast.ImportFrom) and node.level == 1
              and node.module for alias in node.names}
    bases = [b.id for b in backend_class(package).bases if isinstance(b, ast.Name)]
    return {base: origin[base] for base in bases if base != "Backend"}


def table_row(package: str) -> str:
    rows = [line for line in TEXT.splitlines() if line.startswith(f"| `backends/{package}/`")]
    assert len(rows) == 1, f"docs/ARCHITECTURE.md has no one table row for backends/{package}/"
    return rows[0]


def test_each_backend_row_names_every_concern():
    problems = []
    for package in BACKENDS:
        named = {span.rstrip("/") for span in re.findall(r"`([^`]+)`", table_row(package))}
        problems += [f"{package}: {base} ({module}.py)"
                     for base, module in concern_modules(package).items()
                     if module not in named]
    assert problems == [], f"concerns missing from docs/ARCHITECTURE.md's table: {problems}"


def test_each_backend_row_names_what_exists():
    problems = []
    for package in BACKENDS:
        folder = ROOT / "backends" / package
        sources = [p.read_text() for p in folder.rglob("*.py")]
        for span in re.findall(r"`([^`]+)`", table_row(package))[1:]:
            if span.endswith(".py"):
                ok = (folder / span).exists()
            elif re.fullmatch(r"[a-z_]+/?", span):
                ok = (folder / f"{span.rstrip('/')}.py").exists() or (folder / span).is_dir()
            elif re.fullmatch(r"[A-Z]\w+", span):
                ok = any(re.search(rf"^class {span}\b", s, re.M) for s in sources)
            else:
                continue  # `/state`, `vm.json`, `qemu-img`: not names of code
            if not ok:
                problems.append(f"{package}: {span}")
    assert problems == [], f"docs/ARCHITECTURE.md's table names what is not there: {problems}"


def test_lxd_example_lists_the_bases():
    example = re.search(r"class LXDBackend\(([^)]*)\)", TEXT)
    assert example, "docs/ARCHITECTURE.md has no LXDBackend example"
    written = [name.strip() for name in example.group(1).split(",")]
    actual = [b.id for b in backend_class("lxd").bases if isinstance(b, ast.Name)]
    assert written == actual


def test_every_part_of_the_contract_is_named():
    tree = ast.parse((ROOT / "backends" / "base.py").read_text())
    backend = next(node for node in tree.body
                   if isinstance(node, ast.ClassDef) and node.name == "Backend")
    origin = {alias.asname or alias.name: node.module
              for node in tree.body if isinstance(node, ast.ImportFrom) and node.level == 1
              and node.module for alias in node.names}
    missing = []
    for base in backend.bases:
        if not isinstance(base, ast.Name):
            continue  # abc.ABC
        if f"`{base.id}`" not in TEXT or f"`backends/{origin[base.id]}.py`" not in TEXT:
            missing.append(f"{base.id} (backends/{origin[base.id]}.py)")
    assert missing == [], f"contract parts missing from docs/ARCHITECTURE.md: {missing}"
