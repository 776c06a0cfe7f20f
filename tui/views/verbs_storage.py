"""What the keys of the storage, volumes, images and operations views do."""

from __future__ import annotations

from backends.errors import BackendError
from backends.models import Capability, InstanceRef, ResourceKind
from backends.units import parse_size

from ..flows import bulk
from ..flows.context import Context
from ..screens.dialogs import ChoiceDialog, ConfirmDialog, InputDialog
from .verbs import _name_check, pick_remote


def _size_check(value: str) -> str | None:
    if not value.strip():
        return None
    try:
        return None if parse_size(value, default_unit="GiB") > 0 else "More than 0, please."
    except ValueError as e:
        return str(e)


async def open_volumes(ctx: Context) -> None:
    row = ctx.row
    if row is not None and row.kind is ResourceKind.POOL:
        ctx.open_view("volumes", f"{row.remote}/{row.name}", None)


async def _pool_of(ctx: Context) -> tuple[str, str] | None:
    """(remote, pool) for a new volume: the pool being shown, or the user's choice."""
    parent = ctx.parent
    if parent:
        shown, _, pool = parent.partition("/")
        return shown, pool
    remote = await pick_remote(ctx, Capability.STORAGE, "Create the volume on",
                               ctx.row.remote if ctx.row else "")
    if remote is None:
        return None
    try:
        pools = await ctx.backend_of(remote).list_storage_pools()
    except BackendError as e:
        ctx.fail(e, f"Pools of {remote}")
        return None
    if len(pools) == 1:
        return remote, pools[0].name
    chosen = await ctx.ask(ChoiceDialog(f"Pool on {remote}", [(p.name, p.name) for p in pools]))
    return (remote, chosen) if chosen else None


async def new_volume(ctx: Context) -> None:
    where = await _pool_of(ctx)
    if where is None:
        return
    remote, pool = where
    taken = {r.name for r in ctx.rows_of(remote) if r.parent == pool}
    name = await ctx.ask(InputDialog(f"New volume in {remote}:{pool}", "Volume name", "",
                                     confirm="Next", check=_name_check(taken)))
    if not name:
        return
    size = await ctx.ask(InputDialog(f"Volume {name}", "Size (e.g. 1GiB, 500MiB; empty: "
                                     "the pool's default)", "", confirm="Create",
                                     check=_size_check))
    if size is None:
        return
    nbytes = parse_size(size, default_unit="GiB") if size else None
    if await ctx.attempt(f"Create volume {name}", ctx.backend_of(remote).create_volume(
            pool, name, size=nbytes)):
        ctx.notify(f"Created volume {remote}:{pool}/{name}.")


async def resize_volume(ctx: Context) -> None:
    row = ctx.row
    if row is None:
        return
    size = await ctx.ask(InputDialog(f"Resize {row.remote}:{row.parent}/{row.name}",
                                     "New size (e.g. 2GiB)", row.cell("size"),
                                     confirm="Resize", check=lambda v: _size_check(v)
                                     if v.strip() else "A size is needed."))
    if size and await ctx.attempt(f"Resize {row.name}", ctx.backend_of(row.remote).resize_volume(
            row.parent, row.name, parse_size(size, default_unit="GiB"))):
        ctx.notify(f"Volume {row.name} is now {size}.")


async def attach_volume(ctx: Context) -> None:
    row = ctx.row
    if row is None:
        return
    instances = sorted(i.name for i in ctx.inventory.instances_of(row.remote))
    if not instances:
        ctx.notify(f"{row.remote} has no instances to attach to.", severity="warning")
        return
    name = await ctx.ask(ChoiceDialog(f"Attach {row.name} to", [(n, n) for n in instances]))
    if not name:
        return
    path = await ctx.ask(InputDialog(f"Attach {row.name} to {name}", "Path inside the "
                                     "instance", f"/mnt/{row.name}", confirm="Attach",
                                     check=lambda v: None if v.strip().startswith("/")
                                     else "An absolute path (/mnt/data)."))
    if not path:
        return
    ref = InstanceRef(row.remote, name, ctx.inventory.remotes[row.remote].project)
    device = await ctx.attempt(f"Attach {row.name}", ctx.backend_of(row.remote).attach_volume(
        row.parent, row.name, ref, path))
    if device:
        ctx.notify(f"Attached {row.name} to {name} at {path} (device {device}).")


async def detach_volume(ctx: Context) -> None:
    row = ctx.row
    if row is None:
        return
    users = [u.removeprefix("instance ") for u in row.obj.used_by
             if u.startswith("instance ") and "(project" not in u]
    if not users:
        ctx.notify(f"{row.name} is attached to no instance.", severity="warning")
        return
    name = users[0] if len(users) == 1 else await ctx.ask(ChoiceDialog(
        f"Detach {row.name} from", [(n, n) for n in users]))
    if not name:
        return
    ref = InstanceRef(row.remote, name, ctx.inventory.remotes[row.remote].project)
    if await ctx.attempt(f"Detach {row.name}", ctx.backend_of(row.remote).detach_volume(
            row.parent, row.name, ref)):
        ctx.notify(f"Detached {row.name} from {name}.")


