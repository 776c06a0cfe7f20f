"""Add an LXD/Incus remote from inside corral, and remove one corral added.

:func:`enrol` does what ``lxc remote add`` does, in an order that writes nothing about
the remote until the server has confirmed that it trusts us: fetch the server
certificate (nothing sent), check it against the token's fingerprint or let the user
accept it, present the token, confirm ``auth: trusted``, then store the entry and the pin
(:class:`~backends.remote_store.RemoteStore`). :func:`add_to_cli` optionally adds the
same remote to the ``lxc``/``incus`` CLI, through that CLI, with a token issued for it.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Awaitable, Callable

from .errors import AuthError, BackendError, InvalidInput, OperationFailed, Unreachable
from .models import Remote
from .remote_store import RemoteStore
from .trust import (
    NAME_RE,
    ServerCert,
    Token,
    ensure_client_certificate,
    fetch_certificate,
    new_token,
    normalise_address,
    parse_token,
    present,
)
from .work import in_thread

Accept = Callable[[ServerCert], Awaitable[bool]]


@dataclass(frozen=True, slots=True)
class Enrolled:
    """What was added."""

    remote: Remote
    cert: ServerCert
    kind: str


def check_name(name: str, taken: set[str]) -> str | None:
    """Why ``name`` cannot name a new remote, or None."""
    if not name:
        return "A name is needed."
    if not NAME_RE.match(name):
        return "Letters, digits, '-', '_' and '.' only (starting with a letter or digit)."
    if name in taken:
        return f"A remote named '{name}' exists already."
    return None


async def enrol(store: RemoteStore, name: str, address: str, token_text: str, *,
                accept: Accept, taken: set[str], timeout: float = 10.0,
                progress: Callable[[str], None] = lambda _t: None) -> Enrolled:
    """Add a remote. ``address`` may be empty when the token carries addresses; without
    a token, ``accept(cert)`` decides whether the presented certificate is trusted.

    Raises:
        InvalidInput, AuthError, Unreachable: in words; nothing about the remote was
            written (corral's own client certificate is made once, if missing).
    """
    problem = check_name(name, taken)
    if problem:
        raise InvalidInput(problem)
    token: Token | None = parse_token(token_text) if token_text.strip() else None
    candidates = [normalise_address(address)] if address.strip() else []
    if not candidates and token is not None:
        candidates = [normalise_address(a) for a in token.addresses]
    if not candidates:
        raise InvalidInput("An address is needed (this token names none).")
    cert = None
    errors: list[str] = []
    for candidate in candidates:
        progress(f"connecting to {candidate}…")
        try:
            cert = await fetch_certificate(candidate, timeout)
            break
        except BackendError as e:
            errors.append(e.message)
    if cert is None:
        raise Unreachable(" ".join(errors) or "No address answered.")
    if token is not None:
        if cert.fingerprint != token.fingerprint:
            raise AuthError(
                f"The certificate of {cert.address} (fingerprint {cert.fingerprint[:16]}…) "
                f"is not the one the token names ({token.fingerprint[:16]}…). Someone may "
                f"be in between, or the token is for another server. Nothing was sent or "
                f"stored.")
    elif not await accept(cert):
        raise InvalidInput("The certificate was not accepted; nothing was stored.")
    progress("presenting the token…" if token else "checking trust…")
    crt, key = await in_thread(lambda _w: ensure_client_certificate(store.directory))
    info = await in_thread(lambda _w: present(cert, crt, key, token, f"corral-{name}",
                                              timeout))
    kind = str((info.get("environment") or {}).get("server") or "lxd")
    kind = "incus" if kind == "incus" else "lxd"
    entry = {"name": name, "kind": kind, "address": cert.address,
             "client_cert": str(crt), "client_key": str(key)}
    await in_thread(lambda _w: store.add(entry, cert.pem))
    remote = Remote(name=name, kind=kind, address=cert.address, client_cert=str(crt),
                    client_key=str(key), server_cert=str(store.certs / f"{name}.crt"),
                    source=str(store.path), addresses=(cert.address,))
    return Enrolled(remote, cert, kind)


async def add_to_cli(enrolled: Enrolled, store: RemoteStore, *,
                     env: dict[str, str] | None = None, timeout: float = 10.0) -> str:
    """Add the remote to the ``lxc`` (LXD) or ``incus`` CLI too, through that CLI, with a
    token the server issues to us for it. Checks afterwards that the CLI pinned the same
    certificate. Returns what was done, in words.

    Raises:
        OperationFailed: the CLI is missing or refused; corral's own remote stays.
    """
    remote, cert = enrolled.remote, enrolled.cert
    tool = "incus" if enrolled.kind == "incus" else "lxc"
    if shutil.which(tool, path=(env or os.environ).get("PATH")) is None:
        raise OperationFailed(f"The {tool} CLI is not installed; the remote was added to "
                              f"corral only.")
    crt, key = Path(remote.client_cert or ""), Path(remote.client_key or "")
    token = await in_thread(lambda _w: new_token(cert, crt, key, f"{tool}-cli", timeout))
    flag = "--token" if tool == "incus" else "--password"
    argv = [tool, "remote", "add", remote.name, cert.address, "--accept-certificate",
            f"{flag}={token}"]
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env)
    out, err = await proc.communicate()
    if proc.returncode != 0:
        text = (err or out).decode(errors="replace").strip()
        raise OperationFailed(f"`{tool} remote add {remote.name}` failed: {text}")
    pinned = _cli_pin(tool, remote.name, env or dict(os.environ))
    if pinned is not None and pinned != cert.fingerprint:
        await asyncio.create_subprocess_exec(tool, "remote", "remove", remote.name, env=env)
        raise OperationFailed(f"The {tool} CLI saw another certificate for {cert.address} "
                              f"than corral did; it was removed from the CLI again.")
    return f"Also added to the {tool} CLI as '{remote.name}'."


def _cli_pin(tool: str, name: str, env: dict[str, str]) -> str | None:
    """The fingerprint of the certificate the CLI pinned, when its file can be found."""
    if tool == "lxc":
        conf = env.get("LXD_CONF") or os.path.join(env.get("HOME", "~"), ".config/lxc")
    else:
        conf = env.get("INCUS_CONF") or os.path.join(
            env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME", "~"), ".config"),
            "incus")
    path = Path(os.path.expanduser(conf)) / "servercerts" / f"{name}.crt"
    try:
        der = ssl.PEM_cert_to_DER_cert(path.read_text())
    except (OSError, ValueError):
        return None
    return hashlib.sha256(der).hexdigest()
