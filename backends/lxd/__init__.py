"""LXD and Incus backend (one implementation; the differences are decided from the
server's ``environment.server`` and ``api_extensions``)."""

from .backend import IncusBackend, LXDBackend

__all__ = ["LXDBackend", "IncusBackend"]
