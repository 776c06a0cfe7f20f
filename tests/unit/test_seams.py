"""Third-party internals behind one seam: a private name of Textual, pylxd, pyte or any
other library corral uses is named only in ``tui/_textual_compat.py`` or
``backends/lxd/_pylxd_compat.py`` (docs/ARCHITECTURE.md, "Third-party internals").

The rule, for every module of ``tui/`` and ``backends/`` but those two:

- ``x._name`` (one leading underscore, or two without trailing ones; not a dunder or a
  sunder such as Enum's ``_missing_``) is allowed only when ``_name`` is corral's own:
  defined somewhere in corral's code (a function, class, module or class attribute, or an
  attribute assigned as ``obj._name = …``). The names of the namedtuple API (``_replace``…,
  ruff's own exceptions) and ``os._exit`` (documented) are allowed too. The same holds for
  ``getattr``/``setattr``/``hasattr``/``delattr`` with a literal name.
- In a class that derives from a class not corral's own (its bases resolved through the
  imports, corral's own classes followed), neither ``self._name``/``cls._name``/
  ``super()._name``, nor a method or class attribute ``_name``, may be a private name of
  one of those classes (their attributes, and what their source assigns to ``self``):
  overriding or reading a library's private member from a subclass is a use of it too.
  Public methods may be overridden (pyte's ``Screen`` is, widely).
- No ``import``/``from … import`` of a private module or name of another package, and no
  string naming one (``sys.modules.get("textual.widgets._text_area")``).

Ruff's SLF001 (``pyproject.toml``) is on everywhere but the two seams and the tests, so
the editor says the same as this test for ``other._name``; this test adds what SLF001
cannot see (subclasses, imports, names defined nowhere in corral).
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import inspect
import textwrap
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WALKED = ("tui", "backends")
OURS = ("tui", "backends", "themes")
SEAMS = {"tui/_textual_compat.py", "backends/lxd/_pylxd_compat.py"}

DOCUMENTED = {"_make", "_asdict", "_replace", "_fields", "_field_defaults"}
"""The namedtuple API: public despite the underscore (ruff's flake8-self default too)."""
DOCUMENTED_ON = {("os", "_exit")}
"""Documented module functions with a leading underscore."""
LIBRARY_ROOTS = ("textual", "textual_image", "rich", "pylxd", "pyte", "requests", "urllib3",
                 "websockets", "ws4py", "qemu", "libvirt", "PIL", "yaml", "cryptography",
                 "humanize")
"""Packages whose private module paths are looked for in strings too."""

EXCEPTIONS: dict[tuple[str, str], str] = {
    ("tui/logfile.py", "_open"):
        "the standard library, not a dependency: logging offers no other way to choose how "
        "a file handler opens (and reopens, on rollover) its file; FileHandler._open has "
        "been that hook since Python 2.6",
}
"""Private uses left outside the seams, each with its reason (a stale one fails too)."""


def private(name: str) -> bool:
    if not name.startswith("_") or name == "_":
        return False
    if name.startswith("__"):
        return not name.endswith("__")  # a dunder is public; __x is mangled, private
    return not (name.endswith("_") and len(name) > 2)  # a sunder (_missing_) is public


def _is_self(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id in ("self", "cls")) or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        and node.func.id == "super")


def _literal_attr(node: ast.Call) -> str | None:
    """The attribute a ``getattr(obj, "_name", …)`` family call names, if literal."""
    if isinstance(node.func, ast.Name) and node.func.id in (
            "getattr", "setattr", "hasattr", "delattr") and len(node.args) >= 2:
        name = node.args[1]
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            return name.value
    return None


def _module_name(path: str) -> str:
    parts = path.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_ours(module: str) -> bool:
    return module.split(".")[0] in OURS


