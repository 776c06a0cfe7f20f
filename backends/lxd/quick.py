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
    instances = tuple(convert.on_offline_member(i, offline) for i in listed)
    return FirstListing(remote, convert.server_info(meta), instances, members)


_LISTINGS: dict[tuple[str, str, str], tuple[bytes, tuple[Instance, ...]]] = {}
"""The first listing's instances (before members' marks) with the digest of the daemon's
answer, per remote (name, address, project), until its backend takes them."""


def _key(remote: Remote) -> tuple[str, str, str]:
    return remote.name, remote.address, remote.project


def take_listing(remote: Remote) -> tuple[bytes, tuple[Instance, ...]] | None:
    """The first listing of ``remote`` (its answer's digest and its instances), once: the
    backend's own listing after it connects parses nothing when the daemon answers the
    same bytes (:meth:`.fasthttp.FastGet.get_changed`)."""
    return _LISTINGS.pop(_key(remote), None)
