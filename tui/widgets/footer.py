"""The footer, rebuilt only when the keys it shows change."""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer


class QuietFooter(Footer):
    """Textual's footer rebuilds all its keys (a dozen widgets, each styled twice) on every
    bindings update: focus moves, the cursor moving to a row that allows the same verbs,
    the screen coming back. Most of those change nothing shown; here they cost nothing."""

    _shown: tuple | None = None

    def bindings_changed(self, screen: Screen) -> None:
        if self.is_attached and screen is self.screen and screen.app.app_focus:
            shown = tuple(
                (binding.key, binding.key_display, binding.description, binding.action,
                 enabled, tooltip)
                for (_, binding, enabled, tooltip) in screen.active_bindings.values()
                if binding.show
            )
            if shown == self._shown and self._bindings_ready:
                return
            self._shown = shown
        super().bindings_changed(screen)
