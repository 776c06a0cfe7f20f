"""Theme colours for Rich styles built in code (table cells)."""

from __future__ import annotations

from textual.app import App
from textual.color import Color


def theme_colors(app: App, names: list[str]) -> dict[str, str]:
    """Resolve theme variables to colours. Textual's own themes know nothing of corral's
    variables, whose defaults refer to other variables (``$success``): follow those."""
    variables = app.get_css_variables()
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
