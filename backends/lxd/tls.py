"""TLS for LXD/Incus remotes: the ssl context for websockets and the fast GET path (and,
in :mod:`.http_session`, the requests session pylxd uses). Both pin the server certificate the CLI stored —
pylxd by its SHA-256 fingerprint, the ssl context by the same fingerprint checked at every
handshake (trusting the pinned file as a CA alone would also accept any certificate it
signed) — and both ignore ``REQUESTS_CA_BUNDLE`` and the proxy variables, which would
silently defeat pinning (see ``docs/protocols.md``, section "TLS and pinning").

Standard library only: the first listing (:mod:`.quick`) connects without importing
requests or pylxd."""

from __future__ import annotations

import hashlib
import os
import re
import ssl
from typing import Any
from urllib.parse import quote

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


_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.DOTALL)


def pinned_fingerprint(path: str) -> bytes:
    """SHA-256 of the (first) certificate in the PEM file ``path``, as pylxd compares it.

    Raises:
        AuthError: the file holds no certificate.
    """
    try:
        with open(path, "rb") as f:
            match = _PEM.search(f.read())
    except OSError as e:
        raise AuthError(f"Cannot read the pinned certificate {path}: {e.strerror}.") from None
    if match is None:
        raise AuthError(f"The pinned certificate {path} holds no certificate.")
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(match[0].decode())).digest()


def _check_pin(conn: ssl.SSLObject | ssl.SSLSocket) -> None:
    expected = getattr(conn.context, "corral_fingerprint", None)
    if expected is None:
        return
    der = conn.getpeercert(binary_form=True)
    if der is None or hashlib.sha256(der).digest() != expected:
        raise ssl.SSLCertVerificationError(
            "the server's certificate is not the pinned one (fingerprints differ)")


class _PinnedSocket(ssl.SSLSocket):
    def do_handshake(self, block: bool = False) -> None:
        super().do_handshake(block)
        _check_pin(self)


class _PinnedObject(ssl.SSLObject):
    def do_handshake(self) -> None:
        super().do_handshake()  # raises SSLWantReadError until the handshake is complete
        _check_pin(self)


class PinnedContext(ssl.SSLContext):
    """An ssl context that, after every handshake (blocking sockets for http.client,
    memory BIOs for asyncio and websockets), compares the server certificate's SHA-256
    with ``corral_fingerprint`` and fails the handshake when they differ."""

    sslsocket_class = _PinnedSocket
    sslobject_class = _PinnedObject
    corral_fingerprint: bytes | None = None


class SettledContext(PinnedContext):
    """A pinned context that ignores being set up again once ``settled``.

    urllib3 re-applies its TLS settings to the context it is given at every new connection
    (client certificate, CA file, ALPN, verify mode), in whichever thread opens it, while
    other threads handshake with the same context. OpenSSL does not allow changing a
    context in use: that race crashed the interpreter (a segfault in a thread opening a
    connection). Settled, this context already holds what those calls would set."""

    settled = False

    def load_cert_chain(self, *args: Any, **kwargs: Any) -> None:
        if not self.settled:
            super().load_cert_chain(*args, **kwargs)

    def load_verify_locations(self, *args: Any, **kwargs: Any) -> None:
        if not self.settled:
            super().load_verify_locations(*args, **kwargs)

    def load_default_certs(self, *args: Any, **kwargs: Any) -> None:
        if not self.settled:
            super().load_default_certs(*args, **kwargs)

    def set_alpn_protocols(self, protocols: Any) -> None:
        if not self.settled:
            super().set_alpn_protocols(protocols)

    @property
    def verify_mode(self) -> ssl.VerifyMode:
        return ssl.SSLContext.verify_mode.__get__(self)

    @verify_mode.setter
    def verify_mode(self, value: ssl.VerifyMode) -> None:
        if not self.settled:
            ssl.SSLContext.verify_mode.__set__(self, value)

    @property
    def check_hostname(self) -> bool:
        return ssl.SSLContext.check_hostname.__get__(self)

    @check_hostname.setter
    def check_hostname(self, value: bool) -> None:
        if not self.settled:
            ssl.SSLContext.check_hostname.__set__(self, value)


def ssl_context(remote: Remote, kind: type[PinnedContext] = PinnedContext) -> ssl.SSLContext:
    """Context for wss and the fast state path: our client certificate and the pinned
    server certificate, matched by fingerprint at each handshake (hostname not checked:
    LXD's certificate rarely names the address dialled). Without a pinned certificate,
    the system CAs and a hostname check (the remotes pane says the remote is not pinned).

    Raises:
        AuthError: the pinned certificate cannot be read.
    """
    ctx = kind(ssl.PROTOCOL_TLS_CLIENT)
    if remote.client_cert and remote.client_key:
        ctx.load_cert_chain(remote.client_cert, remote.client_key, password=_no_passphrase)
    if remote.server_cert:
        ctx.corral_fingerprint = pinned_fingerprint(remote.server_cert)
        ctx.check_hostname = False
        ctx.load_verify_locations(cafile=remote.server_cert)
    else:
        ctx.load_default_certs()
    return ctx
