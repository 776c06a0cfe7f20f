"""One key, one action, per screen: a key bound twice in one screen's (or widget's) bindings
runs whichever Textual finds allowed first (``P`` was once both "profiles" and
"screenshot" on the main screen), and binding ids name one binding each."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from textual.binding import Binding
from textual.dom import DOMNode

import tui


def _bindings(cls) -> list[Binding]:
    out = []
    for b in cls.__dict__.get("BINDINGS", []) or []:
        out.append(b if isinstance(b, Binding) else Binding(*b))
    return out


def _classes():
    for info in pkgutil.walk_packages(tui.__path__, "tui."):
        if info.name.endswith("__main__"):
            continue  # (runs corral)
        module = importlib.import_module(info.name)
        for _name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and issubclass(cls, DOMNode):
                yield cls


def test_no_key_is_bound_twice_and_ids_are_unique():
    problems = []
    checked = 0
    for cls in _classes():
        own = _bindings(cls)
        if not own:
            continue
        checked += 1
        keys: dict[str, str] = {}
        ids: dict[str, str] = {}
        for b in own:
            for key in (k.strip() for k in b.key.split(",")):
                if key in keys and keys[key] != b.action:
                    problems.append(f"{cls.__qualname__}: {key!r} is {keys[key]!r} and "
                                    f"{b.action!r}")
                keys[key] = b.action
            if b.id is not None:
                if b.id in ids and ids[b.id] != b.action:
                    problems.append(f"{cls.__qualname__}: id {b.id!r} names {ids[b.id]!r} "
                                    f"and {b.action!r}")
                ids[b.id] = b.action
    assert checked >= 10  # the screens and widgets were found
    assert problems == []


def test_the_check_catches_a_key_bound_twice():
    class Twice(DOMNode):
        BINDINGS = [Binding("P", "profiles"), Binding("P", "screenshot")]

    keys: dict[str, str] = {}
    clash = []
    for b in _bindings(Twice):
        if b.key in keys and keys[b.key] != b.action:
            clash.append(b.key)
        keys[b.key] = b.action
    assert clash == ["P"]
