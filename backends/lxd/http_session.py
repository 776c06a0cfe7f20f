"""The requests session pylxd uses for an LXD/Incus remote, pinned like the ssl context of
:mod:`.tls` and deaf to ``REQUESTS_CA_BUNDLE`` and the proxy variables (see
``docs/protocols.md``, section "TLS and pinning"). Its adapter, a subclass of pylxd's, is
:class:`~backends.lxd._pylxd_compat.PinnedAdapter`."""

from __future__ import annotations

import ssl
from typing import cast

import requests
from pylxd.client import get_session_for_url

from ..models import Remote
from ._pylxd_compat import PinnedAdapter
from .tls import SettledContext, base_url, pinned_fingerprint, ssl_context


def make_session(remote: Remote) -> requests.Session:
    """A requests session for pylxd, with pinning that environment variables cannot undo."""
    url = base_url(remote)
    if remote.is_unix:
        session = get_session_for_url(url)
    else:
        cert = (remote.client_cert, remote.client_key)
        session = get_session_for_url(url, verify=remote.server_cert or True, cert=cert)
        if remote.server_cert:
            context = cast(SettledContext, ssl_context(remote, SettledContext))
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE  # what urllib3 sets for pylxd: the pin decides
            context.set_alpn_protocols(["http/1.1"])  # urllib3's
            context.settled = True
            session.mount(url, PinnedAdapter(context, pinned_fingerprint(
                remote.server_cert).hex()))
    session.trust_env = False
    return session
