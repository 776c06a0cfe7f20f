"""libvirt connection URIs as corral opens them (pure: no libvirt import).

corral never lets a connection ask a person anything:

- ``qemu+ssh://`` runs the ``ssh`` program: corral adds ``no_tty=1`` (``ssh -T -o
  BatchMode=yes``: no password prompt, an unknown or changed host key refused by OpenSSH's
  own ``known_hosts`` of the user).
- libvirt's ``ssh`` transport ignores ``known_hosts=``. A ``qemu+ssh://`` URI that names a
  ``known_hosts`` file is therefore opened through libvirt's in-process SSH client
  (``qemu+libssh://``), which checks the host key against that file; corral's credential
  callback refuses every question it asks (accept an unknown key, a password, a
  passphrase), so a host that needs one is reported, never waited for.
- ``~`` in ``keyfile=`` and ``known_hosts=`` is the user's home (libvirt wants absolute
  paths).
- ``known_hosts_verify`` is ``normal`` unless the URI says otherwise (never ``auto``: that
  would accept any new key).
"""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, urlencode, urlsplit


def split_scheme(uri: str) -> tuple[str, str]:
    """``("qemu", "ssh")`` for ``qemu+ssh://…``; the transport is ``""`` for a local URI."""
    scheme = urlsplit(uri).scheme
    driver, _, transport = scheme.partition("+")
    return driver, transport


def is_remote(uri: str) -> bool:
    """A URI that reaches another machine (SSH or TCP/TLS), not a local socket."""
    return split_scheme(uri)[1] not in ("", "unix")


def effective(uri: str) -> str:
    """The URI corral hands to libvirt for ``uri`` (see the module docstring)."""
    parts = urlsplit(uri)
    driver, transport = split_scheme(uri)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    for key in ("keyfile", "known_hosts"):
        if query.get(key, "").startswith("~"):
            query[key] = os.path.expanduser(query[key])
    if transport == "ssh" and query.get("known_hosts"):
        transport = "libssh"
    if transport == "ssh":
        query.setdefault("no_tty", "1")
    if transport in ("libssh", "libssh2"):
        query.pop("no_tty", None)
        if query.get("known_hosts_verify") == "auto" or "known_hosts_verify" not in query:
            query["known_hosts_verify"] = "normal"
        query.pop("no_verify", None)  # the ssh program's option; libssh has its own
    scheme = f"{driver}+{transport}" if transport else driver
    # by hand: urlunsplit drops the empty authority of qemu:///system
    text = f"{scheme}://{parts.netloc}{parts.path}"
    if query:
        text += "?" + urlencode(query, safe="/:,")
    return text + (f"#{parts.fragment}" if parts.fragment else "")


def host_of(uri: str) -> str:
    """``user@host:port`` of a remote URI, for messages (the local machine: ``this host``)."""
    parts = urlsplit(uri)
    return parts.netloc or "this host"


def redacted(uri: str) -> str:
    """``uri`` without its query (key file paths are not secrets, but long): for titles."""
    parts = urlsplit(uri)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"
