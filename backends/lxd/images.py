"""The image store of an LXD/Incus remote: publish an instance (or one of its snapshots) as
an image, list the images, delete one."""

from __future__ import annotations

from typing import Any, Callable
from urllib.parse import quote

from ..base import Backend
from ..errors import Conflict, InvalidInput, NotFound, OperationFailed
from ..models import ImageInfo, InstanceRef, InstanceStatus
from . import convert
from .lazy import pylxd_exc
from .ops import Ops
from .rest import Rest


class Images(Backend):
    """The image verbs of :class:`~backends.lxd.backend.LXDBackend`."""

    rest: Rest
    ops: Ops

    async def list_images(self) -> list[ImageInfo]:
        items = await self.rest.get("images", recursion="1") or []
        images = [convert.to_image(d) for d in items]
        images.sort(key=lambda i: (i.aliases == (), [a.lower() for a in i.aliases],
                                   i.fingerprint))
        return images

    async def publish_image(self, ref: InstanceRef, *, snapshot: str = "", alias: str = "",
                            public: bool = False, description: str = "",
                            progress: Callable[[str], None] | None = None) -> str:
        """Make an image of a stopped instance, or of one of its snapshots; returns its
        fingerprint.

        Raises:
            Conflict: the instance runs (and no snapshot was named), or the alias is taken.
            NotFound: no such snapshot.
            OperationFailed: the daemon failed (nothing is left).
        """
        report = progress or (lambda text: None)
        alias = alias.strip()
        if alias and (any(c in alias for c in "/ \t\n:") or len(alias) > 255):
            raise InvalidInput(f"Image alias '{alias}': no slashes, colons or spaces.")
        rest = self.rest
        inst = await self.get_instance(ref)
        client = rest.client
        if snapshot:
            try:
                await rest.call(lambda: client.api.instances[ref.name]
                                .snapshots[quote(snapshot, safe="")].get().json())
            except NotFound:
                raise NotFound(f"{ref} has no snapshot '{snapshot}'.") from None
            source = {"type": "snapshot", "name": f"{ref.name}/{snapshot}"}
        else:
            if inst.status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN):
                raise Conflict(f"{ref} is {inst.status.value}: stop it first, or publish one "
                               f"of its snapshots (an image of a running instance would not "
                               f"be consistent).")
            source = {"type": "instance", "name": ref.name}
        if alias:
            try:
                await rest.call(lambda: client.api.images.aliases[quote(alias, safe="")]
                                .get().json())
            except NotFound:
                pass
            else:
                raise Conflict(f"The image alias '{alias}' is already taken on "
                               f"'{self.remote.name}'.")
        body: dict[str, Any] = {"source": source, "public": bool(public)}
        if description:
            body["properties"] = {"description": description}
        if alias:
            body["aliases"] = [{"name": alias, "description": ""}]
        what = f"{ref.name}/{snapshot}" if snapshot else ref.name
        report(f"publishing {what}")
        op_id = await rest.call(
            lambda: convert.operation_id(client.api.images.post(json=body).json()))
        meta = await self.ops.follow(op_id, report, timeout=3600)
        if meta.get("status") != "Success":
            raise OperationFailed(f"Publishing {what} failed: "
                                  f"{meta.get('err') or meta.get('status')}.")
        fingerprint = str((meta.get("metadata") or {}).get("fingerprint") or "")
        if not fingerprint:
            raise OperationFailed(f"{rest.product} published {what} but named no image.")
        if alias:
            def _ensure_alias() -> None:
                try:
                    client.api.images.aliases[quote(alias, safe="")].get()
                except pylxd_exc.NotFound:
                    client.api.images.aliases.post(json={"name": alias,
                                                         "target": fingerprint})

            await rest.call(_ensure_alias)
        report("done")
        return fingerprint

    async def delete_image(self, fingerprint: str) -> None:
        fingerprint = fingerprint.strip()
        if not fingerprint:
            raise InvalidInput("Which image? (no fingerprint given)")
        client = self.rest.client

        def _do() -> None:
            try:
                self.ops.wait(client.api.images[fingerprint].delete(), 120)
            except pylxd_exc.NotFound:
                raise NotFound(f"There is no image {fingerprint[:12]} on "
                               f"'{self.remote.name}'.") from None

        await self.rest.call(_do, timeout=150)
