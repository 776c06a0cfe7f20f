"""The ``/`` filter: words and ``key=value`` terms, one rule for all of them.

Every term keeps the instances whose field *contains* its value (case does not matter):
a plain word is looked for in the name, remote, image and addresses, ``key=value`` in
that one field. ``web status=run type=vm remote=lab !test`` keeps the running VMs on
remotes whose name contains ``lab`` (``lab`` and ``lab2``), whose name, image or address
contains ``web`` and not ``test``. ``location=m2`` keeps the instances on cluster member
``m2``.

What cannot mean anything is refused in words, naming the nearest thing that would:
an unknown key (``stauts=running``: did you mean status?), a known key written with ``:``
(``status:running``), a status or type no instance can have (``status=runing``).
:func:`why_empty` names the term that alone hides every instance (``!s`` where every
image is ``busybox``).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Iterable

from backends.models import Instance, InstanceState, InstanceStatus, InstanceType

KEYS = ("name", "remote", "status", "type", "image", "project", "location", "ipv4", "ip")
_TYPE_ALIASES = {"vm": "vm", "virtual-machine": "vm", "ct": "container",
                 "container": "container"}
_STATUS_ALIASES = {"paused": "frozen"}
_VALUES = {
    "status": tuple(s.value for s in InstanceStatus) + tuple(_STATUS_ALIASES),
    "type": tuple(t.value for t in InstanceType) + ("virtual-machine", "ct"),
}
"""Keys whose values are a closed set: a value contained in none of them is refused."""

PLACEHOLDER = ("filter: words or key=value, each kept where it is contained "
               "(status=run type=vm remote=lab !test)")
"""What the empty filter box says: the one rule, and an example of each kind of term."""


class FilterError(ValueError):
    """A filter the user typed cannot be understood."""


@dataclass(frozen=True)
class Term:
    key: str | None
    value: str
    negate: bool = False

    def __str__(self) -> str:
        return ("!" if self.negate else "") + (f"{self.key}={self.value}" if self.key
                                               else self.value)


def _nearest(word: str, choices: Iterable[str]) -> str | None:
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def _check_value(key: str, value: str) -> None:
    values = _VALUES.get(key)
    if values is None or any(value in v for v in values):
        return
    near = _nearest(value, values)
    hint = f"did you mean {key}={near}? " if near else ""
    raise FilterError(f"no {key} contains '{value}': {hint}"
                      f"({', '.join(v for v in values if v not in ('ct', 'paused'))})")


def parse(text: str) -> list[Term]:
    terms = []
    for word in text.split():
        negate = word.startswith("!")
        if negate:
            word = word[1:]
        if not word:
            continue
        if "=" in word:
            key, _, value = word.partition("=")
            key = key.lower()
            if key not in KEYS:
                near = _nearest(key, KEYS)
                hint = f"did you mean {near}? " if near else ""
                raise FilterError(f"unknown filter key '{key}': {hint}"
                                  f"(keys: {', '.join(KEYS)})")
            value = value.lower()
            _check_value(key, value)
            terms.append(Term(key, value, negate))
        else:
            key, colon, value = word.partition(":")
            if colon and key.lower() in KEYS:
                raise FilterError(f"'{word}' is a plain word: write "
                                  f"{key.lower()}={value} to filter by {key.lower()}")
            terms.append(Term(None, word.lower(), negate))
    return terms


def _field(inst: Instance, state: InstanceState | None, key: str) -> list[str]:
    if key == "name":
        return [inst.name.lower()]
    if key == "remote":
        return [inst.remote.lower()]
    if key == "status":
        return [inst.status.value]
    if key == "type":
        return [inst.type.value]
    if key == "image":
        return [inst.image.lower()]
    if key == "project":
        return [inst.ref.project.lower()]
    if key == "location":
        return [inst.location.lower()]
    return [a.lower() for a in ((state.ipv4 + state.ipv6) if state else ())]


def _where(term: Term, inst: Instance, state: InstanceState | None) -> list[tuple[str, str]]:
    """(field, value) of ``inst`` that contain the term's value."""
    if term.key is None:
        fields = [("name", inst.name), ("remote", inst.remote), ("image", inst.image)]
        fields += [("address", a) for a in _field(inst, state, "ip")]
    else:
        fields = [(term.key, v) for v in _field(inst, state, term.key)]
    value = term.value
    if term.key == "type":
        value = _TYPE_ALIASES.get(value, value)
    elif term.key == "status":
        value = _STATUS_ALIASES.get(value, value)
    return [(k, v) for k, v in fields if value in v.lower()]


def matches(terms: list[Term], inst: Instance, state: InstanceState | None) -> bool:
    for term in terms:
        hit = bool(_where(term, inst, state))
        if hit == term.negate:
            return False
    return True


def why_empty(terms: list[Term], instances: Iterable[Instance],
              states: dict) -> str | None:
    """When one term alone hides every instance, say which and why (None otherwise)."""
    instances = list(instances)
    if not instances:
        return None
    for term in terms:
        if any(matches([term], i, states.get(i.ref)) for i in instances):
            continue
        if not term.negate:
            what = f"'{term.value}'" if term.key is None else f"{term.key} '{term.value}'"
            return f"no instance has {what}" + (" in its name, remote, image or address"
                                                 if term.key is None else "")
        seen: dict[str, set[str]] = {}
        for i in instances:
            for k, v in _where(term, i, states.get(i.ref)):
                seen.setdefault(k, set()).add(v)
        example = "; ".join(f"{k} {', '.join(sorted(vs)[:2])}" for k, vs in seen.items())
        return (f"'{term}' hides every instance: '{term.value}' is in each one's "
                f"{' or '.join(seen)} ({example})")
    return None
