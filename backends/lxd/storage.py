"""Storage of an LXD/Incus remote: pools with their space, custom volumes (create, resize,
delete, attach to / detach from an instance, copy within the remote or to another one by
the migration API in pull mode, as instances are copied in :mod:`.transfer`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from ..base import Backend
from ..errors import Conflict, InvalidInput, NotFound, OperationFailed, Unsupported
from ..models import InstanceRef, Resource
from ..units import format_size
from . import convert
from . import resource_convert as rc
from .fasthttp import HTTPStatusError, api_path
from .objects import change, check_name, metadata
from .ops import Ops
from .rest import Rest


def _size_text(size: int) -> str:
    if size <= 0:
        raise InvalidInput("A volume size must be more than 0 bytes.")
    return format_size(size)


class Storage(Backend):
    """The storage verbs of :class:`~backends.lxd.backend.LXDBackend`."""

    rest: Rest
    ops: Ops

    def _pool(self, pool: str) -> Any:
        return self.rest.client.api["storage-pools"][quote(pool, safe="")]

    async def list_storage_pools(self) -> list[Resource]:
        rest = self.rest

        def _do() -> list[tuple[dict, dict | None]]:  # the fast GET path: no pylxd
            items = rest.fast.get_json("storage-pools", rest.in_project(recursion="1")) or []
            out = []
            for d in items:
                try:
                    res = rest.fast.get_json(api_path("storage-pools", d["name"], "resources"),
                                             rest.in_project())
                except HTTPStatusError:
                    res = None
                out.append((d, res))
            return out

        pairs = await rest.call(_do)
        return sorted((rc.to_pool(d, res, self.remote.name, self.remote.project)
                       for d, res in pairs), key=lambda r: r.name)

    async def list_volumes(self, pool: str) -> list[Resource]:
        try:
            items = await self.rest.get("storage-pools", pool, "volumes", "custom",
                                        recursion="1") or []
        except NotFound:
            raise NotFound(f"There is no storage pool '{pool}' on '{self.remote.name}'.") \
                from None
        return sorted((rc.to_volume(d, pool, self.remote.name, self.remote.project)
                       for d in items if d.get("type", "custom") == "custom"),
                      key=lambda r: r.name)

    async def _volume(self, pool: str, name: str) -> Resource:
        node = self._pool(pool).volumes.custom[quote(name, safe="")]
        try:
            data = await self.rest.call(lambda: metadata(node.get()))
        except NotFound:
            raise NotFound(f"There is no volume '{name}' in pool '{pool}' on "
                           f"'{self.remote.name}'.") from None
        return rc.to_volume(data, pool, self.remote.name, self.remote.project)

    async def create_volume(self, pool: str, name: str, *, size: int | None = None,
                            description: str = "") -> Resource:
        check_name("volume", name)
        body: dict[str, Any] = {"name": name, "type": "custom", "content_type": "filesystem",
                                "description": description, "config": {}}
        if size is not None:
            body["config"]["size"] = _size_text(size)
        node = self._pool(pool)
        rest = self.rest
        await change(rest, f"volume {pool}/{name}",
                     lambda: self.ops.wait(node.volumes.custom.post(json=body), 120))
        return await self._volume(pool, name)

    async def resize_volume(self, pool: str, name: str, size: int) -> None:
        node = self._pool(pool).volumes.custom[quote(name, safe="")]
        await self._volume(pool, name)
        await change(self.rest, f"volume {pool}/{name}", lambda: self.ops.wait(
            node.patch(json={"config": {"size": _size_text(size)}}), 120))

    async def delete_volume(self, pool: str, name: str) -> None:
        vol = await self._volume(pool, name)
        if vol.used_by:
            raise Conflict(f"Volume {pool}/{name} is used by {', '.join(vol.used_by)}: detach "
                           f"it first; nothing was changed.", title="Volume in use")
        node = self._pool(pool).volumes.custom[quote(name, safe="")]
        await change(self.rest, f"volume {pool}/{name}",
                     lambda: self.ops.wait(node.delete(), 120))

    async def attach_volume(self, pool: str, name: str, ref: InstanceRef, path: str, *,
                            device: str = "") -> str:
        path = path.strip()
        if not path.startswith("/"):
            raise InvalidInput(f"'{path}' is not an absolute path inside {ref}.")
        await self._volume(pool, name)
        device = device.strip() or name

        def edit(data: dict) -> str:
            devices = data["devices"]
            taken = set(devices) | set(data.get("expanded_devices") or {})
            dev = device
            n = 1
            while dev in taken:
                dev, n = f"{device}{n}", n + 1
            for d in (data.get("expanded_devices") or {}).values():
                if d.get("type") == "disk" and d.get("path") == path:
                    raise InvalidInput(f"{ref} already has a disk at {path}.")
            devices[dev] = {"type": "disk", "pool": pool, "source": name, "path": path}
            return dev

        try:
            return await self.ops.update_instance(ref, edit)
        except OperationFailed as e:
            raise InvalidInput(f"{pool}/{name} cannot be attached to {ref}: {e.message}") from e

    async def detach_volume(self, pool: str, name: str, ref: InstanceRef) -> None:
        def edit(data: dict) -> None:
            found = [k for k, d in data["devices"].items() if d.get("type") == "disk"
                     and d.get("pool") == pool and d.get("source") == name]
            if not found:
                raise NotFound(f"{pool}/{name} is not attached to {ref} (or only through a "
                               f"profile).")
            for k in found:
                del data["devices"][k]

        await self.ops.update_instance(ref, edit)

    async def copy_volume(self, pool: str, name: str, target: Any, target_pool: str,
                          new_name: str, *,
                          progress: Callable[[str], None] | None = None) -> None:
        report = progress or (lambda text: None)
        check_name("volume", new_name)
        there = getattr(target, "rest", None)
        if not isinstance(there, Rest):
            raise InvalidInput(f"'{target.remote.name}' is not an LXD or Incus remote.")
        await self._volume(pool, name)
        body: dict[str, Any] = {"name": new_name, "type": "custom"}
        src_op = ""
        if there is self.rest:
            body["source"] = {"type": "copy", "pool": pool, "name": name}
        else:
            addresses, cert = await _listening(self)
            node = self._pool(pool).volumes.custom[quote(name, safe="")]

            def _offer() -> tuple[str, dict[str, str]]:
                r = node.post(json={"name": name, "migration": True})
                b = r.json()
                secrets = (b.get("metadata") or {}).get("metadata") or {}
                return convert.operation_id(b), {k: v for k, v in secrets.items()
                                                 if isinstance(v, str)}

            src_op, secrets = await change(self.rest, f"volume {pool}/{name}", _offer)
            url = f"https://{addresses[0]}/1.0/operations/{src_op}"
            if self.remote.project != "default":
                url += f"?project={self.remote.project}"
            body["source"] = {"type": "migration", "mode": "pull", "operation": url,
                              "certificate": cert, "secrets": secrets}
        tnode = there.client.api["storage-pools"][quote(target_pool, safe="")]
        report(f"copying {pool}/{name} to {target.remote.name}:{target_pool}/{new_name}")
        try:
            op = await change(there, f"volume {target_pool}/{new_name}", lambda: convert
                              .operation_id(tnode.volumes.custom.post(json=body).json()))
            meta = (await target.ops.follow(op, report, timeout=3600) if op
                    else {"status": "Success"})
        except BaseException:
            if src_op:
                await asyncio.shield(self.rest.call(self.ops.wait_quietly, src_op, 5))
            raise
        if meta.get("status") != "Success":
            raise OperationFailed(f"Copying {pool}/{name} failed: "
                                  f"{meta.get('err') or meta.get('status')}.")
        report("done")


async def _listening(backend: Storage) -> tuple[list[str], str]:
    """The source's network addresses and certificate (a pull needs both)."""
    rest = backend.rest
    meta = await rest.call(lambda: rest.client.api.get().json()["metadata"])
    env = meta.get("environment") or {}
    addresses = [str(a) for a in env.get("addresses") or () if a]
    if not backend.remote.is_unix:
        mine = backend.remote.address.split("://", 1)[1].rstrip("/")
        addresses = [mine] + [a for a in addresses if a != mine]
    cert = str(env.get("certificate") or "")
    if not addresses or not cert:
        raise Unsupported(f"'{backend.remote.name}' does not listen on the network "
                          f"(core.https_address is unset): another remote cannot copy from it.")
    return addresses, cert


