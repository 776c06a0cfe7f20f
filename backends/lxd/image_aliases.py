"""Image aliases of an LXD/Incus remote, and copying an image to another remote (the
target pulls it from this one, as ``lxc image copy`` does)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from ..base import Backend
from ..errors import Conflict, InvalidInput, NotFound, OperationFailed
from . import convert
from .objects import change
from .ops import Ops
from .rest import Rest


def _alias_problem(alias: str) -> str | None:
    if not alias or any(c in alias for c in "/ \t\n:") or len(alias) > 255:
        return "an alias needs a name without slashes, colons or spaces."
    return None


class ImageAliases(Backend):
    """Alias and copy verbs of :class:`~backends.lxd.backend.LXDBackend`."""

    rest: Rest
    ops: Ops

    async def add_image_alias(self, fingerprint: str, alias: str) -> None:
        alias = alias.strip()
        problem = _alias_problem(alias)
        if problem:
            raise InvalidInput(f"'{alias}': {problem}")
        client = self.rest.client
        try:
            await self.rest.call(lambda: client.api.images.aliases[quote(alias, safe="")]
                                 .get())
        except NotFound:
            pass
        else:
            raise Conflict(f"The alias '{alias}' is already taken on '{self.remote.name}'.")
        await change(self.rest, f"alias {alias}", lambda: client.api.images.aliases.post(
            json={"name": alias, "target": fingerprint, "description": ""}))

    async def remove_image_alias(self, alias: str) -> None:
        client = self.rest.client
        try:
            await change(self.rest, f"alias {alias}", lambda: client.api.images.aliases[
                quote(alias, safe="")].delete())
        except NotFound:
            raise NotFound(f"There is no alias '{alias}' on '{self.remote.name}'.") from None

    async def refresh_image(self, fingerprint: str, *,
                            progress: Callable[[str], None] | None = None) -> bool:
        report = progress or (lambda text: None)
        rest = self.rest
        client = rest.client
        try:
            data = await rest.call(lambda: client.api.images[fingerprint].get().json()[
                "metadata"])
        except NotFound:
            raise NotFound(f"There is no image {fingerprint[:12]} on "
                           f"'{self.remote.name}'.") from None
        source = data.get("update_source") or {}
        if not source.get("server"):
            raise InvalidInput(f"Image {fingerprint[:12]} was not copied from an image "
                               f"server: there is nothing to refresh it from.")
        report(f"asking {source.get('server')}")
        op = await change(rest, f"image {fingerprint[:12]}", lambda: convert.operation_id(
            client.api.images[fingerprint].refresh.post(json={}).json()))
        done = await self.ops.follow(op, report, timeout=3600)
        if done.get("status") != "Success":
            raise OperationFailed(f"Refreshing image {fingerprint[:12]} failed: "
                                  f"{done.get('err') or done.get('status')}.")
        report("done")
        return bool((done.get("metadata") or {}).get("refreshed"))

    async def copy_image(self, fingerprint: str, target: Any, *,
                         aliases: tuple[str, ...] = (),
                         progress: Callable[[str], None] | None = None) -> None:
        report = progress or (lambda text: None)
        there = getattr(target, "rest", None)
        if not isinstance(there, Rest) or target.remote.name == self.remote.name:
            raise InvalidInput(f"'{target.remote.name}' is not another LXD or Incus remote.")
        rest = self.rest
        client = rest.client
        meta = await rest.call(lambda: client.api.get().json()["metadata"])
        env = meta.get("environment") or {}
        addresses = [str(a) for a in env.get("addresses") or () if a]
        if not rest.remote.is_unix:
            addresses.insert(0, rest.remote.address.split("://", 1)[1].rstrip("/"))
        if not addresses:
            raise OperationFailed(f"'{self.remote.name}' does not listen on the network: "
                                  f"'{target.remote.name}' cannot fetch images from it.")
        # the token is an operation that runs until the target has used it
        token = await change(rest, f"image {fingerprint[:12]}", lambda: client.api.images[
            fingerprint].secret.post(json={}).json())
        secret = str(((token.get("metadata") or {}).get("metadata") or {}).get("secret") or "")
        body = {"source": {"type": "image", "mode": "pull", "server": f"https://{addresses[0]}",
                           "protocol": rest.product.lower(), "certificate": str(env.get("certificate") or ""),
                           "fingerprint": fingerprint, "secret": secret},
                "aliases": [{"name": a} for a in aliases], "public": False}
        report(f"copying {fingerprint[:12]} to {target.remote.name}")
        op = await change(there, f"image {fingerprint[:12]}", lambda: convert.operation_id(
            there.client.api.images.post(json=body).json()))
        done = await target.ops.follow(op, report, timeout=3600)
        if done.get("status") != "Success":
            raise OperationFailed(f"Copying image {fingerprint[:12]} to "
                                  f"{target.remote.name} failed: "
                                  f"{done.get('err') or done.get('status')}.")
        report("done")
