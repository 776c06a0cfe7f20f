"""Adding an LXD/Incus remote the way ``lxc remote add`` does: the server certificate
fetched without sending anything, checked against a trust token's fingerprint (or shown
for the user to accept), a client certificate made if there is none, the token
presented, and the trust confirmed before anything about the remote is stored.

The wire facts (token layout, ``trust_token`` versus ``password``) are in
``docs/protocols.md``, "TLS and pinning" and "Adding a remote".
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import datetime
import hashlib
import json
import os
import re
import secrets
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .errors import AuthError, InvalidInput, Unreachable
from .paths import UntrustedFile, check_owned, owned_directory, way_problem

if TYPE_CHECKING:
    import requests  # imported where used: requests is not needed to start corral

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
DEFAULT_PORT = 8443


@dataclass(frozen=True, slots=True)
class Token:
    """A trust token, decoded (``lxc config trust add`` prints it)."""

    client_name: str
    fingerprint: str
    addresses: tuple[str, ...]
    secret: str
    raw: str


@dataclass(frozen=True, slots=True)
class ServerCert:
    """A server's certificate as it presented it, before anything was sent."""

    address: str
    pem: str
    fingerprint: str
    """SHA-256 of the DER, lower-case hex."""

    @property
    def pretty(self) -> str:
        """The fingerprint in pairs, as ``lxc remote add`` prints it for acceptance."""
        return ":".join(self.fingerprint[i:i + 2] for i in range(0, 64, 2))


def parse_token(text: str) -> Token:
    """Decode a trust token.

    Raises:
        InvalidInput: not a token (pasted wrongly, or a certificate fingerprint instead).
    """
    raw = "".join(text.split())
    try:
        data = json.loads(base64.b64decode(raw + "=" * (-len(raw) % 4), validate=False))
        secret = str(data["secret"])
        fingerprint = str(data["fingerprint"]).lower()
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise InvalidInput("This is not a trust token. On the server, "
                           "`lxc config trust add` / `incus config trust add NAME` "
                           "prints one (a long line of letters and digits).") from None
    addresses = tuple(str(a) for a in data.get("addresses") or ())
    return Token(str(data.get("client_name") or ""), fingerprint, addresses, secret, raw)


def normalise_address(text: str) -> str:
    """``10.0.0.5`` / ``host:8443`` / ``https://host`` → ``https://host:port``.

    Raises:
        InvalidInput: not an address corral can dial.
    """
    text = text.strip()
    if not text:
        raise InvalidInput("An address is needed (host, host:port or https://host:port).")
    if "://" not in text:
        text = "https://" + text
    parts = urlsplit(text)
    if parts.scheme != "https" or not parts.hostname:
        raise InvalidInput(f"'{text}' is not an https address (host, host:port or "
                           f"https://host:port).")
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError:
        raise InvalidInput(f"'{text}' has an invalid port.") from None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"https://{host}:{port}"


async def fetch_certificate(address: str, timeout: float = 10.0) -> ServerCert:
    """Connect, take the certificate the server presents and hang up: nothing is sent.

    Raises:
        Unreachable: no TLS server answered there.
    """
    parts = urlsplit(address)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(parts.hostname, parts.port,
                                                           ssl=ctx)
    except TimeoutError:
        raise Unreachable(f"{address} did not answer within {timeout:g} s.") from None
    except ssl.SSLError as e:
        raise Unreachable(f"{address} does not speak TLS ({e.reason or e}).") from None
    except OSError as e:
        raise Unreachable(f"Cannot reach {address}: {e.strerror or e}.") from None
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (OSError, ssl.SSLError):
            pass
    if not der:
        raise Unreachable(f"{address} presented no certificate.")
    return ServerCert(address, ssl.DER_cert_to_PEM_cert(der), hashlib.sha256(der).hexdigest())


def ensure_client_certificate(directory: Path) -> tuple[Path, Path]:
    """corral's client certificate (``client.crt``/``client.key`` in ``directory``), made
    once like the CLIs make theirs: EC P-384, self-signed, ten years; the key 0600."""
    crt, key = directory / "client.crt", directory / "client.key"
    if os.path.lexists(crt) and os.path.lexists(key):
        # a pair someone else planted beside the config must never be enrolled
        problem = check_owned(key, private=True) or check_owned(crt)
        if problem:
            raise UntrustedFile(f"corral's client certificate was not used (nothing was "
                                f"sent to the server): {problem}")
        return crt, key
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    private = ec.generate_private_key(ec.SECP384R1())
    user = os.environ.get("USER") or "user"
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "corral"),
                      x509.NameAttribute(NameOID.COMMON_NAME, f"corral {user}")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(private.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(private, hashes.SHA384()))
    key_bytes = private.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.TraditionalOpenSSL,
                                      serialization.NoEncryption())
    write_private(key, key_bytes, mode=0o600)
    write_private(crt, cert.public_bytes(serialization.Encoding.PEM), mode=0o644)
    return crt, key


