"""Local LXC containers through the lxc-* tools (no daemon)."""

from .backend import LXCBackend, default_lxcpath, lxc_remotes

__all__ = ["LXCBackend", "default_lxcpath", "lxc_remotes"]
