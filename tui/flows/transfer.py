"""Backups, clones, copies between remotes, names and descriptions."""

from __future__ import annotations

import os
import time
from pathlib import Path

from backends.backup_name import original_name
from backends.base import Backend
from backends.errors import BackendError
from backends.models import Capability, ConnectionState, InstanceRef, InstanceStatus

from .. import format as fmt
from ..actions import Verb
from ..screens.dialogs import ChoiceDialog, ConfirmDialog, InputDialog
from .context import Context
from .lifecycle import PENDING, stop_first


def default_backup_path(ref: InstanceRef, extension: str) -> str:
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return str(base / "corral" / "backups" / f"{ref.remote}-{ref.name}-{stamp}{extension}")


def name_check(backend: Backend):
    """A dialog check for a new instance name on ``backend``."""
    def check(value: str) -> str | None:
        value = value.strip()
        return "A name is needed." if not value else backend.check_name(value)
    return check


def free_name(backend: Backend, base: str) -> str:
    """``base``, or the first of ``base-2``, ``base-3``… that is free on ``backend``: a
    prefilled name the dialog does not refuse as it opens (``base`` when none is)."""
    for candidate in [base, *(f"{base}-{n}" for n in range(2, 21))]:
        if backend.check_name(candidate) is None:
            return candidate
    return base


def snapshots_known(ctx: Context) -> int | None:
    """How many snapshots the instance has (None: not known)."""
    return ctx.instance.snapshot_count if ctx.instance is not None else None


def snapshots_label(ctx: Context, label: str) -> str:
    """``label`` with the number of snapshots when it is known."""
    count = snapshots_known(ctx)
    return f"{label} ({count})" if count else label


def copy_targets(ctx: Context, *, move: bool = False) -> dict[str, Backend]:
    """Other connected, writable remotes an instance of ``ctx.remote`` can be copied (or
    moved) to: those its backend finds no problem with (``copy_problem``)."""
    inv, here = ctx.inventory, ctx.inventory.backends.get(ctx.remote or "")
    return {name: b for name, b in sorted(inv.backends.items())  # the same order every run
            if name != ctx.remote and Capability.COPY_MOVE in inv.remote_capabilities(name)
            and inv.statuses[name].state is ConnectionState.CONNECTED
            and here is not None and here.copy_problem(b, move=move) is None}


