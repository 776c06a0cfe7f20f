"""Cluster remotes: move an instance to another member, evacuate and restore a member."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from backends.errors import BackendError
from backends.members import ClusterMember, MemberStatus
from backends.models import Instance, InstanceRef, InstanceStatus

from ..actions import Verb
from ..screens.dialogs import ChoiceDialog, ConfirmDialog
from ..services.inventory import Inventory
from .context import Context
from .lifecycle import PENDING

T = TypeVar("T")


def members_of(ctx: Context) -> list[ClusterMember]:
    return ctx.inventory.members.of(ctx.remote or "")


def is_cluster(ctx: Context) -> bool:
    return bool(members_of(ctx))


async def move_member(ctx: Context) -> None:
    ref, inst, backend = ctx.ref, ctx.instance, ctx.backend
    if ref is None or inst is None:
        return
    choices = [(m.name, f"{m.name}  ({m.status.value}, {_count(m.instances)})")
               for m in members_of(ctx) if m.name != inst.location]
    usable = {m.name for m in members_of(ctx) if m.status is MemberStatus.ONLINE}
    if not choices:
        ctx.notify(f"{ref.remote} has no other member to move {ref.name} to.",
                   severity="warning")
        return
    target = await ctx.ask(ChoiceDialog(f"Move {ref} from {inst.location or '?'} to",
                                        choices, note="Members of the cluster"))
    if not target:
        return
    if target not in usable:
        ctx.notify(f"{target} is not online; nothing can move there now.", severity="error")
        return
    running = inst.status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN)
    restart = False
    if running:
        problem = backend.live_move_problem(inst)
        if problem is not None:
            if not await ctx.ask(ConfirmDialog(
                    f"Stop {ref} to move it?",
                    f"{ref} is {inst.status.value}: {problem}.\n\nStop it, move it to "
                    f"{target} and start it there again?", "Stop, move, start",
                    destructive=False)):
                return
            try:
                await ctx.inventory.act(ref, Verb.STOP, PENDING[Verb.STOP],
                                        timeout=ctx.settings.stop_timeout)
            except BackendError as e:
                ctx.fail(e, f"Stop {ref}")
                return
            restart = True
    ctx.notify(f"Moving {ref} to {target}. To stop it: w (operations), then x on its "
               f"'Migrating instance'.", timeout=6)
    moved = await ctx.on_row(f"moving to {target}…", lambda p: backend.move_to_member(
        ref, target, progress=p))
    if moved is None:
        return
    ctx.notify(f"{ref} is on {moved.location} now.")
    if restart:
        try:
            await ctx.inventory.act(ref, Verb.START, PENDING[Verb.START])
        except BackendError as e:
            ctx.fail(e, f"Start {ref} on {target}")


async def _every_project(ctx: Context) -> list[Instance] | None:
    """The cluster's instances in every project (a member's evacuation touches them all);
    None, with the reason said, when the daemon refuses that list."""
    try:
        return await ctx.backend.cluster_instances()
    except BackendError as e:
        ctx.fail(e, f"List the instances of {ctx.remote}")
        return None


def _count(n: int) -> str:
    return f"{n} instance" if n == 1 else f"{n} instances"


def _label(inst: Instance, shown: str) -> str:
    return inst.name if inst.ref.project == shown else f"{inst.name} (project {inst.ref.project})"


def _fate(inst: Instance) -> str:
    """What evacuation does to ``inst``, after its ``cluster.evacuate`` setting."""
    mode = inst.config.get("cluster.evacuate", "auto")
    running = inst.status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN)
    if mode == "stop":
        return "stopped, stays on the member" if running else "stays, stopped"
    if mode == "live-migrate" and running:
        return "migrated live"
    return "stopped, moved, started again" if running else "moved (stopped)"


async def _tracking(inv: Inventory, refs: list[InstanceRef], label: str,
                    work: Awaitable[T]) -> T:
    """Await ``work`` with ``label`` on every row of ``refs`` meanwhile."""
    for ref in reversed(refs):
        work = inv.track(ref, label, work)
    return await work


async def _member_flow(ctx: Context, verb: str) -> None:
    inv, remote, backend = ctx.inventory, ctx.remote or "", ctx.backend
    wanted = MemberStatus.ONLINE if verb == "evacuate" else MemberStatus.EVACUATED
    members = [m for m in members_of(ctx) if m.status is wanted]
    if not members:
        ctx.notify(f"No member of {remote} is {wanted.value}: nothing to {verb}.",
                   severity="warning")
        return
    member = await ctx.ask(ChoiceDialog(
        f"{verb.capitalize()} which member of {remote}?",
        [(m.name, f"{m.name}  ({_count(m.instances)} in project "
                  f"{inv.remotes[remote].project}, {m.role_text})") for m in members]))
    if not member:
        return
    every = await _every_project(ctx)
    if every is None:
        return
    shown = inv.remotes[remote].project
    if verb == "evacuate":
        affected = [i for i in every if i.location == member]
        lines = [f"  {_label(i, shown)}: {i.status.value} → {_fate(i)}"
                 for i in affected] or ["  (no instances)"]
        message = (f"{member} is marked evacuated and gets no new instances. Its "
                   f"instances, in every project:\n" + "\n".join(lines))
    else:
        affected = [i for i in every if i.config.get("volatile.evacuate.origin") == member]
        message = (f"{member} takes instances again; those evacuated from it come back"
                   + (":\n" + "\n".join(f"  {_label(i, shown)} (now on {i.location})"
                                         for i in affected) if affected else "."))
    if not await ctx.ask(ConfirmDialog(f"{verb.capitalize()} {remote}:{member}?", message,
                                       verb.capitalize(), destructive=verb == "evacuate")):
        return
    refs = [i.ref for i in affected if i.ref.project == shown]  # the rows on screen
    label = "evacuating…" if verb == "evacuate" else "restoring…"
    run = backend.evacuate_member if verb == "evacuate" else backend.restore_member

    def progress(text: str) -> None:
        inv.show_activity(remote, f"{verb} {member}: {text}")
        for ref in refs:
            if f'"{ref.name}"' in text:  # the daemon names the instance it works on
                inv.show_progress(ref, f"{label} {text.split(' in project')[0]}")

    progress("")
    try:
        await _tracking(inv, refs, label, run(member, progress=progress))
    except BackendError as e:
        ctx.fail(e, f"{verb.capitalize()} {remote}:{member}")
        return
    finally:
        inv.show_activity(remote, "")
        inv.refresh_soon(remote)
    await inv.members.refresh(remote)
    now = inv.members.member(remote, member)
    state = f"{now.status.value} ({now.message})" if now else "unknown"
    ctx.notify(f"{remote}:{member} is {state}; {len(affected)} instances "
               f"{'evacuated' if verb == 'evacuate' else 'back'}.")


async def evacuate(ctx: Context) -> None:
    await _member_flow(ctx, "evacuate")


async def restore(ctx: Context) -> None:
    await _member_flow(ctx, "restore")
