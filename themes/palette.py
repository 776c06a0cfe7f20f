"""corral's built-in themes. Semantic status colours are theme variables, so widgets
never name a colour: ``$status-running``, ``$status-stopped``, ``$status-frozen``,
``$status-error``, ``$status-busy``, ``$vm-badge``."""

from __future__ import annotations

from textual.theme import Theme

CORRAL_DARK = Theme(
    name="corral-dark",
    primary="#5FA8D3",
    secondary="#8E7DBE",
    accent="#E0A458",
    foreground="#D8DEE9",
    background="#151A21",
    surface="#1C232C",
    panel="#26303B",
    success="#7BC47F",
    warning="#E5C07B",
    error="#E06C75",
    dark=True,
    variables={
        "status-running": "#7BC47F",
        "status-stopped": "#7F8A99",
        "status-frozen": "#5FA8D3",
        "status-error": "#E06C75",
        "status-busy": "#E5C07B",
        "vm-badge": "#E0A458",
        "footer-key-foreground": "#E0A458",
    },
)

CORRAL_LIGHT = Theme(
    name="corral-light",
    primary="#1F6FA3",
    secondary="#6A4C9C",
    accent="#A35A00",
    foreground="#1E2329",
    background="#F7F8FA",
    surface="#FFFFFF",
    panel="#E6E9EE",
    success="#2E7D32",
    warning="#8A6100",
    error="#B3261E",
    dark=False,
    variables={
        "status-running": "#2E7D32",
        "status-stopped": "#5F6B7A",
        "status-frozen": "#1F6FA3",
        "status-error": "#B3261E",
        "status-busy": "#8A6100",
        "vm-badge": "#A35A00",
        "footer-key-foreground": "#A35A00",
    },
)

BUILTIN_THEMES = (CORRAL_DARK, CORRAL_LIGHT)

DEFAULT_VARIABLES = {
    "status-running": "$success",
    "status-stopped": "$foreground-muted",
    "status-frozen": "$primary",
    "status-error": "$error",
    "status-busy": "$warning",
    "vm-badge": "$accent",
}
"""Defaults for Textual's own themes (which know nothing of corral's variables)."""
