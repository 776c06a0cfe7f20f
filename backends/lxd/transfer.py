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

from dataclasses import dataclass, field
from typing import Any, Callable

from ..base import Backend
from ..errors import BackendError, Conflict, InvalidInput, OperationFailed, Unreachable, Unsupported
from ..models import Instance, InstanceRef, InstanceStatus
from ..steps import Steps
from . import convert
from .known import Known
from .lazy import pylxd_exc
from .ops import DONE, Ops
from .rest import Rest


class Transfer(Backend):
    """Clone, copy/move, rename and description of :class:`~backends.lxd.backend.LXDBackend`."""

    rest: Rest
    ops: Ops
    known: Known

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
        await self.known.check_free(new_name)
        # what `lxc copy` sends: the server takes no profiles/devices from the source
        body = {"name": new_name, **convert.copied_fields(data),
                "source": {"type": "copy", "source": ref.name,
                           "instance_only": not with_snapshots,
                           "container_only": not with_snapshots}}
        report(f"copying {ref.name} to {new_name}")
        op_id = await rest.call(
            lambda: convert.operation_id(client.api.instances.post(json=body).json()))
        await self.ops.follow_creation(new_name, op_id, report,
                                       failed=f"Copying {ref} to '{new_name}' failed")
        self.known.names.add(new_name)
        report("done")
        return await self.get_instance(self.known.ref_of(new_name))

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
        c = _Copy(ref, await self._copy_target(ref, target, new_name, move), new_name, move,
                  with_snapshots, progress or (lambda text: None))
        c.data = await self._copy_source(c)
        c.addresses, c.cert = await self._listening()
        if not c.addresses or not c.cert:
            raise Unsupported(
                f"'{self.remote.name}' does not listen on the network (core.https_address "
                f"is unset), so '{target.remote.name}' cannot pull {ref.name} from it. "
                f"Set core.https_address on '{self.remote.name}'.")
        c.report(f"preparing the {c.verb} of {ref.name}")
        async with Steps() as steps:
            await self._offer_migration(c, steps)
            inst = await self._pull(c, steps)
        c.there.known.names.add(new_name)
        await self.rest.call(self.ops.wait_quietly, c.src_op, 60, timeout=90)
        if move:
            c.report(f"deleting {ref.name} from {self.remote.name}")
            try:
                await self.delete(ref)
            except BackendError as e:
                raise OperationFailed(
                    f"{ref} was copied to {target.remote.name}:{new_name}, but could not be "
                    f"deleted here: {e.message}", title="Copied, not moved") from e
        c.report("done")
        return inst

    async def _copy_target(self, ref: InstanceRef, target: Backend, new_name: str,
                           move: bool) -> Transfer:
        """Step 1 of :meth:`copy_to`: the target is another LXD/Incus remote, answers, and
        has ``new_name`` free."""
        verb = "move" if move else "copy"
        if target is self or (target.remote.name == self.remote.name):
            raise InvalidInput(f"That is the same remote: use clone (or rename) instead of "
                               f"a {verb}.")
        if not isinstance(target, Transfer) or not isinstance(target.rest, Rest):
            raise InvalidInput(f"'{target.remote.name}' is not an LXD or Incus remote: it "
                               f"cannot pull {ref.name} from '{self.remote.name}'.")
        there = target.rest
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
        await target.known.check_free(new_name)
        return target

    async def _copy_source(self, c: _Copy) -> dict[str, Any]:
        """Step 2: the instance is stopped and the target has every profile it uses; its
        JSON."""
        data = await self.rest.instance(c.ref.name)
        status = convert.status_of(data.get("status"))
        if status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN):
            raise Conflict(f"{c.ref} is {status.value}: stop it first, or let corral stop it "
                           f"(a {c.verb} to another remote takes a stopped instance).")
        there = c.there.rest
        urls = await there.call(
            lambda: there.client.api.profiles.get().json()["metadata"] or [])
        there_names = {convert.url_name(u) for u in urls}
        missing = [p for p in data.get("profiles") or [] if p not in there_names]
        if missing:
            raise InvalidInput(f"'{c.there.remote.name}' has no profile "
                               f"{', '.join(repr(p) for p in missing)}, which {c.ref} uses. "
                               f"Create it there first.")
        return data

    async def _offer_migration(self, c: _Copy, steps: Steps) -> None:
        """Step 3: this server offers the instance (an operation with secrets); undone by
        cancelling that operation."""
        client, only = self.rest.client, not c.with_snapshots

        def _offer() -> tuple[str, dict[str, str]]:
            r = client.api.instances[c.ref.name].post(json={
                "migration": True, "live": False, "instance_only": only,
                "container_only": only})
            body = r.json()
            secrets = (body.get("metadata") or {}).get("metadata") or {}
            return convert.operation_id(body), {k: v for k, v in secrets.items()
                                                if isinstance(v, str)}

        c.src_op, c.secrets = await self.rest.call(_offer)
        steps.undo("the migration offered here", lambda: _end_operation(self.rest, c.src_op))

    async def _pull(self, c: _Copy, steps: Steps) -> Instance:
        """Step 4: the target pulls the instance; undone by ending both sides of the
        migration and removing what the target made. A failure other than a refusal or a
        conflict is reported as this copy's."""
        there = c.there
        steps.undo(f"{c.new_name} on '{there.remote.name}'",
                   lambda: _undo_pull(self.rest, there, c))
        try:
            c.tgt_op = await there.rest.call(lambda: convert.operation_id(
                there.rest.client.api.instances.post(json=self._pull_body(c)).json()))
            c.report(f"{'moving' if c.move else 'copying'} {c.ref.name} to "
                     f"{there.remote.name}:{c.new_name}")
            meta = await there.ops.follow(c.tgt_op, c.report, timeout=3600)
            if meta.get("status") != "Success":
                raise OperationFailed(self._pull_failed(c, str(meta.get("err")
                                                               or meta.get("status"))))
            return await there.get_instance(there.known.ref_of(c.new_name))
        except BackendError as e:
            if isinstance(e, (OperationFailed, Conflict)):
                raise
            raise OperationFailed(f"The {c.verb} of {c.ref} to '{there.remote.name}' "
                                  f"failed: {e.message}") from e

    def _pull_body(self, c: _Copy) -> dict[str, Any]:
        only = not c.with_snapshots
        body: dict[str, Any] = {
            "name": c.new_name,
            **convert.copied_fields(c.data),
            "source": {
                "type": "migration", "mode": "pull",
                "operation": f"https://{c.addresses[0]}/1.0/operations/{c.src_op}",
                "certificate": c.cert, "secrets": c.secrets,
                "instance_only": only, "container_only": only, "live": False,
            },
        }
        if self.remote.project != "default":
            body["source"]["operation"] += f"?project={self.remote.project}"
        return body

    def _pull_failed(self, c: _Copy, err: str) -> str:
        there = c.there
        hint = ""
        if "Unknown configuration key" in err and c.with_snapshots:
            version = there.known.info.version if there.known.info else ""
            hint = (f" '{there.remote.name}' ({there.rest.product} {version}) does not know "
                    f"a setting the snapshots carry; a {c.verb} without snapshots may "
                    f"work.").replace(" )", ")")
        return f"The {c.verb} of {c.ref} to '{there.remote.name}' failed: {err.rstrip('.')}.{hint}"

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
        await self.known.check_free(new_name)
        client = rest.client
        await rest.call(lambda: self.ops.wait(
            client.api.instances[ref.name].post(json={"name": new_name}), 120), timeout=150)
        self.known.forget(ref)
        self.known.names.add(new_name)
        return await self.get_instance(self.known.ref_of(new_name))

    async def set_description(self, ref: InstanceRef, text: str) -> None:
        text = text.strip()
        if len(text) > 1024:
            raise InvalidInput("A description: at most 1024 characters.")

        def change(data: dict[str, Any]) -> None:
            data["description"] = text

        await self.ops.update_instance(ref, change)


@dataclass
class _Copy:
    """One :meth:`Transfer.copy_to` as its steps fill it in."""

    ref: InstanceRef
    there: Transfer
    new_name: str
    move: bool
    with_snapshots: bool
    report: Callable[[str], None]
    data: dict[str, Any] = field(default_factory=dict)
    addresses: list[str] = field(default_factory=list)
    cert: str = ""
    src_op: str = ""
    secrets: dict[str, str] = field(default_factory=dict)
    tgt_op: str = ""

    @property
    def verb(self) -> str:
        return "move" if self.move else "copy"


async def _end_operation(rest: Rest, op: str) -> None:
    """Cancel operation ``op`` where it still runs and may be cancelled (else leave it)."""
    if not op:
        return

    def _cancel() -> None:
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


async def _undo_pull(source: Rest, there: Transfer, c: _Copy) -> None:
    """After a failed or cancelled pull: end both operations, remove what the target
    made."""
    await _end_operation(there.rest, c.tgt_op)
    await _end_operation(source, c.src_op)
    if c.tgt_op:
        try:
            await there.rest.call(there.ops.wait_quietly, c.tgt_op, 60, timeout=90)
        except BackendError:
            pass
    await there.ops.remove_if_made(c.new_name)
