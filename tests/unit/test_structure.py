"""The house keeps its shape: no import cycles among corral's modules, no oversized modules,
and the UI learns what a backend can do only from its declared capabilities."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("tui", "backends", "themes")
MAX_LINES = 520
LARGE_ON_PURPOSE: set[str] = set()
"""Modules allowed over the limit, each with its docstring saying why (none today)."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """corral modules ``name`` imports (anywhere, lazily too; not under TYPE_CHECKING)."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [module] + [f"{module}.{a.name}" for a in node.names]
        else:
            targets = []
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            strong(v)
    return found


def test_no_import_cycles():
    modules = _modules()
    known = set(modules)
    # a package's __init__ importing its own submodules (re-exports) is not a cycle
    graph = {name: {t for t in _imports(name, path, known)
                    if not (path.name == "__init__.py" and t.startswith(name + "."))}
             for name, path in modules.items()}
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_oversized_modules():
    big = {str(p.relative_to(ROOT)): n for p in _modules().values()
           if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert {k: v for k, v in big.items() if k not in LARGE_ON_PURPOSE} == {}


def test_the_ui_asks_capabilities_not_attributes():
    """No ``hasattr`` or signature reading in tui/, and no backend chosen by remote name."""
    offenders = []
    for path in (ROOT / "tui").rglob("*.py"):
        if "terminal" in path.relative_to(ROOT).parts[:2]:
            continue  # the terminal emulator has no backend in sight
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if (called := _called(node)) in ("hasattr", "signature"):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {called}()")
            if isinstance(node, ast.Compare) and chooses_by_kind(node):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
    assert offenders == []


def _called(node: ast.AST) -> str:
    """The name a call calls (``f`` of ``f()`` and of ``x.f()``); "" for anything else."""
    if not isinstance(node, ast.Call):
        return ""
    func = node.func
    return func.id if isinstance(func, ast.Name) else (
        func.attr if isinstance(func, ast.Attribute) else "")


def chooses_by_kind(node: ast.Compare) -> bool:
    """A comparison that chooses by backend kind: a ``.kind`` (or a ``.remote``) against a
    kind's name, two ``.kind`` s against each other, or a collection of ``.kind`` s."""
    text = ast.unparse(node)
    names_a_kind = any(isinstance(c, ast.Constant) and c.value in BACKEND_KINDS
                       for c in ast.walk(node))
    operands = [node.left, *node.comparators]

    def kinds_in(n: ast.AST) -> bool:
        return any(isinstance(a, ast.Attribute) and a.attr == "kind" for a in ast.walk(n))

    by_kind = any(kinds_in(o) for o in operands)
    if names_a_kind and (".remote " in text + " " or by_kind):
        return True
    if sum(kinds_in(o) for o in operands) >= 2:
        return True
    return any(isinstance(o, (ast.Set, ast.List, ast.Tuple, ast.SetComp)) and kinds_in(o)
               for o in operands)


BACKEND_KINDS = ("qemu", "lxc", "lxd", "incus", "libvirt")
"""A comparison of a ``.kind`` (a remote's, a backend's) with one of these in tui/ is the
UI choosing by backend instead of asking capabilities."""


def test_the_kind_check_catches_every_spelling():
    for source in ('x = {} if remote.kind == "qemu" else {}',
                   'ok = backend.kind in ("lxd", "incus")', 'if ref.remote == "lxc": pass',
                   'ok = target.kind != ctx.backend_of(row.remote).kind',
                   'names = [n for n in names if backends[n].kind == here.kind]',
                   'ok = {b.kind} == kinds'):
        node = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Compare))
        assert chooses_by_kind(node), source
    for source in ('ok = event.kind in (EventKind.CLUSTER, EventKind.CONNECTION)',
                   'ok = entry.kind == "directory"', 'ok = s.kind == IMPORT_SOURCE'):
        node = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Compare))
        assert not chooses_by_kind(node), source


def _capability_reads(source: str) -> list[int]:
    """Lines that read a ``.capabilities`` attribute (not the inventory's method call)."""
    tree = ast.parse(source)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return [n.lineno for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and n.attr == "capabilities"
            and id(n) not in called]


