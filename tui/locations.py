"""XDG locations, each made on demand."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
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


def cache_dir(env: Mapping[str, str]) -> Path:
    """``$XDG_CACHE_HOME/corral`` (the inventory cache and the last frame)."""
    base = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"),
                                                     ".cache")
    return Path(base) / "corral"


def config_digest(config_path: Path) -> str:
    """Names what belongs to one configuration file (another config never sees it)."""
    return hashlib.sha256(str(Path(config_path).expanduser().absolute()).encode()
                          ).hexdigest()[:16]
