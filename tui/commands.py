"""Command palette (``ctrl+p``): every action and view by name ("Snapshot", "Networks
view", "New instance… (launch, create)"), then every action the action table allows now
on each instance and remote, such as "Stop lab2:r1" or "Import a backup onto lab1…"."""

from __future__ import annotations

from typing import Callable, Protocol

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content
from textual.fuzzy import Matcher

from .format import printable


Entry = tuple[str, str, Callable[[], object], bool]
"""(text, help, callback, first): ``first`` entries (every action and view by name) rank
above the per-instance and per-remote ones that match as well."""


class PaletteSource(Protocol):
    """The screen that knows the palette's entries (the main screen)."""

    def palette_commands(self) -> list[Entry]: ...


LATER = 0.8
"""The score factor of an entry that is not ``first``."""


class InstanceCommands(Provider):
    """Every action and view by name, then one command per action and instance (or
    remote) the table allows right now."""

    def _commands(self) -> list[Entry]:
        source: PaletteSource | None = self.app.main_screen  # type: ignore[attr-defined]
        return source.palette_commands() if source is not None else []

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, help_text, callback, first in self._commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score if first else score * LATER, _highlight(matcher, text),
                          callback, text=text,
                          help=Content(printable(help_text)))  # type: ignore[arg-type]

    async def discover(self) -> Hits:
        for text, help_text, callback, _first in self._commands()[:40]:
            yield DiscoveryHit(Content(printable(text)), callback, text=text,
                               help=Content(printable(help_text)))  # type: ignore[arg-type]


def _highlight(matcher: Matcher, text: str) -> Content:
    """``matcher.highlight`` on plain text (Textual's reads the entry as markup, and an
    entry names instances and remotes), through the gate (one character for one: the
    offsets stay)."""
    content = Content(printable(text))
    _score, offsets = matcher.fuzzy_search.match(matcher.query, text)
    for offset in offsets:
        if not text[offset].isspace():
            content = content.stylize(matcher.match_style, offset, offset + 1)
    return content
