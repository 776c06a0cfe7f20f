"""The contract's verbs for what a remote holds besides instances: profiles, networks,
storage pools and volumes, projects, image aliases, and YAML editing of any object.

:class:`ResourceVerbs` is a base of :class:`~backends.base.Backend`: every verb here is
optional, raises :class:`~backends.errors.Unsupported` by default, and belongs to one
ability in :data:`RESOURCE_CAPABILITY_METHODS` (merged into
``backends.base.CAPABILITY_METHODS``). A backend declares the ability exactly when it
implements the verbs, as for instances.
"""

from __future__ import annotations

from collections.abc import Callable

from .errors import Unsupported
from .models import Capability, InstanceRef, Resource, ResourceKind


class ResourceVerbs:
    """Optional verbs on a remote's profiles, networks, storage, projects and images."""

    _unsupported: Callable[[str], Unsupported]
    """Provided by :class:`~backends.base.Backend`."""

    # Profiles (PROFILES) -------------------------------------------------------------

    async def list_profiles(self) -> list[Resource]:
        """Every profile of the remote's project, with ``used_by``."""
        raise self._unsupported("list profiles")

    async def create_profile(self, name: str, *, description: str = "",
                             config: dict[str, str] | None = None,
                             devices: dict[str, dict[str, str]] | None = None) -> Resource:
        """A new profile (empty, or holding ``config``/``devices`` copied from another).

        Raises:
            Conflict: the name is taken.  InvalidInput: a bad name or value.
        """
        raise self._unsupported("create profiles")

    async def get_profile(self, name: str) -> Resource:
        """One profile with its whole ``config`` and ``devices``."""
        raise self._unsupported("read profiles")

    async def rename_profile(self, name: str, new_name: str) -> Resource:
        raise self._unsupported("rename profiles")

    async def delete_profile(self, name: str) -> None:
        """Delete an unused profile.

        Raises:
            Conflict: it is used; the message lists the users and nothing is changed.
        """
        raise self._unsupported("delete profiles")

    async def set_instance_profiles(self, ref: InstanceRef, profiles: list[str]) -> None:
        """Give the instance exactly ``profiles``, in this order (later ones win)."""
        raise self._unsupported("assign profiles")

    # Networks (NETWORKS, NETWORK_MANAGE) ---------------------------------------------

    async def list_networks(self) -> list[Resource]:
        """Networks with type, managed, IPv4/IPv6, NAT and ``used_by``; unmanaged (host)
        ones are ``read_only``."""
        raise self._unsupported("list networks")

    async def create_network(self, name: str, *, ipv4: str = "auto", ipv6: str = "none",
                             nat: bool = True, description: str = "") -> Resource:
        """A managed bridge. ``ipv4``/``ipv6``: a CIDR, ``auto`` or ``none``."""
        raise self._unsupported("create networks")

    async def delete_network(self, name: str) -> None:
        """Raises Conflict while it is used (the users listed)."""
        raise self._unsupported("delete networks")

    async def network_leases(self, name: str) -> list[dict[str, str]]:
        """DHCP leases of a managed network: ``hostname``, ``address``, ``hwaddr``,
        ``type``."""
        raise self._unsupported("show DHCP leases")

    # Storage (STORAGE) ---------------------------------------------------------------

    async def list_storage_pools(self) -> list[Resource]:
        """Pools with driver, status, used and total space."""
        raise self._unsupported("list storage pools")

    async def list_volumes(self, pool: str) -> list[Resource]:
        """The custom volumes of ``pool`` (``parent`` = the pool), with size and users."""
        raise self._unsupported("list storage volumes")

    async def create_volume(self, pool: str, name: str, *, size: int | None = None,
                            description: str = "") -> Resource:
        """A custom filesystem volume; ``size`` in bytes (None: the pool's default)."""
        raise self._unsupported("create storage volumes")

    async def resize_volume(self, pool: str, name: str, size: int) -> None:
        raise self._unsupported("resize storage volumes")

    async def delete_volume(self, pool: str, name: str) -> None:
        """Raises Conflict while it is attached (the users listed)."""
        raise self._unsupported("delete storage volumes")

    async def attach_volume(self, pool: str, name: str, ref: InstanceRef, path: str, *,
                            device: str = "") -> str:
        """Attach the volume to the instance at ``path`` inside it; returns the device
        name used."""
        raise self._unsupported("attach storage volumes")

    async def detach_volume(self, pool: str, name: str, ref: InstanceRef) -> None:
        raise self._unsupported("detach storage volumes")

    async def copy_volume(self, pool: str, name: str, target: ResourceVerbs,
                          target_pool: str, new_name: str, *,
                          progress: Callable[[str], None] | None = None) -> None:
        """Copy a volume into ``target_pool`` of ``target`` (this backend or another of
        the same kind that declares ``STORAGE``)."""
        raise self._unsupported("copy storage volumes")

    # Projects (PROJECTS) -------------------------------------------------------------

    async def list_projects(self) -> list[Resource]:
        """Every project with its ``features.*`` and ``used_by``."""
        raise self._unsupported("list projects")

    async def create_project(self, name: str, *, description: str = "") -> Resource:
        raise self._unsupported("create projects")

    async def delete_project(self, name: str) -> None:
        """Raises Conflict while the project holds anything but its default profile."""
        raise self._unsupported("delete projects")

    # Image aliases, copies (IMAGE_ALIASES) -------------------------------------------

    async def add_image_alias(self, fingerprint: str, alias: str) -> None:
        raise self._unsupported("add image aliases")

    async def remove_image_alias(self, alias: str) -> None:
        raise self._unsupported("remove image aliases")

    async def refresh_image(self, fingerprint: str, *,
                            progress: Callable[[str], None] | None = None) -> bool:
        """Fetch a newer version of an image from the server it was copied from; True
        when there was one.

        Raises:
            InvalidInput: the image was not copied from an image server (nothing to
                refresh it from).
        """
        raise self._unsupported("refresh images")

    async def copy_image(self, fingerprint: str, target: ResourceVerbs, *,
                         aliases: tuple[str, ...] = (),
                         progress: Callable[[str], None] | None = None) -> None:
        """Copy an image to ``target`` (a remote of the same kind), with ``aliases``."""
        raise self._unsupported("copy images")

    # YAML (YAML_EDIT) ----------------------------------------------------------------

    async def get_yaml(self, kind: ResourceKind, name: str, parent: str = ""
                       ) -> tuple[str, str]:
        """The editable part of an object as YAML, and its ETag (``parent``: a volume's
        pool). What ``lxc config edit`` / ``lxc profile edit`` show."""
        raise self._unsupported("edit objects as YAML")

    async def put_yaml(self, kind: ResourceKind, name: str, text: str, etag: str,
                       parent: str = "") -> None:
        """Replace the object's editable part with ``text``, only if it still has
        ``etag``. Nothing is changed when it fails.

        Raises:
            InvalidInput: the text is not YAML (the message names the line) or the daemon
                refused a value.
            Conflict: someone changed the object since ``etag`` was read.
        """
        raise self._unsupported("edit objects as YAML")


RESOURCE_CAPABILITY_METHODS: dict[Capability, tuple[str, ...]] = {
    Capability.PROFILES: ("list_profiles", "create_profile", "get_profile", "rename_profile",
                          "delete_profile", "set_instance_profiles"),
    Capability.NETWORKS: ("list_networks",),
    Capability.NETWORK_MANAGE: ("create_network", "delete_network", "network_leases"),
    Capability.STORAGE: ("list_storage_pools", "list_volumes", "create_volume",
                         "resize_volume", "delete_volume", "attach_volume", "detach_volume",
                         "copy_volume"),
    Capability.PROJECTS: ("list_projects", "create_project", "delete_project"),
    Capability.IMAGE_ALIASES: ("add_image_alias", "remove_image_alias", "copy_image",
                               "refresh_image"),
    Capability.YAML_EDIT: ("get_yaml", "put_yaml"),
}
"""The verbs of each ability of this module."""

RESOURCE_CAPABILITY_REQUIRES: dict[Capability, Capability] = {
    Capability.NETWORK_MANAGE: Capability.NETWORKS,
    Capability.IMAGE_ALIASES: Capability.IMAGES,
}
