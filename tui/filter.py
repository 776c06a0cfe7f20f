"""The ``/`` filter: substring terms and ``key=value`` terms, as ``lxc list`` accepts.

``web status=running type=vm remote=lab2 !test`` keeps running VMs on ``lab2`` whose name,
image or address contains ``web`` and not ``test``. ``location=m2`` keeps the instances on
cluster member ``m2``.
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.models import Instance, InstanceState

KEYS = ("name", "remote", "status", "type", "image", "project", "location", "ipv4", "ip")
_TYPE_ALIASES = {"vm": "vm", "virtual-machine": "vm", "ct": "container",
                 "container": "container"}


class FilterError(ValueError):
    """A filter the user typed cannot be understood."""


@dataclass(frozen=True)
class Term:
    key: str | None
    value: str
    negate: bool = False


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
                raise FilterError(f"unknown filter key '{key}' (use {', '.join(KEYS)})")
            terms.append(Term(key, value.lower(), negate))
        else:
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


def matches(terms: list[Term], inst: Instance, state: InstanceState | None) -> bool:
    for term in terms:
        if term.key is None:
            hay = [inst.name.lower(), inst.remote.lower(), inst.image.lower()]
            hay += _field(inst, state, "ip")
            hit = any(term.value in h for h in hay)
        elif term.key == "type":
            want = _TYPE_ALIASES.get(term.value, term.value)
            hit = inst.type.value == want
        elif term.key in ("remote", "status", "project", "location"):
            hit = any(v == term.value for v in _field(inst, state, term.key))
        else:
            hit = any(term.value in v for v in _field(inst, state, term.key))
        if hit == term.negate:
            return False
    return True
