"""Every use corral makes of pylxd's internals (and of those of requests, pylxd's HTTP
layer), in one place.

pylxd is capped below 2.5 (``pyproject.toml``). Each class or function here says what pylxd
or requests lacks and which internal part it relies on; nothing else in ``backends/`` names a
private part of either (``tests/unit/test_seams.py``, and ruff's SLF001 outside this module).
"""

from __future__ import annotations

import ssl
from typing import Any

import requests
from pylxd.client import LXDSSLAdapter


class PinnedAdapter(LXDSSLAdapter):
    """pylxd's adapter for a pinned certificate, with one ssl context of our own (the
    fingerprint checked at each handshake: :func:`backends.lxd.tls.ssl_context`) for all
    its connections. pylxd checks the pin itself and turns verification off for urllib3,
    which then loaded the whole system CA store for every new connection (~20 ms of CPU
    each, several per remote at start-up) only to use none of it. The context is shared by
    every thread, so it is a :class:`~backends.lxd.tls.SettledContext`.

    pylxd has no way to hand its adapter a context or a fingerprint: this relies on what
    ``LXDSSLAdapter.cert_verify`` does inside (it reads the certificate file, sets
    ``conn.assert_fingerprint`` and calls requests' ``HTTPAdapter.cert_verify`` with
    verification off), and does the same with the fingerprint read once."""

    def __init__(self, context: ssl.SSLContext, fingerprint: str) -> None:
        self._context = context
        self._fingerprint = fingerprint
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["ssl_context"] = self._context
        super().init_poolmanager(*args, **kwargs)

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        conn.assert_fingerprint = self._fingerprint  # as pylxd's, read once, not per request
        requests.adapters.HTTPAdapter.cert_verify(self, conn, url, False, cert)


def api_endpoint(node: Any) -> str:
    """The URL a pylxd API node (``client.api.instances[name].files``…) stands for, to
    send a request pylxd has no method for (a HEAD). pylxd keeps it in the private
    ``_APINode._api_endpoint`` (``backends/lxd/files.py`` is to call this)."""
    return node._api_endpoint


def set_content(response: requests.Response, content: bytes) -> requests.Response:
    """Make ``content`` the body of ``response``, read already (``response.content`` and
    ``json()`` return it), as requests does when it reads a body itself. requests has no
    public way to hand a response a body read elsewhere (corral reads it in chunks, to a
    cap); this sets the private ``Response._content`` and ``_content_consumed``."""
    response._content = content
    response._content_consumed = True
    return response
