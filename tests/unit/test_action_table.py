"""One action table (``tui/actions.py``): a key and a binding id name one action on each
screen or widget the table binds, and the lifecycle verbs' names are written in one place
(:class:`tui.actions.Verb`), which the rest of ``tui/`` imports."""

from __future__ import annotations

import ast
from pathlib import Path

from tui.actions import ACTIONS, BY_NAME, BY_VIEW, Scope, Verb, bindings, row_bindings
from tui.views.pane import ResourcePane

ROOT = Path(__file__).resolve().parents[2]

NOT_YET = {
    "tui/services/inventory.py": "Inventory.act maps each verb to the backend's method by "
                                 "its name (left to the module's owner for now)",
}
"""Modules still spelling the verbs themselves, with the reason."""

CALLS_TAKING_A_VERB = {"act": 1, "run_verb": 1, "run_marked": 1, "refusal": 1}
"""Functions whose argument at this position is a lifecycle verb."""
TABLES_BY_VERB = {"PENDING", "VERB_CAPABILITY"}


def _clashes(named: list[tuple[str, str, str]]) -> list[str]:
    """(key(s), binding id, action) triples: a key or an id naming two actions."""
    problems = []
    keys: dict[str, str] = {}
    ids: dict[str, str] = {}
    for key_list, binding_id, action in named:
        for key in (k.strip() for k in key_list.split(",") if k.strip()):
            if keys.setdefault(key, action) != action:
                problems.append(f"key {key!r}: {keys[key]} and {action}")
        if binding_id and ids.setdefault(binding_id, action) != action:
            problems.append(f"id {binding_id!r}: {ids[binding_id]} and {action}")
    return problems


def test_names_are_unique():
    assert len(BY_NAME) == len(ACTIONS)
    rows = [a for a in ACTIONS if a.scope is Scope.ROWS]
    assert len(BY_VIEW) == len(rows) > 20  # one entry per (view, verb)
    assert all(a.view and a.flow is not None for a in rows)


def test_a_key_and_an_id_name_one_action_per_screen():
    main = bindings(Scope.INSTANCE, Scope.REMOTE, Scope.VIEW, Scope.CONSOLE)
    assert len(main) > 25
    assert _clashes([(b.key, b.id or "", b.action) for b in main]) == []
    snapshots = [(a.key, a.binding_id, a.action) for a in ACTIONS
                 if a.scope is Scope.SNAPSHOT]
    assert len(snapshots) == 5 and _clashes(snapshots) == []
    # the views' pane: a verb has the same key and id in every view, and the pane's own
    # keys (marks, details, refresh) are not a verb's
    verbs = [(a.key, a.binding_id, a.action) for a in ACTIONS if a.scope is Scope.ROWS]
    assert _clashes(verbs) == []
    pane = [(b.key, b.id or "", b.action) for b in ResourcePane.BINDINGS]
    assert _clashes(pane) == []
    assert {b.action for b in row_bindings()} <= {b.action for b in ResourcePane.BINDINGS}


def test_the_clash_check_catches_a_key_bound_twice():
    assert _clashes([("P", "instance.profiles", "edit_profiles"),
                     ("y,P", "console.screenshot", "screenshot")]) == [
        "key 'P': edit_profiles and screenshot"]
    assert _clashes([("a", "x.one", "one"), ("b", "x.one", "two")]) == [
        "id 'x.one': one and two"]


def test_the_lifecycle_actions_are_the_verbs():
    for verb in Verb:
        action = BY_NAME[verb]
        assert isinstance(action.name, Verb) and action.bulk and action.flow is not None
    # the bulk actions of the instance table: the verbs and pause (freeze or unfreeze)
    assert {a.name for a in ACTIONS if a.bulk and a.scope is Scope.INSTANCE} == \
        {*Verb, "pause"}


def _spelt_verbs(source: str) -> list[str]:
    """Where ``source`` writes a lifecycle verb's name itself: a string argument of a call
    that takes a verb, a string key of a table by verb, a dict literal keyed by verb
    names, or "freeze"/"unfreeze" anywhere (they mean nothing else)."""
    names = {v.value for v in Verb}
    found = []

    def verb_text(node: ast.AST) -> bool:
        return isinstance(node, ast.Constant) and node.value in names

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and node.value in (Verb.FREEZE.value,
                                                            Verb.UNFREEZE.value):
            found.append(f"line {node.lineno}: {node.value!r}")
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else \
                func.id if isinstance(func, ast.Name) else ""
            at = CALLS_TAKING_A_VERB.get(called)
            if at is not None and len(node.args) > at and verb_text(node.args[at]):
                found.append(f"line {node.lineno}: {called}({node.args[at].value!r})")
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                and node.value.id in TABLES_BY_VERB and verb_text(node.slice):
            found.append(f"line {node.lineno}: {node.value.id}[{node.slice.value!r}]")
        elif isinstance(node, ast.Dict) and sum(verb_text(k) for k in node.keys
                                                if k is not None) >= 2:
            found.append(f"line {node.lineno}: a dict keyed by verb names")
    return found


def test_every_verb_name_in_tui_comes_from_the_one_place():
    problems = []
    for path in sorted((ROOT / "tui").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "tui/actions.py" or rel in NOT_YET:
            continue
        problems += [f"{rel} {where}" for where in _spelt_verbs(path.read_text())]
    assert problems == [], "use tui.actions.Verb: " + "; ".join(problems)
    for rel in NOT_YET:
        assert (ROOT / rel).exists(), f"{rel} is gone: take it off NOT_YET"


def test_the_verb_check_catches_each_spelling():
    assert _spelt_verbs("inv.act(ref, 'stop', 'stopping…')") == ["line 1: act('stop')"]
    assert _spelt_verbs("await run_verb(ctx, 'start')") == ["line 1: run_verb('start')"]
    assert _spelt_verbs("x = PENDING['delete']") == ["line 1: PENDING['delete']"]
    assert _spelt_verbs("T = {'start': 1, 'stop': 2}") == ["line 1: a dict keyed by verb names"]
    assert _spelt_verbs("label = 'freeze'") == ["line 1: 'freeze'"]
    # other meanings of the same words are left alone
    assert _spelt_verbs("if mode == 'stop': bulk.confirm(app, 'delete', names)") == []
    assert _spelt_verbs("inv.act(ref, Verb.STOP, PENDING[Verb.STOP])") == []
