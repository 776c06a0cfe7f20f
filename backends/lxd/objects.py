"""What the LXD/Incus object concerns (profiles, networks, storage, projects, YAML editing)
share: where each kind of object lives in the API, the names the daemon accepts, and the
daemon's refusals turned into the contract's errors (400: InvalidInput, 412: the object
changed meanwhile)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

from ..errors import BackendError, Conflict, InvalidInput, NotFound, OperationFailed
from ..models import ResourceKind
from .lazy import pylxd_exc
from .rest import Rest

if TYPE_CHECKING:
    from pylxd.exceptions import LXDAPIException

T = TypeVar("T")

EDITABLE: dict[ResourceKind, tuple[str, ...]] = {
    ResourceKind.INSTANCE: ("architecture", "config", "devices", "ephemeral", "profiles",
                            "stateful", "description"),
    ResourceKind.PROFILE: ("config", "description", "devices"),
    ResourceKind.NETWORK: ("config", "description"),
    ResourceKind.POOL: ("config", "description"),
    ResourceKind.VOLUME: ("config", "description"),
    ResourceKind.PROJECT: ("config", "description"),
}
"""The fields a PUT replaces, per kind (what ``lxc <kind> edit`` shows)."""

WORDS = {
    ResourceKind.INSTANCE: "instance", ResourceKind.PROFILE: "profile",
    ResourceKind.NETWORK: "network", ResourceKind.POOL: "storage pool",
    ResourceKind.VOLUME: "volume", ResourceKind.PROJECT: "project",
    ResourceKind.IMAGE: "image",
}


def node(rest: Rest, kind: ResourceKind, name: str, parent: str = "") -> Any:
    """The pylxd API node of one object."""
    api = rest.client.api
    q = quote(name, safe="")
    if kind is ResourceKind.INSTANCE:
        return api.instances[q]
    if kind is ResourceKind.PROFILE:
        return api.profiles[q]
    if kind is ResourceKind.NETWORK:
        return api.networks[q]
    if kind is ResourceKind.POOL:
        return api["storage-pools"][quote(name, safe="")]
    if kind is ResourceKind.VOLUME:
        return api["storage-pools"][quote(parent, safe="")].volumes.custom[q]
    if kind is ResourceKind.PROJECT:
        return api.projects[q]
    if kind is ResourceKind.IMAGE:
        return api.images[q]
    raise InvalidInput(f"Objects of kind {kind.value} cannot be edited.")


def name_problem(what: str, name: str) -> str | None:
    """Names the daemon accepts for profiles, networks, volumes and projects, in words."""
    if not name:
        return f"a {what} needs a name."
    if len(name) > 63:
        return f"a {what} name has at most 63 characters."
    if name in (".", "..") or any(c in name for c in "/\\ \t\n'\"?#:*"):
        return f"a {what} name cannot hold spaces, quotes or any of / \\ ? # : *."
    return None


def check_name(what: str, name: str) -> str:
    problem = name_problem(what, name)
    if problem:
        raise InvalidInput(f"'{name}': {problem}")
    return name


def refusal(e: LXDAPIException, what: str) -> BackendError:
    """The daemon's answer to a change, as the contract's error (``what``: "profile p1")."""
    status = getattr(e.response, "status_code", 0)
    text = str(e)
    if status == 404:
        return NotFound(f"There is no {what} any more ({text}).")
    if status == 409:
        return Conflict(f"{what[0].upper()}{what[1:]}: {text}.")
    if status == 412:
        return Conflict(f"{what[0].upper()}{what[1:]} was changed by someone else since it "
                        f"was read; nothing was saved.", title="Changed meanwhile")
    if status == 400:
        return InvalidInput(f"{what[0].upper()}{what[1:]}: {text}.")
    return OperationFailed(f"{what[0].upper()}{what[1:]}: {text}.")


async def change(rest: Rest, what: str, fn: Callable[[], T], *, timeout: float = 120) -> T:
    """Run a changing call ``fn`` (in the pool), its refusals in the contract's words."""
    def _do() -> T:
        try:
            return fn()
        except pylxd_exc.LXDAPIException as e:
            raise refusal(e, what) from e

    return await rest.call(_do, timeout=timeout)


def metadata(response: Any) -> Any:
    return response.json()["metadata"]