def write_private(path: Path, data: bytes, *, mode: int) -> None:
    """Write ``path`` atomically, created with ``mode`` from the start (never readable by
    others, not even for a moment), in a directory that it and every directory above are
    this user's or root's and not writable by others (:func:`~backends.paths.owned_directory`):
    a new file under a random name, ``O_EXCL | O_NOFOLLOW``, renamed over ``path`` through
    the checked directory's descriptor (a link at ``path`` is replaced, never followed).

    Raises:
        UntrustedFile: the directory fails those checks; nothing was written.
    """
    problem = way_problem(path.parent)  # before anything is made at the link's end
    if problem:
        raise UntrustedFile(f"{problem}: another user could point it anywhere, so corral "
                            f"does not write {path}. Replace the link with the directory "
                            f"itself, or use another one.")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with owned_directory(path.parent) as dfd:
        tmp = f".{path.name}.{secrets.token_hex(8)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600, dir_fd=dfd)
        try:
            os.fchmod(fd, mode)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dfd)
            raise


@contextlib.contextmanager
def pinned_session(cert: ServerCert, crt: Path, key: Path):
    """A requests session that trusts only ``cert`` (whatever names it holds) and presents
    our client certificate; closed on the way out."""
    import requests

    class _NoHostname(requests.adapters.HTTPAdapter):
        """The pinned certificate is the only anchor; its names rarely match the address."""

        def init_poolmanager(self, *args, **kwargs):
            kwargs["assert_hostname"] = False
            return super().init_poolmanager(*args, **kwargs)

    with tempfile.NamedTemporaryFile("w", suffix=".crt") as pin:
        pin.write(cert.pem)
        pin.flush()
        session = requests.Session()
        session.trust_env = False  # REQUESTS_CA_BUNDLE and proxies would undo the pin
        session.verify = pin.name
        session.cert = (str(crt), str(key))
        session.mount("https://", _NoHostname())
        try:
            yield session
        finally:
            session.close()


def _get(session: requests.Session, url: str, timeout: float) -> dict:
    r = session.get(url + "/1.0", timeout=timeout)
    r.raise_for_status()
    return r.json().get("metadata") or {}


def present(cert: ServerCert, crt: Path, key: Path, token: Token | None, name: str,
            timeout: float = 10.0) -> dict:
    """Blocking: ask the server (pinned to ``cert``) to trust our client certificate with
    ``token``, or just check that it already does. Returns the server's ``GET /1.0``.

    Raises:
        AuthError: the token was refused, or the server does not trust us and no token
            was given.
        Unreachable: the connection failed.
    """
    import requests

    with pinned_session(cert, crt, key) as session:
        try:
            info = _get(session, cert.address, timeout)
            if info.get("auth") != "trusted" and token is not None:
                _send_token(session, cert.address, info, token, name, timeout)
                info = _get(session, cert.address, timeout)
        except requests.exceptions.SSLError:
            raise AuthError(f"The certificate of {cert.address} changed while it was being "
                            f"added; nothing was stored.") from None
        except requests.exceptions.RequestException as e:
            raise Unreachable(f"Talking to {cert.address} failed: {e}") from None
    if info.get("auth") != "trusted":
        if token is None:
            raise AuthError(
                f"{cert.address} does not trust corral's client certificate ({crt}) yet. "
                f"Give a trust token (on the server: `lxc config trust add` or "
                f"`incus config trust add NAME`), or trust that certificate there.")
        raise AuthError(f"{cert.address} did not accept the trust token.")
    return info


def _send_token(session: requests.Session, url: str, info: dict, token: Token, name: str,
                timeout: float) -> None:
    """``trust_token`` where the server knows it (Incus; LXD with ``explicit_trust_token``),
    else LXD's older ``password`` field; Incus's untrusted answer lists no extensions the
    client could tell it by, so ``password`` refused leads to one ``trust_token`` try."""
    extensions = info.get("api_extensions") or []
    body = {"type": "client", "name": name}
    tries = ([{"trust_token": token.raw}] if "explicit_trust_token" in extensions
             else [{"password": token.raw}, {"trust_token": token.raw}])
    last = ""
    for extra in tries:
        r = session.post(url + "/1.0/certificates", json=body | extra, timeout=timeout)
        if r.ok:
            return
        try:
            last = r.json().get("error") or r.reason
        except ValueError:
            last = r.reason
    raise AuthError(f"{url} refused the trust token: {last}. A token works once and "
                    f"expires; ask the server for a new one (`lxc config trust add`).")
