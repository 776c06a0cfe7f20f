"""corral's terminal UI (Textual). Drives ``backends`` without knowing which it has."""

from backends import __version__

__all__ = ["__version__"]
