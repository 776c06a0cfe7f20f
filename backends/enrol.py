"""Add an LXD/Incus remote from inside corral, and remove one corral added.

:func:`enrol` does what ``lxc remote add`` does, in an order that writes nothing about
the remote until the server has confirmed that it trusts us: fetch the server
certificate (nothing sent), check it against the token's fingerprint or let the user
accept it, present the token, confirm ``auth: trusted``, then store the entry and the pin
(:class:`~backends.remote_store.RemoteStore`). :func:`add_to_cli` optionally adds the
same remote to the ``lxc``/``incus`` CLI (:mod:`backends.cli_remote`), with no secret on
any command line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Awaitable, Callable

from .cli_remote import CliConfig, cli_config, entry, load, revoke, save, trust_client
from .errors import AuthError, BackendError, InvalidInput, OperationFailed, Unreachable
from .models import Remote
from .paths import owned_directory, read_owned
from .remote_store import RemoteStore
from .trust import (
    NAME_RE,
    ServerCert,
    Token,
    ensure_client_certificate,
    fetch_certificate,
    normalise_address,
    parse_token,
    present,
    write_private,
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
    """Add the remote to the ``lxc`` (LXD) or ``incus`` CLI too (:mod:`backends.cli_remote`):
    the CLI's client certificate trusted on the server through corral's pinned
    connection, the CLI's pin and entry written by corral, then checked with the CLI
    itself (``query NAME:/1.0`` answers ``auth: trusted``). No token, no secret and no
    ``--accept-certificate`` on any command line. Returns what was done, in words.

    Raises:
        OperationFailed, Unreachable: the CLI is missing, has that name already, or the
            server or the check refused; whatever was done for the CLI is taken back,
            corral's own remote stays.
    """
    remote, cert = enrolled.remote, enrolled.cert
    tool = "incus" if enrolled.kind == "incus" else "lxc"
    env = dict(os.environ) if env is None else env
    if shutil.which(tool, path=env.get("PATH")) is None:
        raise OperationFailed(f"The {tool} CLI is not installed; the remote was added to "
                              f"corral only.")
    conf = cli_config(tool, env)
    name = remote.name
    crt, key = Path(remote.client_cert or ""), Path(remote.client_key or "")

    def prepare(_w: object) -> tuple[dict, str]:
        data = load(conf)
        if name in data["remotes"]:
            raise OperationFailed(f"The {tool} CLI has a remote named '{name}' already "
                                  f"({conf.file}); it was left as it is.")
        try:
            if os.path.lexists(conf.directory):
                # nothing is sent to the server before the CLI's directory has passed
                # corral's owner checks: its client certificate is what gets trusted
                with owned_directory(conf.directory):
                    pass
            cli_crt, _cli_key = conf.client_pair(name)
            return data, read_owned(cli_crt).decode(errors="replace")
        except OSError as e:
            raise OperationFailed(f"The {tool} CLI's client certificate in "
                                  f"{conf.directory} cannot be used: "
                                  f"{e.strerror or e}.") from None

    data, pem = await in_thread(prepare)
    added = await in_thread(lambda _w: trust_client(cert, crt, key, pem, f"{tool}-cli",
                                                    timeout))
    done: list[str] = []
    try:
        def write(_w: object) -> None:
            try:
                write_private(conf.pin(name), cert.pem.encode(), mode=0o644)
                done.append("pin")
                data["remotes"][name] = entry(cert.address, enrolled.kind)
                save(conf, data)
                done.append("entry")
            except OSError as e:
                raise OperationFailed(f"The {tool} CLI's config in {conf.directory} could "
                                      f"not be written ({e.strerror or e}); the remote was "
                                      f"added to corral only.") from None

        await in_thread(write)
        await _cli_trusted(tool, name, env, timeout)
    except BaseException:
        await in_thread(lambda _w: _undo(conf, name, done, cert, crt, key, added, timeout))
        raise
    return f"Also added to the {tool} CLI as '{name}'."


def _undo(conf: CliConfig, name: str, done: list[str], cert: ServerCert, crt: Path,
          key: Path, added: str | None, timeout: float) -> None:
    """Take back what :func:`add_to_cli` did for the CLI, newest first."""
    if "entry" in done:
        with contextlib.suppress(BackendError, OSError):
            data = load(conf)
            data["remotes"].pop(name, None)
            save(conf, data)
    if "pin" in done:
        with contextlib.suppress(OSError):
            conf.pin(name).unlink()
    if added:
        revoke(cert, crt, key, added, timeout)


async def _cli_trusted(tool: str, name: str, env: dict[str, str], timeout: float) -> None:
    """The CLI itself reaches the remote, pinned, and is trusted there."""
    proc = await asyncio.create_subprocess_exec(
        tool, "query", f"{name}:/1.0", stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout + 20)
    except (TimeoutError, asyncio.CancelledError):
        proc.kill()
        await proc.wait()
        raise
    try:
        auth = json.loads(out or b"{}").get("auth")
    except ValueError:
        auth = None
    if proc.returncode != 0 or auth != "trusted":
        text = (err or out).decode(errors="replace").strip()[:300]
        raise OperationFailed(f"The {tool} CLI could not use the new remote '{name}' "
                              f"({text or 'not trusted'}); it was taken out of the CLI "
                              f"again.")
