"""Start, stop, restart, pause/resume and delete: the verbs every backend has."""

from __future__ import annotations

from functools import partial
from typing import Awaitable

from backends.deletion import StorageOffer
from backends.errors import AcceleratorUnusable, BackendError, StopTimedOut
from backends.models import Capability, InstanceRef, InstanceStatus

from ..actions import Verb
from ..screens.dialogs import ConfirmDialog, DeleteDialog
from . import bulk
from .context import Context

VERB_CAPABILITY = {
    Verb.START: Capability.START, Verb.STOP: Capability.STOP, Verb.RESTART: Capability.RESTART,
    Verb.FREEZE: Capability.FREEZE, Verb.UNFREEZE: Capability.UNFREEZE,
    Verb.DELETE: Capability.DELETE,
}
"""Backend verb -> the capability it needs."""

PENDING = {
    Verb.START: "starting…", Verb.STOP: "stopping…", Verb.RESTART: "restarting…",
    Verb.FREEZE: "pausing…", Verb.UNFREEZE: "resuming…", Verb.DELETE: "deleting…",
}
"""What the status column says while a verb runs."""


def refusal(ctx: Context, verb: Verb) -> str | None:
    """Why ``verb`` cannot run on ``ctx.ref`` now, in words; None when it can."""
    ref = ctx.ref
    assert ref is not None
    if VERB_CAPABILITY[verb] in ctx.inventory.capabilities(ref):
        return None
    inst = ctx.instance
    state = ctx.inventory.pending.get(ref) or (inst.status.value if inst else "gone")
    return f"Cannot {verb} {ref} now ({state})."


async def run_verb(ctx: Context, verb: Verb) -> None:
    """Run a lifecycle verb, asking first where it destroys (delete) and offering force
    where a graceful stop timed out."""
    if ctx.marked:
        await run_marked(ctx, verb)
        return
    ref = ctx.ref
    assert ref is not None
    why = refusal(ctx, verb)
    if why:
        ctx.notify(why, severity="warning")
        return
    inv = ctx.inventory
    try:
        if verb is Verb.DELETE:
            await _delete(ctx)
        elif verb in (Verb.STOP, Verb.RESTART):
            try:
                await inv.act(ref, verb, PENDING[verb], timeout=ctx.settings.stop_timeout)
            except StopTimedOut as e:
                label = "Force stop" if verb is Verb.STOP else "Force restart"
                if await ctx.ask(ConfirmDialog(f"{label} {ref}?", e.message, label)):
                    await inv.act(ref, verb, PENDING[verb], force=True)
        elif verb is Verb.START:
            try:
                await inv.act(ref, verb, PENDING[verb])
            except AcceleratorUnusable as e:
                if not e.retry_slower:
                    raise
                if await ctx.ask(ConfirmDialog(f"Start {ref} with TCG?", e.message,
                                               "Start with TCG")):
                    await inv.act(ref, verb, PENDING[verb])
        else:
            await inv.act(ref, verb, PENDING[verb])
    except BackendError as e:
        ctx.fail(e, f"{verb.capitalize()} {ref}")


async def run_marked(ctx: Context, verb: Verb) -> None:
    """``verb`` on every marked instance: one confirmation listing them, each tried (a
    failure does not stop the others), each result in the operations view. A running
    instance is deleted by force (the confirmation says so); a stop that times out is
    that row's failure (force is offered on one instance at a time)."""
    inv = ctx.inventory
    refs = list(ctx.marked)
    cannot = [r for r in refs if VERB_CAPABILITY[verb] not in inv.capabilities(r)]
    note = ""
    if cannot:
        note = (f"Not possible now for {len(cannot)}, which are tried anyway and reported: "
                f"{', '.join(str(r) for r in cannot[:6])}.")
    running = [r for r in refs if (i := inv.instances.get(r)) is not None
               and i.status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN)]
    first = button = ""
    if verb is Verb.DELETE:
        note += "\nThis cannot be undone."
        if running:
            them = "It is" if len(running) == 1 else f"{len(running)} of them are"
            first = f"{them} running: stopped by force first."
            button = "Stop and delete" if len(refs) == 1 else "Stop and delete all"
    names = [f"{r} (running)" if r in running and verb is Verb.DELETE else str(r) for r in refs]
    if not await bulk.confirm(ctx.app, verb, names, note.strip(), first=first, button=button,
                              destructive=verb in (Verb.DELETE, Verb.STOP, Verb.RESTART)):
        return

    def work(ref: InstanceRef) -> Awaitable[None]:
        kwargs: dict[str, object] = {}
        if verb in (Verb.STOP, Verb.RESTART):
            kwargs["timeout"] = ctx.settings.stop_timeout
        if verb is Verb.DELETE:
            kwargs["force"] = ref in running
        return inv.act(ref, verb, PENDING[verb], **kwargs)

    await bulk.run_all(ctx.app, inv, verb, [
        bulk.Target(r.remote, r.name, partial(work, r), instance=True) for r in refs])


