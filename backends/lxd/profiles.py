"""Profiles of an LXD/Incus remote: list, create (empty or from another's settings),
rename, delete (refused in words while instances use it), and an instance's profile list."""

from __future__ import annotations

from urllib.parse import quote

from ..base import Backend
from ..errors import Conflict, InvalidInput, NotFound, OperationFailed
from ..models import InstanceRef, Resource
from . import resource_convert as rc
from .objects import change, check_name, metadata
from .ops import Ops
from .rest import Rest


class Profiles(Backend):
    """The profile verbs of :class:`~backends.lxd.backend.LXDBackend`."""

    rest: Rest
    ops: Ops

    async def list_profiles(self) -> list[Resource]:
        items = await self.rest.get("profiles", recursion="1") or []
        return sorted((rc.to_profile(d, self.remote.name, self.remote.project) for d in items),
                      key=lambda r: r.name)

    async def get_profile(self, name: str) -> Resource:
        client = self.rest.client
        data = await self.rest.call(
            lambda: metadata(client.api.profiles[quote(name, safe="")].get()))
        return rc.to_profile(data, self.remote.name, self.remote.project)

    async def create_profile(self, name: str, *, description: str = "",
                             config: dict[str, str] | None = None,
                             devices: dict[str, dict[str, str]] | None = None) -> Resource:
        check_name("profile", name)
        client = self.rest.client
        body = {"name": name, "description": description, "config": dict(config or {}),
                "devices": {k: dict(v) for k, v in (devices or {}).items()}}
        await change(self.rest, f"profile {name}", lambda: client.api.profiles.post(json=body))
        return await self.get_profile(name)

    async def rename_profile(self, name: str, new_name: str) -> Resource:
        check_name("profile", new_name)
        if name == "default":
            raise InvalidInput("The default profile cannot be renamed.")
        client = self.rest.client
        await change(self.rest, f"profile {name}", lambda: client.api.profiles[
            quote(name, safe="")].post(json={"name": new_name}))
        return await self.get_profile(new_name)

    async def delete_profile(self, name: str) -> None:
        if name == "default":
            raise InvalidInput("The default profile cannot be deleted.")
        try:
            profile = await self.get_profile(name)
        except NotFound:
            raise NotFound(f"There is no profile '{name}' on '{self.remote.name}'.") from None
        if profile.used_by:
            raise Conflict(f"Profile '{name}' is used by {len(profile.used_by)}: "
                           f"{', '.join(profile.used_by)}. Remove it from them first; "
                           f"nothing was changed.", title="Profile in use")
        client = self.rest.client
        await change(self.rest, f"profile {name}",
                     lambda: client.api.profiles[quote(name, safe="")].delete())

    async def set_instance_profiles(self, ref: InstanceRef, profiles: list[str]) -> None:
        wanted = [p.strip() for p in profiles if p.strip()]
        if len(set(wanted)) != len(wanted):
            raise InvalidInput(f"A profile is listed twice for {ref}.")
        known = {p.name for p in await self.list_profiles()}
        missing = [p for p in wanted if p not in known]
        if missing:
            raise NotFound(f"No profile {', '.join(missing)} on '{self.remote.name}'.")

        def edit(data: dict) -> None:
            data["profiles"] = wanted

        try:
            await self.ops.update_instance(ref, edit)
        except OperationFailed as e:  # the daemon's refusal (a device conflict)
            raise InvalidInput(f"{ref} cannot take the profiles {', '.join(wanted)}: "
                               f"{e.message}") from e
