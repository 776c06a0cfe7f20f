"""TLS for LXD/Incus remotes: the requests session pylxd uses and the ssl context for
websockets. Both pin the server certificate the CLI stored and both ignore
``REQUESTS_CA_BUNDLE`` and the proxy variables, which would silently defeat pinning (see
``docs/protocols.md``, section "TLS and pinning")."""

from __future__ import annotations

import os
import ssl
from urllib.parse import quote

import requests
from pylxd.client import get_session_for_url

from ..errors import AuthError
from ..models import Remote


def check_credentials(remote: Remote) -> None:
    """Refuse an HTTPS remote that cannot authenticate, before anything is sent.

    Raises:
        AuthError: no client certificate/key, or a pinned certificate that cannot be read.
    """
    if remote.is_unix:
        return
    if not remote.client_cert or not remote.client_key:
        where = os.path.dirname(remote.source) if remote.source.endswith(".yml") else ""
        hint = f" (looked for client.crt and client.key in {where})" if where else ""
        raise AuthError(
            f"No client certificate for '{remote.name}'{hint}. Add the remote with "
            f"`lxc remote add` / `incus remote add` so a certificate is created and trusted."
        )
    for path in (remote.client_cert, remote.client_key, remote.server_cert):
        if path and not os.access(path, os.R_OK):
            raise AuthError(f"Cannot read {path} for remote '{remote.name}'.")
    try:
        with open(remote.client_key, "rb") as f:
            head = f.read(4096)
    except OSError:
        head = b""
    if b"ENCRYPTED" in head or b"OPENSSH PRIVATE KEY" in head:
        # OpenSSL would prompt for the passphrase on the terminal and freeze the UI.
        raise AuthError(
            f"The client key {remote.client_key} is protected by a passphrase, which corral "
            f"cannot ask for yet. Use an unencrypted key for this remote.")


def _no_passphrase() -> bytes:
    raise AuthError("The client key is protected by a passphrase, which corral cannot ask for.")


def base_url(remote: Remote) -> str:
    if remote.is_unix:
        return "http+unix://" + quote(remote.socket_path, safe="")
    return remote.address.rstrip("/")


def make_session(remote: Remote) -> requests.Session:
    """A requests session for pylxd, with pinning that environment variables cannot undo."""
    url = base_url(remote)
    if remote.is_unix:
        session = get_session_for_url(url)
    else:
        cert = (remote.client_cert, remote.client_key)
        session = get_session_for_url(url, verify=remote.server_cert or True, cert=cert)
    session.trust_env = False
    return session


def ssl_context(remote: Remote) -> ssl.SSLContext:
    """Context for wss: our client certificate, the pinned server certificate as the only
    trust anchor (hostname not checked: LXD's certificate rarely names the address
    dialled). Without a pinned certificate, the system CAs and a hostname check."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if remote.client_cert and remote.client_key:
        ctx.load_cert_chain(remote.client_cert, remote.client_key, password=_no_passphrase)
    if remote.server_cert:
        ctx.check_hostname = False
        ctx.load_verify_locations(cafile=remote.server_cert)
    else:
        ctx.load_default_certs()
    return ctx