async def stop_first(ctx: Context, why: str, because: str = "it is copied stopped (cold)"
                     ) -> bool:
    """A running instance must be stopped for ``why`` (e.g. "copy it"; ``because`` says
    why it must): ask, stop it; True when it is stopped (or was not running)."""
    ref, inst = ctx.ref, ctx.instance
    assert ref is not None
    if inst is None or inst.status not in (InstanceStatus.RUNNING, InstanceStatus.FROZEN):
        return True
    if not await ctx.ask(ConfirmDialog(
            f"Stop {ref} first?", f"{ref} is {inst.status.value}; {because}. "
            f"Stop it now and {why}?", f"Stop and {why.split()[0]}")):
        return False
    try:
        await ctx.inventory.act(ref, Verb.STOP, PENDING[Verb.STOP],
                                timeout=ctx.settings.stop_timeout)
    except BackendError as e:
        ctx.notify(e.message, title=f"Stop {ref}", severity="error")
        return False
    return True


async def _delete(ctx: Context) -> None:
    ref, inst = ctx.ref, ctx.instance
    if inst is None or ref is None:
        return
    running = inst.status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN)
    what = "virtual machine" if inst.type.value == "vm" else "container"
    message = f"The {what} {inst.name} on remote {ref.remote} will be deleted"
    message += " with its snapshots. This cannot be undone." if inst.snapshot_count else \
        ". This cannot be undone."
    if running:
        message += f"\n\nIt is {inst.status.value}: it will be stopped by force first."
    offer = await _storage_offer(ctx)
    if isinstance(offer, str):
        message += offer
        offer = StorageOffer()
    if offer.kept:
        message += "\n\n" + "\n".join(f"Kept: {why}." for _item, why in offer.kept)
    storage = list(offer.items)
    title, button = f"Delete {ref}?", "Stop and delete" if running else "Delete"
    if not storage:
        if await ctx.ask(ConfirmDialog(title, message, button)):
            await ctx.inventory.act(ref, Verb.DELETE, PENDING[Verb.DELETE], force=running)
            ctx.notify(f"Deleted {ref}.")
        return
    answer = await ctx.ask(DeleteDialog(title, message, button, storage))
    if answer == "instance":
        await ctx.inventory.act(ref, Verb.DELETE, PENDING[Verb.DELETE], force=running)
        ctx.notify(f"Deleted {ref}; its storage is kept.")
    elif answer == "storage":
        try:
            await ctx.inventory.track(ref, PENDING[Verb.DELETE],
                                      ctx.backend.delete_with_storage(ref, storage,
                                                                      force=running))
        except BackendError as e:
            ctx.notify(e.message, title=f"Delete {ref}", severity="error")
            return
        ctx.notify(f"Deleted {ref} and its storage: {', '.join(storage)}.")


async def _storage_offer(ctx: Context) -> StorageOffer | str:
    """What deleting ``ctx.ref`` keeps and could remove too, and what it keeps regardless
    and why (where the remote can say), or a sentence saying why it could not be listed."""
    if not ctx.can(Capability.DELETE_STORAGE) or ctx.ref is None:
        return StorageOffer()
    try:
        return await ctx.backend.storage_offer(ctx.ref)
    except BackendError as e:
        return f"\n\nIts storage could not be listed ({e.message}): it is kept."


async def start(ctx: Context) -> None:
    await run_verb(ctx, Verb.START)


async def stop(ctx: Context) -> None:
    await run_verb(ctx, Verb.STOP)


async def restart(ctx: Context) -> None:
    await run_verb(ctx, Verb.RESTART)


async def pause(ctx: Context) -> None:
    """Pause a running instance, resume a paused one."""
    inst = ctx.instance
    frozen = inst is not None and inst.status is InstanceStatus.FROZEN
    await run_verb(ctx, Verb.UNFREEZE if frozen else Verb.FREEZE)


async def freeze(ctx: Context) -> None:
    await run_verb(ctx, Verb.FREEZE)


async def unfreeze(ctx: Context) -> None:
    await run_verb(ctx, Verb.UNFREEZE)


async def delete(ctx: Context) -> None:
    await run_verb(ctx, Verb.DELETE)
