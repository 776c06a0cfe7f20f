"""Colours and the global stylesheet. Holds no logic beyond naming them."""

from pathlib import Path

from .palette import BUILTIN_THEMES, CORRAL_DARK, CORRAL_LIGHT, DEFAULT_VARIABLES

STYLESHEET = Path(__file__).with_name("app.tcss")

__all__ = ["BUILTIN_THEMES", "CORRAL_DARK", "CORRAL_LIGHT", "DEFAULT_VARIABLES", "STYLESHEET"]
