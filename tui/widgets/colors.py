"""Theme colours for Rich styles built in code (table cells)."""

from __future__ import annotations

from weakref import WeakKeyDictionary

from textual.app import App
from textual.color import Color

_resolved: WeakKeyDictionary[App, tuple[object, dict[str, str]]] = WeakKeyDictionary()
"""Per app: the theme the colours were resolved for, and the colours resolved so far.
Building a theme's CSS variables costs a few milliseconds, and the remote pane asked for
its error colour after every sample (every few seconds at idle)."""


def theme_colors(app: App, names: list[str]) -> dict[str, str]:
    """Resolve theme variables to colours. Textual's own themes know nothing of corral's
    variables, whose defaults refer to other variables (``$success``): follow those."""
    theme = app.current_theme
    cached = _resolved.get(app)
    if cached is None or cached[0] is not theme:
        cached = _resolved[app] = (theme, {})
    known = cached[1]
    missing = [name for name in names if name not in known]
    if missing:
        known.update(_resolve(app.get_css_variables(), missing))
    return {name: known[name] for name in names}


def _resolve(variables: dict[str, str], names: list[str]) -> dict[str, str]:
    out = {}
    for name in names:
        value = variables.get(name, "")
        seen = 0
        while value.startswith("$") and seen < 8:
            value = variables.get(value[1:], "")
            seen += 1
        try:
            out[name] = Color.parse(value.split()[0]).hex6 if value else ""
        except Exception:  # a colour Rich cannot use: fall back to default
            out[name] = ""
    return out
