"""XDG locations, each made on demand."""

from __future__ import annotations

import os
from pathlib import Path


def _xdg(var: str, default: str) -> Path:
    value = os.environ.get(var)
    return Path(value) if value else Path.home() / default


def config_file() -> Path:
    """``$CORRAL_CONFIG_FILE``, else ``$XDG_CONFIG_HOME/corral/config.toml``."""
    override = os.environ.get("CORRAL_CONFIG_FILE")
    if override:
        return Path(override).expanduser()
    return _xdg("XDG_CONFIG_HOME", ".config") / "corral" / "config.toml"
