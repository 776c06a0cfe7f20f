"""Bounds on what a remote may send: a daemon (or something posing as one) that answers
with an endless body must not fill corral's memory. Answers that are read whole (JSON,
the console log) are capped; downloads that stream to a file (exports) are not."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import OperationFailed

if TYPE_CHECKING:  # the fast GET path uses the cap without importing requests
    import requests

MAX_RESPONSE = 64 << 20
"""Bytes of one answer read whole: far above any listing (301 instances ≈ 1 MiB)."""


class ResponseTooLarge(OperationFailed):
    """An answer over :data:`MAX_RESPONSE` (not read further)."""


def _read_capped(response: requests.Response, *, stream: bool = False,
                 **_kwargs: Any) -> requests.Response:
    if stream:
        return response
    length = response.headers.get("Content-Length", "")
    if length.isascii() and length.isdigit() and int(length) > MAX_RESPONSE:
        response.close()
        raise ResponseTooLarge(f"The daemon's answer is {int(length) >> 20} MiB, over "
                               f"corral's limit of {MAX_RESPONSE >> 20} MiB; it was not read.")
    chunks, size = [], 0
    for chunk in response.iter_content(1 << 16):
        size += len(chunk)
        if size > MAX_RESPONSE:
            response.close()
            raise ResponseTooLarge(f"The daemon's answer is over corral's limit of "
                                   f"{MAX_RESPONSE >> 20} MiB; it was not read.")
        chunks.append(chunk)
    from ._pylxd_compat import set_content  # (requests is loaded: this is its hook)

    return set_content(response, b"".join(chunks))


def cap_responses(session: requests.Session) -> requests.Session:
    """Make ``session`` refuse answers over :data:`MAX_RESPONSE` that are read whole."""
    session.hooks.setdefault("response", []).append(_read_capped)
    return session
