"""Projects of an LXD/Incus remote: list with their features, create, delete (refused in
words while the project holds anything). Showing a remote in another project is the
remote's ``project``: the UI reconnects it with another one."""

from __future__ import annotations

from urllib.parse import quote

from ..base import Backend
from ..errors import Conflict, InvalidInput, NotFound
from ..models import Resource
from . import resource_convert as rc
from .objects import change, check_name, metadata
from .rest import Rest


class Projects(Backend):
    """The project verbs of :class:`~backends.lxd.backend.LXDBackend`."""

    rest: Rest

    async def list_projects(self) -> list[Resource]:
        rest = self.rest  # projects are the server's: asked for without ?project=
        items = await rest.call(rest.fast.get_json, "projects", {"recursion": "1"}) or []
        return sorted((rc.to_project(d, self.remote.name) for d in items),
                      key=lambda r: (r.name != "default", r.name))

    async def create_project(self, name: str, *, description: str = "") -> Resource:
        check_name("project", name)
        client = self.rest.client
        body = {"name": name, "description": description, "config": {
            "features.images": "true", "features.profiles": "true",
            "features.storage.volumes": "true"}}
        await change(self.rest, f"project {name}", lambda: client.api.projects.post(json=body))
        data = await self.rest.call(
            lambda: metadata(client.api.projects[quote(name, safe="")].get()))
        return rc.to_project(data, self.remote.name)

    async def delete_project(self, name: str) -> None:
        if name == "default":
            raise InvalidInput("The default project cannot be deleted.")
        client = self.rest.client
        try:
            data = await self.rest.call(
                lambda: metadata(client.api.projects[quote(name, safe="")].get()))
        except NotFound:
            raise NotFound(f"There is no project '{name}' on '{self.remote.name}'.") from None
        used = [u for u in rc.users(data) if not u.startswith("profile default")]
        if used:
            raise Conflict(f"Project '{name}' still holds {', '.join(used)}; nothing was "
                           f"changed.", title="Project in use")
        await change(self.rest, f"project {name}",
                     lambda: client.api.projects[quote(name, safe="")].delete())