@functools.cache
def _library_privates(cls: type) -> frozenset[str]:
    """Private names of one library class: its attributes, and those its source assigns
    to ``self`` (instance attributes)."""
    names = {n for n in vars(cls) if private(n)}
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):  # built in, or no source
        return frozenset(names)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                and isinstance(node.value, ast.Name) and node.value.id == "self":
            if private(node.attr):
                names.add(node.attr)
    return frozenset(names)


class Code:
    """corral's modules (path -> source) and what can be said of them."""

    def __init__(self, sources: dict[str, str]) -> None:
        self.trees = {path: ast.parse(src, path) for path, src in sources.items()}
        self.modules = {_module_name(p): p for p in self.trees}
        self.classes: dict[str, dict[str, ast.ClassDef]] = {}
        self.imports: dict[str, dict[str, tuple[str, str | None]]] = {}
        for path, tree in self.trees.items():
            name = _module_name(path)
            self.classes[name] = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
            self.imports[name] = self._imports(name, path, tree)
        self.unresolved: list[str] = []

    @staticmethod
    def _imports(module: str, path: str, tree: ast.Module) -> dict[str, tuple[str, str | None]]:
        """Local name -> (module, attribute or None for the module itself), for every
        import of the module (in functions too)."""
        out: dict[str, tuple[str, str | None]] = {}
        package = module.split(".") if path.endswith("__init__.py") else module.split(".")[:-1]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        out[a.asname] = (a.name, None)
                    else:
                        root = a.name.split(".")[0]
                        out[root] = (root, None)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[:len(package) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for a in node.names:
                    out[a.asname or a.name] = (source, a.name)
        return out

    # -- what a class derives from --------------------------------------------------------

    def _resolve(self, module: str, expr: ast.expr):
        """What a base expression in ``module`` names: ("ours", module, class name), a
        library object, or None."""
        if isinstance(expr, ast.Subscript):
            return self._resolve(module, expr.value)
        if isinstance(expr, ast.Attribute):
            owner = self._resolve(module, expr.value)
            if isinstance(owner, tuple) and owner[0] == "module":
                return self._attribute(owner[1], expr.attr)
            if inspect.ismodule(owner) and not hasattr(owner, expr.attr):  # not loaded yet
                return self._library(f"{owner.__name__}.{expr.attr}")
            return getattr(owner, expr.attr, None) if owner is not None else None
        if not isinstance(expr, ast.Name):
            return None
        return self._attribute(module, expr.id)

    def _attribute(self, module: str, name: str, depth: int = 0):
        if depth > 20:
            return None
        if _is_ours(module):
            if module in self.classes and name in self.classes[module]:
                return ("ours", module, name)
            target = self.imports.get(module, {}).get(name)
            if target is None:
                if f"{module}.{name}" in self.modules:
                    return ("module", f"{module}.{name}")
                return getattr(builtins, name, None)
            source, attr = target
            if attr is None:
                return ("module", source) if _is_ours(source) else self._library(source)
            if f"{source}.{attr}" in self.modules:
                return ("module", f"{source}.{attr}")
            return self._attribute(source, attr, depth + 1)
        library = self._library(module)
        return getattr(library, name, None) if library is not None else None

    @staticmethod
    def _library(module: str):
        try:
            return importlib.import_module(module)
        except ImportError:
            return None

    def library_bases(self, module: str, node: ast.ClassDef, seen=()) -> list[type]:
        """The classes not corral's own that ``node`` derives from, all the way up."""
        out: list[type] = []
        for base in node.bases:
            target = self._resolve(module, base)
            if isinstance(target, tuple) and target[0] == "ours":
                if target[1:] not in seen:
                    parent = self.classes[target[1]][target[2]]
                    out += self.library_bases(target[1], parent, (*seen, target[1:]))
            elif isinstance(target, type):
                out += [c for c in target.__mro__
                        if c is not object and not _is_ours(c.__module__)]
            elif target in (typing.NamedTuple, typing.TypedDict):
                pass  # a tuple or a dict: their underscored names are the documented API
            else:
                self.unresolved.append(f"{self.modules[module]}:{node.lineno} class "
                                       f"{node.name}: base {ast.unparse(base)}")
        return out

    # -- the findings -----------------------------------------------------------------------

    def findings(self) -> list[tuple[str, int, str, str]]:
        """(path, line, name, what) of every private use outside the seams."""
        own: set[str] = set()
        found: list[tuple[str, int, str, str]] = []
        for path, tree in self.trees.items():
            if path not in SEAMS:
                self._subclass_uses(path, tree, own, found)
        for path, tree in self.trees.items():
            if path not in SEAMS:
                found += self._other_uses(path, tree, own)
        return sorted(set(found))

    def _subclass_uses(self, path: str, tree: ast.Module, own: set[str],
                       found: list) -> None:
        """Private names of library classes used from corral's subclasses; the names
        corral defines go into ``own``."""
        module = _module_name(path)

        def body_names(body: list[ast.stmt]) -> list[tuple[ast.AST, str]]:
            out: list[tuple[ast.AST, str]] = []
            for stmt in body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    out.append((stmt, stmt.name))
                targets = stmt.targets if isinstance(stmt, ast.Assign) else (
                    [stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else [])
                for target in targets:
                    out += [(n, n.id) for n in ast.walk(target) if isinstance(n, ast.Name)]
            return out

        def walk_class(node: ast.ClassDef) -> None:
            theirs: dict[str, str] = {}
            for cls in self.library_bases(module, node):
                for name in _library_privates(cls):
                    theirs.setdefault(name, f"{cls.__module__}.{cls.__qualname__}")
            for child, name in body_names(node.body):
                if name in theirs and not isinstance(child, ast.ClassDef):
                    found.append((path, child.lineno, name, f"overrides {theirs[name]}"))
                elif private(name):
                    own.add(name)
            stack = [c for c in node.body if not isinstance(c, ast.ClassDef)]
            while stack:
                child = stack.pop()
                if isinstance(child, ast.ClassDef):
                    continue  # walked on its own
                stack.extend(ast.iter_child_nodes(child))
                name = None
                if isinstance(child, ast.Attribute) and _is_self(child.value):
                    name = child.attr
                elif isinstance(child, ast.Call) and child.args and _is_self(child.args[0]):
                    name = _literal_attr(child)
                if name is None or not private(name):
                    continue
                if name in theirs:
                    found.append((path, child.lineno, name, f"uses {theirs[name]}"))
                elif isinstance(child, ast.Attribute) and isinstance(child.ctx, ast.Store):
                    own.add(name)

        for _, name in body_names(tree.body):
            if private(name):
                own.add(name)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                walk_class(node)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                    and not _is_self(node.value) and private(node.attr):
                own.add(node.attr)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                    and private(node.name):
                own.add(node.name)

    def _other_uses(self, path: str, tree: ast.Module, own: set[str]) -> list:
        """``other._name`` with a name corral does not define; private imports; strings
        naming a library's private module."""
        out = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and not _is_self(node.value):
                name, owner = node.attr, node.value
            elif isinstance(node, ast.Call) and node.args and not _is_self(node.args[0]):
                name, owner = _literal_attr(node), node.args[0]
            else:
                name = owner = None
            if name is not None and private(name) and name not in own \
                    and name not in DOCUMENTED and not (
                        isinstance(owner, ast.Name) and (owner.id, name) in DOCUMENTED_ON):
                out.append((path, node.lineno, name, f"{ast.unparse(owner)}.{name}"))
            modules: list[tuple[str, str | None]] = []
            if isinstance(node, ast.Import):
                modules = [(a.name, None) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                modules = [(node.module, a.name) for a in node.names]
            for source, attr in modules:
                if _is_ours(source):
                    continue
                parts = source.split(".") + ([attr] if attr else [])
                if any(private(p) for p in parts):
                    out.append((path, node.lineno, ".".join(parts), "import"))
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                parts = node.value.split(".")
                if len(parts) > 1 and parts[0] in LIBRARY_ROOTS and all(
                        p.isidentifier() for p in parts) and any(private(p) for p in parts):
                    out.append((path, node.lineno, node.value, "names a private module"))
        return out


def _sources() -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): p.read_text()
            for top in WALKED for p in sorted((ROOT / top).rglob("*.py"))}


def test_no_private_name_of_a_library_outside_the_seams():
    code = Code(_sources())
    found = code.findings()
    assert code.unresolved == [], "bases this test cannot follow: say what they are"
    left = [f"{p}:{line}: {what} ({name})" for p, line, name, what in found
            if (p, name) not in EXCEPTIONS]
    assert left == [], (
        "a private name of a library outside tui/_textual_compat.py and "
        "backends/lxd/_pylxd_compat.py: put it behind a documented function there")
    stale = set(EXCEPTIONS) - {(p, name) for p, _, name, _ in found}
    assert stale == set(), "exceptions no longer needed: drop them from EXCEPTIONS"


def _sample(source: str, path: str = "tui/sample.py", **more: str) -> list[str]:
    code = Code({path: textwrap.dedent(source), **{
        k.replace("__", "/") + ".py": textwrap.dedent(v) for k, v in more.items()}})
    found = code.findings()
    assert code.unresolved == []
    return sorted(f"{p}:{name}" for p, _, name, _ in found)


def test_a_fresh_private_use_is_caught():
    assert _sample("""
        def rows(table):
            return table._row_locations
    """) == ["tui/sample.py:_row_locations"]
    assert _sample("""
        def keymap(app):
            return getattr(app, "_keymap", {})
    """) == ["tui/sample.py:_keymap"]
    assert _sample("""
        import os
        def env(e: os._Environ) -> None:
            os._exit(0)
    """) == ["tui/sample.py:_Environ"]


def test_a_subclass_may_not_use_or_override_its_librarys_private_members():
    table = """
        from textual.widgets import DataTable

        class Table(DataTable):
            _mine = 0

            def _render_cell(self, *args):
                return super()._render_cell(*args)

            def fill(self):
                self._own_cache = {}
                self._data.clear()
                return self._own_cache, self._mine
    """
    assert _sample(table) == [
        "tui/sample.py:_data", "tui/sample.py:_render_cell", "tui/sample.py:_render_cell"]
    # through a class of corral's own in another module, and a nested class too
    assert _sample("""
        from .sample import Table

        class Wider(Table):
            def grow(self):
                self._require_update_dimensions = True

        def make():
            import requests

            class Adapter(requests.adapters.HTTPAdapter):
                def _private_hook(self):
                    return self._pool_connections
            return Adapter
    """, path="tui/other.py", tui__sample=table.replace("self._data.clear()", "")
    ) == ["tui/other.py:_pool_connections", "tui/other.py:_require_update_dimensions",
          "tui/sample.py:_render_cell", "tui/sample.py:_render_cell"]


def test_private_imports_and_module_names_are_caught():
    assert _sample("""
        import sys
        from textual._xterm_parser import XTermParser
        from textual.widgets import _footer
        from ._textual_compat import FooterKey
        from .other import _helper
        loaded = sys.modules.get("textual.widgets._text_area")
        note = "see textual.widgets for the widgets"
    """) == ["tui/sample.py:textual._xterm_parser.XTermParser",
              "tui/sample.py:textual.widgets._footer",
              "tui/sample.py:textual.widgets._text_area"]


def test_corrals_own_names_and_the_seams_are_allowed():
    assert _sample("""
        class Box:
            def __init__(self):
                self._items = []

        def _helper(box):
            return box._items, box._replace, _helper

        def count(other):
            return len(other._items)
    """) == []
    assert _sample("""
        from textual.widgets import DataTable

        def rows(table: DataTable):
            return table._row_locations

        class Hooks(DataTable):
            def _render_cell(self, *args):
                return self._data
    """, path="tui/_textual_compat.py") == []