def test_the_ui_reads_capabilities_through_the_inventory():
    """A backend's ``capabilities`` are read by the inventory only (tui/services/): it
    narrows a read-only remote's, so the UI offers on one only what changes nothing."""
    offenders = []
    for path in (ROOT / "tui").rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[:2] == ("tui", "services"):
            continue
        offenders += [f"{rel}:{line}" for line in _capability_reads(path.read_text())]
    assert offenders == []
    assert _capability_reads("ok = Capability.X in backend.capabilities") == [1]
    assert _capability_reads("caps = inventory.capabilities(ref)") == []


SOURCE_KINDS = ("empty-vm", "kernel", "disk-image", "iso", "pxe", "template", "tarball",
                "vm-import")
"""The kinds of the create sources the backends offer today (but ``image``, which tui/
names as an instance's field): each source says what the wizard asks for it
(``CreateSource.fields``), so tui/ never names one."""


def _source_kind_uses(source: str) -> list[str]:
    """A ``.kind`` read on something named like a create source (``src``, ``source``,
    ``sources[i]``, ``self.source``), or a source kind's name as a string constant."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "kind":
            owner = node.value
            if isinstance(owner, ast.Subscript):
                owner = owner.value
            name = owner.id if isinstance(owner, ast.Name) else (
                owner.attr if isinstance(owner, ast.Attribute) else "")
            if name.lower().rstrip("s").endswith(("src", "source")):
                found.append(f"{node.lineno} {ast.unparse(node)}")
        elif isinstance(node, ast.Constant) and node.value in SOURCE_KINDS:
            found.append(f"{node.lineno} {node.value!r}")
    return found


def test_the_ui_knows_no_create_source_kinds():
    """The launch wizard draws a source's own fields: no ``src.kind == "kernel"`` in tui/,
    and no table keyed by source kinds."""
    offenders = [f"{path.relative_to(ROOT)}:{use}" for path in (ROOT / "tui").rglob("*.py")
                 for use in _source_kind_uses(path.read_text())]
    assert offenders == []
    for caught in ('show = src.kind == "kernel"', 'ok = self.source.kind in ("iso", "pxe")',
                   'hint = HINTS.get(sources[i].kind)', 'HINTS = {"tarball": "a path"}'):
        assert _source_kind_uses(caught), caught
    assert _source_kind_uses('ok = remote.kind == "qemu"') == []


def _extra_devices_reads(source: str) -> list[str]:
    """``<x>.extra["devices"]`` or ``<x>.extra.get("devices")``: devices are a typed field."""
    found = []
    for node in ast.walk(ast.parse(source)):
        key = None
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "extra" and isinstance(node.slice, ast.Constant):
            key = node.slice.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "get" and isinstance(node.func.value, ast.Attribute) \
                and node.func.value.attr == "extra" and node.args \
                and isinstance(node.args[0], ast.Constant):
            key = node.args[0].value
        if key == "devices":
            found.append(f"{node.lineno} {ast.unparse(node)}")
    return found


def test_devices_are_read_from_their_typed_field():
    """An instance's or profile's devices are ``Instance.devices``/``Resource.devices``, not
    a key of ``extra`` that the UI would read for its logic."""
    offenders = [f"{path.relative_to(ROOT)}:{use}" for top in ("tui", "backends")
                 for path in (ROOT / top).rglob("*.py")
                 for use in _extra_devices_reads(path.read_text())]
    assert offenders == []
    assert _extra_devices_reads('d = dict(inst.extra.get("devices") or {})')
    assert _extra_devices_reads('d = full.extra["devices"]')
    assert _extra_devices_reads('d = inst.devices') == []


def test_the_ui_makes_backends_in_one_place():
    """Every backend the UI makes comes from ``backend_factory`` (tui/services/supervisor.py),
    with its kind's settings from the configuration: no second way that forgets them."""
    makers = [f"{path.relative_to(ROOT)}:{node.lineno}"
              for path in (ROOT / "tui").rglob("*.py")
              for node in ast.walk(ast.parse(path.read_text()))
              if _called(node) in ("get_backend", "backend_class")]
    assert [m.split(":")[0] for m in makers] == ["tui/services/supervisor.py"], makers