async def copy_volume(ctx: Context) -> None:
    row = ctx.row
    if row is None:
        return
    remote = await pick_remote(ctx, Capability.STORAGE, f"Copy {row.name} to", row.remote)
    if remote is None:
        return
    target = ctx.backend_of(remote)
    problem = ctx.backend_of(row.remote).object_copy_problem(target, ResourceKind.VOLUME)
    if problem:
        ctx.notify(problem, severity="warning")
        return
    try:
        pools = [p.name for p in await target.list_storage_pools()]
    except BackendError as e:
        ctx.fail(e, f"Pools of {remote}")
        return
    pool = pools[0] if len(pools) == 1 else await ctx.ask(ChoiceDialog(
        f"Pool on {remote}", [(p, p) for p in pools]))
    if not pool:
        return
    name = await ctx.ask(InputDialog(f"Copy {row.name} to {remote}:{pool}", "Name of the "
                                     "copy", row.name if remote != row.remote else
                                     f"{row.name}-copy", confirm="Copy",
                                     check=_name_check(set())))
    if not name:
        return
    inv = ctx.inventory

    def progress(text: str) -> None:
        inv.show_activity(row.remote, f"copying volume {row.name}: {text}")

    try:
        await ctx.attempt(f"Copy volume {row.name}", ctx.backend_of(row.remote).copy_volume(
            row.parent, row.name, target, pool, name, progress=progress))
    finally:
        inv.show_activity(row.remote, "")
    bulk.record(inv, row.remote, f"copy volume {row.name} to {remote}:{pool}/{name}")
    ctx.reload(remote)


# Images ----------------------------------------------------------------------------


async def add_alias(ctx: Context) -> None:
    row = ctx.row
    if row is None:
        return
    alias = await ctx.ask(InputDialog(f"Alias for image {row.name} on {row.remote}",
                                      "New alias", "", confirm="Add",
                                      check=_name_check(set())))
    if alias and await ctx.attempt(f"Add alias {alias}", ctx.backend_of(row.remote)
                                   .add_image_alias(row.obj.fingerprint, alias)):
        ctx.notify(f"Image {row.obj.fingerprint[:12]} is also called {alias}.")


async def remove_alias(ctx: Context) -> None:
    row = ctx.row
    if row is None or not row.obj.aliases:
        ctx.notify("That image has no alias.", severity="warning")
        return
    alias = row.obj.aliases[0] if len(row.obj.aliases) == 1 else await ctx.ask(ChoiceDialog(
        "Remove which alias?", [(a, a) for a in row.obj.aliases]))
    if alias:
        await ctx.attempt(f"Remove alias {alias}",
                          ctx.backend_of(row.remote).remove_image_alias(alias))


async def copy_image(ctx: Context) -> None:
    row = ctx.row
    if row is None:
        return
    here = ctx.backend_of(row.remote)
    names = [n for n in ctx.inventory.backends if n != row.remote
             and ctx.can(Capability.IMAGE_ALIASES, n)
             and here.object_copy_problem(ctx.inventory.backends[n], ResourceKind.IMAGE)
             is None]
    if not names:
        ctx.notify(f"No other connected {here.kind} remote to copy to.", severity="warning")
        return
    remote = names[0] if len(names) == 1 else await ctx.ask(ChoiceDialog(
        f"Copy image {row.name} to", [(n, n) for n in names]))
    if not remote:
        return
    inv = ctx.inventory
    fp = row.obj.fingerprint

    def progress(text: str) -> None:
        inv.show_activity(row.remote, f"copying image {row.name}: {text}")

    try:
        error = ""
        try:
            await here.copy_image(fp, ctx.backend_of(remote), aliases=row.obj.aliases,
                                  progress=progress)
        except BackendError as e:
            error = e.message
            ctx.fail(e, f"Copy image {row.name}")
        else:
            ctx.notify(f"Copied image {row.name} to {remote}.")
        bulk.record(inv, row.remote, f"copy image {row.name} to {remote}", error)
    finally:
        inv.show_activity(row.remote, "")
    ctx.reload(remote)


async def refresh_image(ctx: Context) -> None:
    row = ctx.row
    if row is None:
        return
    inv = ctx.inventory

    def progress(text: str) -> None:
        inv.show_activity(row.remote, f"refreshing image {row.name}: {text}")

    try:
        newer = await ctx.attempt(f"Refresh image {row.name}", ctx.backend_of(row.remote)
                                  .refresh_image(row.obj.fingerprint, progress=progress))
    finally:
        inv.show_activity(row.remote, "")
    if newer is not None:
        ctx.notify(f"Image {row.name}: "
                   + ("a newer version was fetched." if newer else "already current."))


# Operations ------------------------------------------------------------------------


async def cancel_operation(ctx: Context) -> None:
    """Cancel the selected operation of a daemon, once confirmed; corral's own results
    (of bulk actions) are records, not operations."""
    row = ctx.row
    if row is None or row.obj is None:
        return
    if row.obj.id.startswith("corral-"):
        ctx.notify(f"{row.name}: a result kept by corral, nothing to cancel.",
                   severity="warning")
        return
    if not await ctx.ask(ConfirmDialog(
            f"Cancel '{row.name}'?", f"The operation on {row.remote} is cancelled.",
            "Cancel operation")):
        return
    if await ctx.attempt(f"Cancel {row.name}", ctx.backend_of(row.remote).cancel_operation(
            row.obj.id)):
        ctx.notify(f"Cancelled {row.name} on {row.remote}.")
