"""The requests session pylxd uses for an LXD/Incus remote, pinned like the ssl context of
:mod:`.tls` and deaf to ``REQUESTS_CA_BUNDLE`` and the proxy variables (see
``docs/protocols.md``, section "TLS and pinning")."""

from __future__ import annotations

import ssl
from typing import Any

import requests
from pylxd.client import LXDSSLAdapter, get_session_for_url

from ..models import Remote
from .tls import SettledContext, base_url, pinned_fingerprint, ssl_context


class _PinnedAdapter(LXDSSLAdapter):
    """pylxd's adapter for a pinned certificate, with one ssl context of our own
    (:func:`ssl_context`: the fingerprint checked at each handshake) for all its
    connections. pylxd checks the pin itself and turns verification off for urllib3, which
    then loaded the whole system CA store for every new connection (~20 ms of CPU each,
    several per remote at start-up) only to use none of it. The context is shared by
    every thread, so it is a :class:`SettledContext`."""

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


def make_session(remote: Remote) -> requests.Session:
    """A requests session for pylxd, with pinning that environment variables cannot undo."""
    url = base_url(remote)
    if remote.is_unix:
        session = get_session_for_url(url)
    else:
        cert = (remote.client_cert, remote.client_key)
        session = get_session_for_url(url, verify=remote.server_cert or True, cert=cert)
        if remote.server_cert:
            context = ssl_context(remote, SettledContext)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE  # what urllib3 sets for pylxd: the pin decides
            context.set_alpn_protocols(["http/1.1"])  # urllib3's
            context.settled = True
            session.mount(url, _PinnedAdapter(context, pinned_fingerprint(
                remote.server_cert).hex()))
    session.trust_env = False
    return session
