"""Copies and names of LXD/Incus instances: clone on the same remote, cold copy or move to
another LXD/Incus remote, rename, description.

Copy/move between remotes uses the migration API in **pull** mode (``docs/protocols.md``,
section "LXD/Incus REST"): the source daemon offers the instance (``POST
/1.0/instances/<n> {"migration": true}`` → secrets), the target daemon connects to the
source's HTTPS address. corral itself moves no data, so it may talk to the source over its
unix socket; the source must listen on the network (``core.https_address``) and the target
must reach that address. The migration websockets are ``AllowUntrusted`` with the secret as
credential, so the target needs no trust on the source; it verifies the source with the
certificate corral hands over.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from pylxd import exceptions as pylxd_exc

from ..base import Backend
from ..errors import BackendError, Conflict, InvalidInput, OperationFailed, Unreachable, Unsupported
from ..models import Instance, InstanceRef, InstanceStatus
from . import convert
from .rest import DONE, Rest


class Transfer(Backend):
    """Clone, copy/move, rename and description of :class:`~backends.lxd.backend.LXDBackend`."""

    rest: Rest

    def copy_problem(self, there: Backend, *, move: bool = False) -> str | None:
        """Another LXD or Incus remote pulls the instance from this one (either way)."""
        if there is self or there.remote.name == self.remote.name:
            return "it is the same remote"
        if not isinstance(getattr(there, "rest", None), Rest):
            return f"{there.remote.name} is not an LXD or Incus remote"
        return None

    async def clone_instance(self, ref: InstanceRef, new_name: str, *,
                             with_snapshots: bool = True, linked: bool = False,
                             progress: Callable[[str], None] | None = None) -> Instance:
        """A copy of ``ref`` on the same remote (``POST /1.0/instances``, source ``copy``).

        Raises:
            Unsupported: ``linked`` (LXD/Incus copies the disk; it has no linked clones).
            InvalidInput / Conflict: bad or taken name (nothing made).
            OperationFailed: the copy failed (nothing left behind).
        """
        if linked:
            raise self._unsupported("make linked clones")
        rest = self.rest
        report = progress or (lambda text: None)
        client = rest.client
        data = await rest.instance(ref.name)
        await rest.check_free(new_name)
        # what `lxc copy` sends: the server takes no profiles/devices from the source
        body = {"name": new_name, **convert.copied_fields(data),
                "source": {"type": "copy", "source": ref.name,
                           "instance_only": not with_snapshots,
                           "container_only": not with_snapshots}}
        report(f"copying {ref.name} to {new_name}")
        op_id = await rest.call(
            lambda: convert.operation_id(client.api.instances.post(json=body).json()))
        await rest.follow_creation(new_name, op_id, report,
                                   failed=f"Copying {ref} to '{new_name}' failed")
        rest.names.add(new_name)
        report("done")
        return await self.get_instance(rest.ref_of(new_name))

    # Copy / move to another remote -------------------------------------------------------

    async def _listening(self) -> tuple[list[str], str]:
        """This server's network addresses (``host:port``) and certificate (PEM)."""
        client = self.rest.client
        meta = await self.rest.call(lambda: client.api.get().json()["metadata"])
        env = meta.get("environment") or {}
        addresses = [str(a) for a in env.get("addresses") or () if a]
        if not self.remote.is_unix:
            mine = self.remote.address.split("://", 1)[1].rstrip("/")
            addresses = [mine] + [a for a in addresses if a != mine]
        return addresses, str(env.get("certificate") or "")

    async def copy_to(self, ref: InstanceRef, target: Backend, new_name: str, *,
                      move: bool = False, with_snapshots: bool = True,
                      progress: Callable[[str], None] | None = None) -> Instance:
        """Cold copy (or move) of the stopped instance ``ref`` to the remote ``target``,
        by the migration API in pull mode (the target daemon pulls from this one).

        Nothing happens to ``ref`` unless the copy exists on the target; a move deletes
        the source only then.

        Raises:
            Unreachable: the target cannot be reached (nothing done).
            Conflict: ``ref`` is running or frozen, or ``new_name`` is taken on the target.
            InvalidInput: a bad name; the target lacks a profile the instance uses; the
                target is not an LXD/Incus remote.
            Unsupported: this server does not listen on the network, so it cannot be
                pulled from.
            OperationFailed: the transfer failed (nothing left on the target).
        """
        rest = self.rest
        report = progress or (lambda text: None)
        verb = "move" if move else "copy"
        if target is self or (target.remote.name == self.remote.name):
            raise InvalidInput(f"That is the same remote: use clone (or rename) instead of "
                               f"a {verb}.")
        there = getattr(target, "rest", None)
        if not isinstance(there, Rest):
            raise InvalidInput(f"'{target.remote.name}' is not an LXD or Incus remote: it "
                               f"cannot pull {ref.name} from '{self.remote.name}'.")
        try:
            _ = there.client  # Unreachable when not connected
        except Unreachable:
            raise Unreachable(f"Cannot {verb} to '{target.remote.name}': it is not "
                              f"connected. Nothing was changed.") from None
        try:
            await there.call(lambda: there.client.api.get().json())
        except BackendError as e:
            raise type(e)(f"Cannot {verb} to '{target.remote.name}': {e.message} Nothing "
                          f"was changed.") from e
        await there.check_free(new_name)
        client = rest.client
        data = await rest.instance(ref.name)
        status = convert.status_of(data.get("status"))
        if status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN):
            raise Conflict(f"{ref} is {status.value}: stop it first, or let corral stop it "
                           f"(a {verb} to another remote takes a stopped instance).")
        profiles = list(data.get("profiles") or [])
        urls = await there.call(
            lambda: there.client.api.profiles.get().json()["metadata"] or [])
        there_names = {convert.url_name(u) for u in urls}
        missing = [p for p in profiles if p not in there_names]
        if missing:
            raise InvalidInput(f"'{target.remote.name}' has no profile "
                               f"{', '.join(repr(p) for p in missing)}, which {ref} uses. "
                               f"Create it there first.")
        addresses, cert = await self._listening()
        if not addresses or not cert:
            raise Unsupported(
                f"'{self.remote.name}' does not listen on the network (core.https_address "
                f"is unset), so '{target.remote.name}' cannot pull {ref.name} from it. "
                f"Set core.https_address on '{self.remote.name}'.")
        only = not with_snapshots

        report(f"preparing the {verb} of {ref.name}")

        def _offer() -> tuple[str, dict[str, str]]:
            r = client.api.instances[ref.name].post(json={
                "migration": True, "live": False, "instance_only": only,
                "container_only": only})
            body = r.json()
            secrets = (body.get("metadata") or {}).get("metadata") or {}
            return convert.operation_id(body), {k: v for k, v in secrets.items()
                                                if isinstance(v, str)}

        src_op, secrets = await rest.call(_offer)
        tgt_op = ""
        try:
            body = {
                "name": new_name,
                **convert.copied_fields(data),
                "source": {
                    "type": "migration", "mode": "pull",
                    "operation": f"https://{addresses[0]}/1.0/operations/{src_op}",
                    "certificate": cert, "secrets": secrets,
                    "instance_only": only, "container_only": only, "live": False,
                },
            }
            if self.remote.project != "default":
                body["source"]["operation"] += f"?project={self.remote.project}"

            tgt_op = await there.call(
                lambda: convert.operation_id(there.client.api.instances.post(json=body).json()))
            report(f"{'moving' if move else 'copying'} {ref.name} to "
                   f"{target.remote.name}:{new_name}")
            meta = await there.follow(tgt_op, report, timeout=3600)
            if meta.get("status") != "Success":
                err = str(meta.get("err") or meta.get("status"))
                hint = ""
                if "Unknown configuration key" in err and with_snapshots:
                    hint = (f" '{target.remote.name}' ({there.product} "
                            f"{there.info.version if there.info else ''}) does not know a "
                            f"setting the snapshots carry; a {verb} without snapshots may "
                            f"work.").replace(" )", ")")
                raise OperationFailed(
                    f"The {verb} of {ref} to '{target.remote.name}' failed: "
                    f"{err.rstrip('.')}.{hint}")
            inst = await target.get_instance(there.ref_of(new_name))
        except BaseException as e:
            cleanup = asyncio.ensure_future(_undo_migration(rest, there, new_name, src_op,
                                                            tgt_op))
            try:
                await asyncio.shield(cleanup)
            except Exception:  # the first error is the one to show
                pass
            if isinstance(e, BackendError) and not isinstance(e, OperationFailed) \
                    and not isinstance(e, Conflict):
                raise OperationFailed(f"The {verb} of {ref} to '{target.remote.name}' "
                                      f"failed: {e.message}") from e
            raise
        there.names.add(new_name)
        await rest.call(rest.wait_quietly, src_op, 60, timeout=90)
        if move:
            report(f"deleting {ref.name} from {self.remote.name}")
            try:
                await self.delete(ref)
            except BackendError as e:
                raise OperationFailed(
                    f"{ref} was copied to {target.remote.name}:{new_name}, but could not be "
                    f"deleted here: {e.message}", title="Copied, not moved") from e
        report("done")
        return inst

    # Names ---------------------------------------------------------------------------

    async def rename_instance(self, ref: InstanceRef, new_name: str) -> Instance:
        """Rename a stopped instance (its snapshots go along).

        Raises:
            Conflict: it is running, or the name is taken.
            InvalidInput: a bad name.
        """
        rest = self.rest
        inst = await self.get_instance(ref)
        if inst.status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN):
            raise Conflict(f"{ref} is {inst.status.value}: stop it first to rename it.")
        if new_name == ref.name:
            return inst
        await rest.check_free(new_name)
        client = rest.client
        await rest.call(lambda: rest.wait(
            client.api.instances[ref.name].post(json={"name": new_name}), 120), timeout=150)
        rest.forget(ref)
        rest.names.add(new_name)
        return await self.get_instance(rest.ref_of(new_name))

    async def set_description(self, ref: InstanceRef, text: str) -> None:
        text = text.strip()
        if len(text) > 1024:
            raise InvalidInput("A description: at most 1024 characters.")

        def change(data: dict[str, Any]) -> None:
            data["description"] = text

        await self.rest.update_instance(ref, change)


async def _undo_migration(source: Rest, target: Rest, name: str, src_op: str,
                          tgt_op: str) -> None:
    """After a failed/cancelled transfer: end both operations, remove what the target
    made."""
    for rest, op in ((target, tgt_op), (source, src_op)):
        if not op:
            continue

        def _cancel(rest: Rest = rest, op: str = op) -> None:
            node = rest.client.api.operations[op]
            try:
                meta = node.get().json()["metadata"]
                if meta.get("status") not in DONE and meta.get("may_cancel"):
                    node.delete()
            except pylxd_exc.LXDAPIException:
                pass

        try:
            await rest.call(_cancel)
        except BackendError:
            pass
    if tgt_op:
        try:
            await target.call(target.wait_quietly, tgt_op, 60, timeout=90)
        except BackendError:
            pass
    await target.remove_if_made(name)
