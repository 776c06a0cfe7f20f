"""The launch wizard's questions about the chosen source: what the source itself declares
(:class:`backends.create_models.SourceField`: a path on this machine or on the remote's host, a
line of text, a choice), drawn in order under the list of sources, checked as they are
typed and turned into the request. The wizard knows no source kinds: a backend's source
says what it needs, and the answers go where its fields say (``""``: the source's
``value``, any other key: ``CreateRequest.options``).

The widgets of a source are mounted when it is highlighted and removed when another one
is; what was typed for each source is kept until the wizard asks another remote."""

from __future__ import annotations

import os
import re
from dataclasses import replace

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Input, Select

from backends.create_models import CreateSource, SourceField

from ..format import external, printable
from ..widgets.plain import PlainInput, PlainLabel
from .paths import PathInput


def field_id(key: str) -> str:
    """The widget id of the field that answers ``key`` (``""``, the source's own value:
    ``wizard-field-value``)."""
    return "wizard-field-" + (re.sub(r"[^A-Za-z0-9_-]", "_", key) or "value")


class FieldsHolder(Vertical):
    """Where the chosen source's fields are drawn (nothing at all for a source with none)."""

    DEFAULT_CSS = """
    FieldsHolder {
        height: auto;
        & > .-fields { height: auto; }
    }
    """


class FieldRow(Horizontal):
    """One field: its label, then its input or choice."""

    DEFAULT_CSS = """
    FieldRow {
        height: auto;
        & > .-label { width: 16; padding: 1 1 0 0; text-style: bold; }
        & > Input, & > Select { width: 1fr; }
    }
    """

    def __init__(self, field: SourceField, widget: Widget) -> None:
        super().__init__()
        self.field = field
        self.widget = widget

    def compose(self) -> ComposeResult:
        yield PlainLabel(self.field.label, classes="-label")
        yield self.widget


def _widget(field: SourceField, answer: str) -> Widget:
    wid = field_id(field.key)
    if field.choices:
        return Select([(external(label), value) for value, label in field.choices],
                      value=answer, allow_blank=False, id=wid)
    kind = PathInput if field.path == "local" else PlainInput  # (completes local paths)
    return kind(answer, placeholder=printable(field.placeholder), id=wid)


def _default(field: SourceField) -> str:
    values = [value for value, _label in field.choices]
    if values:
        return field.default if field.default in values else values[0]
    return field.default


class SourceFields:
    """The chosen source's fields: their widgets (in ``holder``) and every answer."""

    def __init__(self) -> None:
        self.source: CreateSource | None = None
        self.index = -1
        self.widgets: dict[str, Widget] = {}
        """key → the widget that answers it (the chosen source's)."""
        self._answers: dict[tuple[int, str], str] = {}

    def forget(self) -> None:
        """Another remote's sources: nothing typed so far applies, and the next
        :meth:`show` draws anew (also when that remote offers no source at all)."""
        self._answers.clear()
        self.source, self.index = None, -2

    def show(self, holder: FieldsHolder, index: int, source: CreateSource | None) -> None:
        """Draw ``source``'s fields (the ``index``-th source) in ``holder``, in place of
        the last source's."""
        if source is self.source and index == self.index:
            return
        self.source, self.index = source, index
        holder.remove_children()
        self.widgets = {}
        if source is None or not source.fields:
            return
        rows = []
        for field in source.fields:
            widget = _widget(field, self.answer(field))
            self.widgets[field.key] = widget
            rows.append(FieldRow(field, widget))
        # a set of its own: the last one's widgets (same ids) are still being removed
        holder.mount(Vertical(*rows, classes="-fields"))

    def answer(self, field: SourceField) -> str:
        return self._answers.get((self.index, field.key), _default(field))

    def changed(self, control: Widget) -> bool:
        """Keep what ``control`` holds if it is one of the fields (True)."""
        for key, widget in self.widgets.items():
            if widget is control:
                value = control.value if isinstance(control, (Input, Select)) else ""
                self._answers[(self.index, key)] = str(value) if isinstance(value, str) else ""
                return True
        return False

    def _text(self, field: SourceField) -> str:
        text = self.answer(field).strip()
        return os.path.expanduser(text) if field.path == "local" and text else text

    def problem(self) -> tuple[SourceField, str] | None:
        """The first field that keeps the step from being done, and why in words."""
        for field in self.source.fields if self.source else ():
            typed = self.answer(field).strip()
            if not typed:
                if field.required:
                    return field, (f"{field.label}: give its path." if field.path
                                   else f"{field.label}: this is needed.")
                continue
            values = [value for value, _label in field.choices]
            if values and typed not in values:
                return field, f"{field.label}: '{typed}' is not one of the choices."
            if field.path == "local":
                path = self._text(field)
                if not os.path.exists(path):
                    return field, f"{field.label}: no such file on this machine: {typed}"
                if not (os.path.isfile(path) or os.path.isdir(path)):
                    return field, f"{field.label}: {typed} is not a regular file."
        return None

    def first_to_fill(self) -> Widget | None:
        """The widget of the field with a problem, else of the first field."""
        found = self.problem()
        if found is not None:
            return self.widgets.get(found[0].key)
        return next(iter(self.widgets.values()), None)

    def apply(self, source: CreateSource) -> tuple[CreateSource, dict[str, str]]:
        """``source`` with its value answered, and the options its other fields answer
        (an optional field left empty is not sent)."""
        options: dict[str, str] = {}
        for field in source.fields if source is self.source else ():
            text = self._text(field)
            if field.key == "":
                source = replace(source, value=text)
            elif text:
                options[field.key] = text
        return source, options

    def rows(self) -> list[tuple[str, str]]:
        """The summary's ``(label, value)`` of each field, a choice by its label."""
        out = []
        for field in self.source.fields if self.source else ():
            text = self._text(field)
            shown = dict(field.choices).get(text, text) if field.choices else text
            out.append((field.label, shown or "none"))
        return out
