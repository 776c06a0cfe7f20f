"""Rows of the resource views: one :class:`Row` per profile, network, pool, volume,
project, image, operation or remote, built from what the backends return, and the ``/``
filter over them (words, ``!negation``, ``column=value``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from backends.models import ImageInfo, Operation, Resource, ResourceKind

from .. import format as fmt
from ..services.status import RemoteStatus, state_word


@dataclass(frozen=True)
class Row:
    """One row: a unique ``key``, its ``remote``, its ``name`` and the cells by column key.

    ``obj`` is what the row was made from (a Resource, ImageInfo, Operation, status)."""

    key: str
    remote: str
    name: str
    cells: tuple[tuple[str, str], ...]
    kind: ResourceKind | None = None
    parent: str = ""
    read_only: bool = False
    obj: Any = field(default=None, compare=False, hash=False)

    def cell(self, column: str) -> str:
        if column == "name":
            return self.name
        if column == "remote":
            return self.remote
        for k, v in self.cells:
            if k == column:
                return v
        return ""


def from_resource(r: Resource) -> Row:
    return Row(r.key, r.remote, r.name, r.fields + (("description", r.description),),
               kind=r.kind, parent=r.parent, read_only=r.read_only, obj=r)


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value else "never"


def from_image(remote: str, image: ImageInfo) -> Row:
    cells = (("aliases", ", ".join(image.aliases)), ("fingerprint", image.fingerprint[:12]),
             ("type", image.type), ("size", fmt.size(image.size) if image.size else ""),
             ("public", "yes" if image.public else "no"),
             ("cached", "yes" if image.cached else "no"),
             ("last_used", _when(image.last_used_at)), ("description", image.description))
    name = image.aliases[0] if image.aliases else image.fingerprint[:12]
    return Row(f"{remote}\x1f{image.fingerprint}", remote, name, cells,
               kind=ResourceKind.IMAGE, obj=image)


def from_operation(remote: str, op: Operation) -> Row:
    cells = (("status", op.status), ("instances", ", ".join(op.instances)),
             ("progress", op.progress), ("cancel", "yes" if op.may_cancel else "no"),
             ("error", op.error))
    return Row(f"{remote}\x1f{op.id}", remote, op.description or op.id[:8], cells, obj=op)


def from_status(status: RemoteStatus) -> Row:
    r = status.remote
    info = status.server
    cells = (("kind", r.kind), ("state", state_word(status)),
             ("project", r.project), ("address", r.address),
             ("server", f"{info.server} {info.version}".strip() if info else ""),
             ("message", status.message))
    return Row(r.name, r.name, r.name, cells, obj=status)


@dataclass(frozen=True)
class Word:
    column: str | None
    value: str
    negate: bool = False


def parse_filter(text: str) -> list[Word]:
    out = []
    for word in text.split():
        negate = word.startswith("!")
        word = word[1:] if negate else word
        if not word:
            continue
        column, eq, value = word.partition("=")
        out.append(Word(column.lower(), value.lower(), negate) if eq
                   else Word(None, word.lower(), negate))
    return out


def matches(words: list[Word], row: Row, columns: Mapping[str, str]) -> bool:
    """Every word holds: a plain word is in some cell, ``col=value`` in that column
    (``col`` is a column key or label)."""
    for w in words:
        if w.column is None:
            hit = w.value in row.name.lower() or w.value in row.remote.lower() or \
                any(w.value in v.lower() for _, v in row.cells)
        else:
            key = next((k for k, label in columns.items()
                        if w.column in (k, label.lower())), w.column)
            hit = w.value in row.cell(key).lower()
        if hit == w.negate:
            return False
    return True
