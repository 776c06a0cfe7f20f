"""libvirt connection URIs as corral opens them (pure: no libvirt import).

corral never lets a connection ask a person anything, and every SSH URI runs the ``ssh``
program (libvirt's ``ssh`` transport) through corral's own ControlMaster
(``ssh_tunnel.py``):

- ``qemu+ssh://`` gets ``no_tty=1`` (``ssh -T -o BatchMode=yes``: no password prompt).
- ``known_hosts=`` pins the host key to that file. libvirt's ``ssh`` transport ignores the
  parameter, so corral's master applies it (``UserKnownHostsFile=<file>``,
  ``StrictHostKeyChecking=yes``, no global file): an unknown or changed key is refused,
  never added. Without it OpenSSH's own ``known_hosts`` of the user decides, as strictly.
- libvirt's in-process SSH clients (``qemu+libssh://``, ``qemu+libssh2://``) are never
  used: a URI naming one is opened as ``qemu+ssh://`` (libvirt 9.0's libssh client hands
  some replies over only at the next keepalive and crashed the process on large replies
  and finished streams). Their ``known_hosts_verify=ignore`` is taken as ``no_verify=1``,
  any other value as a pinned key.
- ``~`` in ``keyfile=`` and ``known_hosts=`` is the user's home (libvirt wants absolute
  paths).
"""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, urlencode, urlsplit

SSH_TRANSPORTS = ("ssh", "libssh", "libssh2")


def split_scheme(uri: str) -> tuple[str, str]:
    """``("qemu", "ssh")`` for ``qemu+ssh://…``; the transport is ``""`` for a local URI."""
    scheme = urlsplit(uri).scheme
    driver, _, transport = scheme.partition("+")
    return driver, transport


def is_remote(uri: str) -> bool:
    """A URI that reaches another machine (SSH or TCP/TLS), not a local socket."""
    return split_scheme(uri)[1] not in ("", "unix")


def ssh_query(uri: str) -> dict[str, str]:
    """The query of an SSH URI as corral reads it: paths expanded, libssh's
    ``known_hosts_verify`` turned into the ssh program's ``no_verify``."""
    query = dict(parse_qsl(urlsplit(uri).query, keep_blank_values=True))
    for key in ("keyfile", "known_hosts"):
        if query.get(key, "").startswith("~"):
            query[key] = os.path.expanduser(query[key])
    if query.pop("known_hosts_verify", "") == "ignore":
        query["no_verify"] = "1"
    return query


def effective(uri: str) -> str:
    """The URI corral hands to libvirt for ``uri`` (see the module docstring)."""
    parts = urlsplit(uri)
    driver, transport = split_scheme(uri)
    if transport in SSH_TRANSPORTS:
        transport = "ssh"
        query = ssh_query(uri)
        query.pop("known_hosts", None)  # the master pins it: libvirt's ssh ignores it
        query.setdefault("no_tty", "1")
    else:
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
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
