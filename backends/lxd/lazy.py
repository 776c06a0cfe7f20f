"""pylxd's and requests' exception classes, for ``except`` and ``isinstance``, without
importing either.

Importing pylxd (requests, urllib3, cryptography.x509…) costs more than a daemon needs to
answer a listing, so the backend connects, lists and follows events without it (the fast
GET path and websockets) and builds its pylxd client in the background. Code that tells
pylxd's errors apart names them through :data:`pylxd_exc` and :data:`requests_exc`: while
the library is not imported, none of its exceptions can exist, so each name is a class
that nothing raises (``except`` and ``isinstance`` match nothing, at no cost); once it is
imported (or being imported, in another thread: the import lock waits for it), the
library's own class.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any


class NeverRaised(Exception):
    """Stands for an exception class of a library that is not imported."""


class LazyExceptions:
    """The exception classes of module ``name``, looked up when used (see the module's
    docstring). Only for matching: never raise or construct through it."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") or self._name not in sys.modules:
            if attr.startswith("__"):
                raise AttributeError(attr)
            return NeverRaised
        return getattr(importlib.import_module(self._name), attr)


pylxd_exc: Any = LazyExceptions("pylxd.exceptions")
"""``pylxd.exceptions``: ``NotFound``, ``Conflict``, ``LXDAPIException``,
``ClientConnectionFailed``."""
requests_exc: Any = LazyExceptions("requests.exceptions")
"""``requests.exceptions``: ``Timeout``, ``SSLError``, ``ConnectionError``,
``RequestException``."""
