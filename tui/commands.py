"""Command palette (``ctrl+p``): every action the action table allows now, such as
"Stop lab2:r1", "Import a backup onto lab1…" or "New instance…"."""

from __future__ import annotations

from typing import Callable, Protocol

from textual.command import DiscoveryHit, Hit, Hits, Provider


class PaletteSource(Protocol):
    """The screen that knows the palette's entries (the main screen)."""

    def palette_commands(self) -> list[tuple[str, str, Callable[[], object]]]: ...


class InstanceCommands(Provider):
    """One command per action, instance and remote the table allows right now."""

    def _commands(self) -> list[tuple[str, str, Callable[[], object]]]:
        source: PaletteSource | None = self.app.main_screen  # type: ignore[attr-defined]
        return source.palette_commands() if source is not None else []

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, help_text, callback in self._commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), callback, text=text, help=help_text)

    async def discover(self) -> Hits:
        for text, help_text, callback in self._commands()[:40]:
            yield DiscoveryHit(text, callback, text=text, help=help_text)