async def export(ctx: Context) -> None:
    ref, backend = ctx.ref, ctx.backend
    assert ref is not None
    path = await ctx.ask(InputDialog(
        f"Export {ref}", "Backup file to write",
        default_backup_path(ref, backend.backup_extension), confirm="Export",
        check=lambda v: "That file exists." if os.path.exists(os.path.expanduser(
            v.strip())) else (None if v.strip() else "A path is needed."), path=True))
    if not path:
        return
    which: str | None = "without"
    if snapshots_known(ctx) != 0:  # asked only when there are snapshots to take along
        which = await ctx.ask(ChoiceDialog(
            f"Export {ref}", [("with", snapshots_label(ctx, "With its snapshots")),
                              ("without", "The instance only (no snapshots)")]))
        if not which:
            return
    path = os.path.expanduser(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    size = await ctx.on_row("exporting…", lambda p: backend.export_instance(
        ref, path, with_snapshots=which == "with", progress=p))
    if size is not None:
        ctx.notify(f"Exported {ref} to {path} ({fmt.size(int(size))}).")


async def import_backup(ctx: Context) -> None:
    remote, backend = ctx.remote, ctx.backend
    assert remote is not None  # it has a backend
    path = await ctx.ask(InputDialog(
        f"Import a backup onto {remote}", "Backup file", "", confirm="Next",
        check=lambda v: None if os.path.isfile(os.path.expanduser(v.strip()))
        else "No such file.", path=True))
    if not path:
        return
    recorded = await original_name(os.path.expanduser(path))
    name = await ctx.ask(InputDialog(
        f"Import onto {remote}", "Name of the new instance",
        free_name(backend, recorded or Path(path).name.split(".")[0]), confirm="Import",
        check=name_check(backend)))
    if not name:
        return
    made = await ctx.on_remote(f"importing {name}…", lambda p: backend.import_instance(
        os.path.expanduser(path), name, progress=p))
    if made is not None:
        ctx.notify(f"Imported {made.ref}.")
        ctx.inventory.refresh_soon(remote)


async def clone(ctx: Context) -> None:
    ref, backend = ctx.ref, ctx.backend
    assert ref is not None
    name = await ctx.ask(InputDialog(f"Clone {ref}", "Name of the copy",
                                     free_name(backend, f"{ref.name}-copy"),
                                     confirm="Clone", check=name_check(backend)))
    if not name:
        return
    choices = [("full", snapshots_label(ctx, "Full copy with its snapshots")),
               ("bare", "Full copy without snapshots")]
    if snapshots_known(ctx) == 0:  # nothing to choose about snapshots
        choices = [("full", "Full copy")]
    if ctx.can(Capability.LINKED_CLONE):
        choices.append(("linked", "Linked clone (shares the source's disk; fast, small — "
                                  "the source can then not be changed or deleted)"))
    how = choices[0][0] if len(choices) == 1 else \
        await ctx.ask(ChoiceDialog(f"Clone {ref} as {name}", choices))
    if not how:
        return
    made = await ctx.on_row("cloning…", lambda p: backend.clone_instance(
        ref, name, with_snapshots=how != "bare", linked=how == "linked", progress=p))
    if made is not None:
        ctx.notify(f"Cloned {ref} to {made.ref}.")
        ctx.inventory.refresh_soon(ref.remote)


async def _copy_or_move(ctx: Context, move: bool) -> None:
    ref, backend = ctx.ref, ctx.backend
    assert ref is not None
    verb = "move" if move else "copy"
    targets = copy_targets(ctx, move=move)
    target = await ctx.ask(ChoiceDialog(
        f"{verb.capitalize()} {ref} to",
        [(n, f"{n} ({b.remote.kind})") for n, b in targets.items()]))
    if not target:
        return
    there = targets[target]
    name = await ctx.ask(InputDialog(
        f"{verb.capitalize()} {ref} to {target}", "Name there", ref.name,
        confirm=verb.capitalize(), check=lambda v: there.check_name(v.strip())))
    inst = ctx.instance
    was_running = inst is not None and inst.status in (
        InstanceStatus.RUNNING, InstanceStatus.FROZEN)
    # a backend that can move this one while it runs (a live migration) says so
    live = move and was_running and inst is not None and \
        backend.live_move_to_problem(inst, there) is None
    if not name or (not live and not await stop_first(ctx, f"{verb} it")):
        return
    made = await ctx.on_row("moving live…" if live else "moving…" if move else "copying…",
                            lambda p: backend.copy_to(ref, there, name, move=move, progress=p))
    if made is not None:
        ctx.notify(f"{'Moved' if move else 'Copied'} {ref} to {made.ref}"
                   + (f" ({made.status.value} all along)." if live else "."))
        ctx.inventory.refresh_soon(target)
        ctx.inventory.refresh_soon(ref.remote)
    if was_running and not live:
        # it was stopped for the copy: offer to start it again (after a move: the moved one)
        again = made.ref if move and made is not None else ref
        if (made is not None or not move) and await ctx.ask(ConfirmDialog(
                f"Start {again} again?", f"{ref} was stopped to be {verb}d"
                + ("" if made is not None else " and the copy failed") + f". Start {again} "
                f"now?", "Start", destructive=False)):
            await _start(ctx, again)


async def _start(ctx: Context, ref: InstanceRef) -> None:
    try:
        await ctx.inventory.act(ref, Verb.START, PENDING[Verb.START])
    except BackendError as e:
        ctx.fail(e, f"Start {ref}")


async def copy(ctx: Context) -> None:
    await _copy_or_move(ctx, move=False)


async def move(ctx: Context) -> None:
    await _copy_or_move(ctx, move=True)


def has_copy_target(ctx: Context) -> bool:
    return bool(copy_targets(ctx))


def has_move_target(ctx: Context) -> bool:
    return bool(copy_targets(ctx, move=True))


async def rename(ctx: Context) -> None:
    ref, backend = ctx.ref, ctx.backend
    assert ref is not None
    # every backend renames a stopped instance only: asked before the name is typed
    if not await stop_first(ctx, "rename it", "it must be stopped to be renamed"):
        return
    taken = name_check(backend)

    def check(value: str) -> str | None:
        if value.strip() == ref.name:  # the prefilled name is not "taken": it is its own
            return f"It is called {ref.name} now: type the new name."
        return taken(value)

    name = await ctx.ask(InputDialog(f"Rename {ref}", "New name", ref.name, confirm="Rename",
                                     check=check))
    if not name or name == ref.name:
        return
    made = await ctx.on_row("renaming…", lambda p: backend.rename_instance(ref, name))
    if made is not None:
        ctx.notify(f"Renamed {ref} to {name}.")
        ctx.inventory.refresh_soon(ref.remote)


async def describe(ctx: Context) -> None:
    ref, backend, inst = ctx.ref, ctx.backend, ctx.instance
    assert ref is not None
    text = await ctx.ask(InputDialog(f"Description of {ref}", "Notes",
                                     inst.description if inst else "", confirm="Save",
                                     check=lambda v: None))
    if text is None:
        return

    async def save(_progress) -> bool:
        await backend.set_description(ref, text)
        return True

    if await ctx.on_row("saving…", save):
        ctx.notify(f"Description of {ref} saved.")
