"""The services are parts that are handed what they use, not mixins sharing attributes.

In ``tui/services/`` (the inventory and its parts, docs/ARCHITECTURE.md "The inventory"):

- no class derives from another class of ``tui/services/``: a part receives the shared
  state (and the other parts it calls) in its constructor;
- a class with no base uses on ``self`` only what it defines: its methods and class
  attributes, and what its methods assign to ``self`` (an annotation alone declares nothing,
  but on a dataclass, whose fields they are): a mixin's ``backends: dict[...]``, filled in
  by the class that mixes it in, is an attribute it neither defines nor receives;
- nothing reads or writes another object's ``_name``: only ``self._name``/``cls._name``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ROOT / "tui" / "services"


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return _name(node.func)
    return ""


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def _defined(cls: ast.ClassDef) -> set[str]:
    """What ``cls`` defines: methods, class attributes (annotated ones only on a dataclass),
    and every ``self.x`` its methods assign."""
    dataclass = any(_name(d) == "dataclass" for d in cls.decorator_list)
    names: set[str] = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and (
                node.value is not None or dataclass):
            names.add(node.target.id)
    for node in ast.walk(cls):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        names |= {t.attr for t in targets if isinstance(t, ast.Attribute) and _is_self(t.value)}
    return names


def offenders(source: str, where: str, service_classes: set[str]) -> list[str]:
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                if _name(base) in service_classes:
                    found.append(f"{where}:{node.lineno} {node.name} derives from "
                                 f"{_name(base)}")
            if not [b for b in node.bases if _name(b) != "object"]:
                defined = _defined(node)
                for use in ast.walk(node):
                    if isinstance(use, ast.Attribute) and _is_self(use.value) \
                            and use.attr not in defined and not _dunder(use.attr):
                        found.append(f"{where}:{use.lineno} {node.name} uses self.{use.attr}, "
                                     "which it neither defines nor receives")
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not _dunder(node.attr) and not _is_self(node.value):
            found.append(f"{where}:{node.lineno} {ast.unparse(node)}: another object's "
                         "private name")
    return sorted(found, key=lambda line: int(line.split(":")[1].split()[0]))


def _service_classes() -> set[str]:
    return {n.name for p in SERVICES.rglob("*.py") for n in ast.walk(ast.parse(p.read_text()))
            if isinstance(n, ast.ClassDef)}


def test_services_are_parts_handed_what_they_use():
    ours = _service_classes()
    found = []
    for path in sorted(SERVICES.rglob("*.py")):
        found += offenders(path.read_text(), str(path.relative_to(ROOT)), ours)
    assert found == []


MIXIN = '''
class Sampling:
    backends: dict
    async def sample(self, name):
        return self.backends.get(name)

class Inventory(Sampling):
    def __init__(self):
        self.backends = {}

class Members:
    def __init__(self, inventory):
        self.inventory = inventory
    def saw(self, remote):
        self.inventory._notify(remote, set())
'''

PARTS = '''
from dataclasses import dataclass

@dataclass
class Status:
    listed: bool = False
    def mark(self):
        self.listed = True

class Sampler:
    def __init__(self, state):
        self.state = state
        self._seen = set()
    def sample(self, name):
        self._seen.add(name)
        return self.state.backends.get(name)
'''


def test_the_rule_catches_mixins_and_private_reads():
    found = offenders(MIXIN, "x.py", {"Sampling", "Inventory", "Members"})
    assert found == [
        "x.py:5 Sampling uses self.backends, which it neither defines nor receives",
        "x.py:7 Inventory derives from Sampling",
        "x.py:15 self.inventory._notify: another object's private name",
    ]
    assert offenders(PARTS, "y.py", {"Status", "Sampler"}) == []
