"""The widgets that show text: every ``Static`` and ``Label`` in corral is one of these.

They never read markup and put everything they are given — at construction, through
``update`` or ``content`` — through the text gate (``tui.format.gate``): a file name, a
snapshot comment or a daemon's message with an escape sequence in it shows the sequence
as visible characters instead of sending it to the terminal. ``tests/unit/test_text_gate.py``
keeps ``Static``, ``Label`` and ``Input`` out of the rest of ``tui/``.

An input keeps its value exactly as it is (a path with odd characters can still be pushed)
and shows it through the gate: one visible character for each control character, so the
cursor stays where it is.
"""

from __future__ import annotations

from rich.highlighter import Highlighter
from textual.widgets import Input, Label, Static

from ..format import external_text, gate, printable


class Plain(Static):
    """A ``Static`` for any text: plain, and through the gate."""

    def __init__(self, content="", **options) -> None:
        options["markup"] = False
        super().__init__(gate(content), **options)

    def update(self, content="", *, layout: bool = True) -> None:
        super().update(gate(content), layout=layout)

    # mypy reads neither a base class's property setter nor its fset (a known limit of it).
    @Static.content.setter  # type: ignore[attr-defined]
    def content(self, content) -> None:
        Static.content.fset(self, gate(content))  # type: ignore[attr-defined]


class PlainLabel(Label):
    """A ``Label`` for any text: plain, and through the gate."""

    def __init__(self, content="", **options) -> None:
        options["markup"] = False
        super().__init__(gate(content), **options)

    def update(self, content="", *, layout: bool = True) -> None:
        super().update(gate(content), layout=layout)

    # mypy reads neither a base class's property setter nor its fset (a known limit of it).
    @Label.content.setter  # type: ignore[attr-defined]
    def content(self, content) -> None:
        Label.content.fset(self, gate(content))  # type: ignore[attr-defined]


class _Gate(Highlighter):
    def highlight(self, text) -> None:
        external_text(text)


class PlainInput(Input):
    """An ``Input`` whose value (typed, pasted, filled in from outside) is shown through
    the gate; a suggestion that would need it is not offered."""

    def __init__(self, value: str | None = None, **options) -> None:
        options.setdefault("highlighter", _Gate())
        super().__init__(value, **options)

    def validate__suggestion(self, suggestion: str) -> str:
        return suggestion if printable(suggestion) == suggestion else ""
