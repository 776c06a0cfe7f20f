"""Local path fields that complete: ``Tab`` completes as a shell does (the common prefix
of the matching names, ``/`` after a directory; with nothing to complete it moves on),
and the first match is suggested as you type (``→`` or ``End`` takes it)."""

from __future__ import annotations

import os

from textual.binding import Binding
from textual.suggester import Suggester

from ..widgets.plain import PlainInput


def matches(value: str) -> list[str]:
    """Paths starting with ``value`` (``~`` expanded), directories ending in ``/``."""
    expanded = os.path.expanduser(value)
    folder, stem = os.path.split(expanded)
    try:
        names = sorted(n for n in os.listdir(folder or ".") if n.startswith(stem)
                       and (stem.startswith(".") or not n.startswith(".")))
    except OSError:
        return []
    out = []
    for name in names:
        path = os.path.join(folder, name)
        shown = value[: len(value) - len(stem)] + name
        out.append(shown + ("/" if os.path.isdir(path) else ""))
    return out


def complete(value: str) -> str:
    """What ``Tab`` turns ``value`` into (itself when nothing matches)."""
    found = matches(value)
    if not found:
        return value
    return os.path.commonprefix(found) if len(found) > 1 else found[0]


class PathSuggester(Suggester):
    """Suggests the first local path that starts with what was typed."""

    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=True)

    async def get_suggestion(self, value: str) -> str | None:
        if not value:
            return None
        found = matches(value)
        return found[0] if found else None


class PathInput(PlainInput):
    """An input for a local path: ``Tab`` completes, the first match is suggested."""

    BINDINGS = [Binding("tab", "complete", "Complete", show=False)]

    def __init__(self, value: str = "", **kwargs) -> None:
        super().__init__(value, suggester=PathSuggester(), **kwargs)

    def action_complete(self) -> None:
        """Complete; with nothing (more) to complete, Tab moves on as it does elsewhere."""
        done = complete(self.value)
        if done == self.value:
            self.screen.focus_next()
            return
        self.value = done
        self.cursor_position = len(done)
