"""The first listing of an LXD/Incus remote, made before its backend exists.

At start, importing the backend (pylxd, requests, websockets and every concern) costs
several times what the daemon needs to answer ``/1.0/instances?recursion=1``. This module
needs only the standard library and corral's models: two GETs on one kept-alive
connection (:mod:`.fasthttp`, pinned like every other connection by :mod:`.tls`), run in a
thread that starts before the UI does. The backend connects afterwards and lists again
once its event stream is open, so nothing that changed in between is missed.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from ..errors import Unreachable
from ..members import MemberStatus
from ..models import FirstListing, Instance, Remote
from . import convert
from .fasthttp import FastGet
from .tls import check_credentials

log = logging.getLogger(__name__)


def first_listing(remote: Remote, timeout: float) -> FirstListing | None:
    """``GET /1.0`` then ``GET /1.0/instances?recursion=1`` (blocking); for a cluster also
    ``GET /1.0/cluster/members?recursion=1``: its members, and its instances on an offline
    member shown unknown with the reason (the backend follows the members from then on).

    Raises:
        AuthError: missing credentials, or a server that does not trust this client.
        Unreachable: no socket at the configured path.
        OSError, http.client.HTTPException, fasthttp.HTTPStatusError: anything else.
    """
    check_credentials(remote)
    if remote.is_unix and not os.path.exists(remote.socket_path):
        raise Unreachable(f"No socket at {remote.socket_path}.")
    fast = FastGet(remote, timeout)
    try:
        meta = fast.get_json("")
        if not isinstance(meta, dict):
            raise ValueError("GET /1.0 did not answer with an object")
        convert.check_trusted(meta, remote)
        query = {"recursion": "1"}
        if remote.project != "default":
            query["project"] = remote.project
        digest, items = fast.get_changed("instances", query)
        raw_members = fast.get_json("cluster/members", {"recursion": "1"}) \
            if (meta.get("environment") or {}).get("server_clustered") else []
    finally:
        fast.close()
    members = tuple(convert.to_member(d, remote.name) for d in raw_members
                    if isinstance(d, dict)) if isinstance(raw_members, list) else ()
    offline = {m.name: m.message or m.status.value for m in members
               if m.status is MemberStatus.OFFLINE}
    listed = convert.instances(items, remote.name)
    _LISTINGS[_key(remote)] = (digest, listed)
    _HOSTS[_key(remote)] = (time.monotonic(), meta)
    instances = tuple(convert.on_offline_member(i, offline) for i in listed)
    return FirstListing(remote, convert.server_info(meta), instances, members)


_LISTINGS: dict[tuple[str, str, str], tuple[bytes, tuple[Instance, ...]]] = {}
"""The first listing's instances (before members' marks) with the digest of the daemon's
answer, per remote (name, address, project), until its backend takes them."""


_HOSTS: dict[tuple[str, str, str], tuple[float, dict[str, Any]]] = {}
"""The first listing's ``GET /1.0`` answer (the server, and that it trusts this client) and
when it came, per remote, until its backend takes it."""

HOST_FRESH = 5.0
"""Seconds for which the first listing's ``GET /1.0`` stands for the backend's own."""


def _key(remote: Remote) -> tuple[str, str, str]:
    return remote.name, remote.address, remote.project


def take_listing(remote: Remote) -> tuple[bytes, tuple[Instance, ...]] | None:
    """The first listing of ``remote`` (its answer's digest and its instances), once: the
    backend's own listing after it connects parses nothing when the daemon answers the
    same bytes (:meth:`.fasthttp.FastGet.get_changed`)."""
    return _LISTINGS.pop(_key(remote), None)


def take_host(remote: Remote) -> dict[str, Any] | None:
    """The first listing's ``GET /1.0`` answer for ``remote``, once, if it is at most
    :data:`HOST_FRESH` seconds old: the backend's connection, a moment after the first
    listing, then starts with its event stream instead of asking the same again (a TLS
    handshake and a round trip, ~0.1 s of the start here). An older one is dropped."""
    taken = _HOSTS.pop(_key(remote), None)
    if taken is None or time.monotonic() - taken[0] > HOST_FRESH:
        return None
    return taken[1]
