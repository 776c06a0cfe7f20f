"""libvirt remotes (see ``backend.py``). Importing this package needs no libvirt binding:
:func:`unavailable_reason` says whether the backend can be used here."""

from __future__ import annotations

import importlib.util


def unavailable_reason(*, load: bool = True) -> str | None:
    """Why libvirt remotes cannot be used on this machine (None: they can). Without
    ``load`` only whether the binding is installed (cheap: for the remotes' discovery,
    before the first frame; the backend loads it in a thread)."""
    if importlib.util.find_spec("libvirt") is None:
        return ("the libvirt Python binding is not installed (pip install 'corral[libvirt]'; "
                "it builds against libvirt-dev with pkg-config and a C compiler)")
    if not load:
        return None
    try:
        import libvirt  # noqa: F401
    except ImportError as e:
        return f"the libvirt Python binding does not load: {e}"
    return None
