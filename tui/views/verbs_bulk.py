"""The verbs of the resource views that act on every marked row: copy profiles, volumes or
images to another remote, refresh images, cancel operations. Each asks its questions once
(the target remote, its pool), confirms once with the list of rows, then tries every row
(one failure does not stop the others; each result goes to the operations view).

With no row marked, each verb is its single-row flow (:mod:`tui.views.verbs`,
:mod:`tui.views.verbs_storage`), which may ask more (the copy's name)."""

from __future__ import annotations

from functools import partial
from typing import Awaitable, Callable

from backends.errors import BackendError, InvalidInput
from backends.models import Capability, ResourceKind

from ..flows import bulk
from ..flows.context import Context
from ..screens.dialogs import ChoiceDialog
from . import verbs as v
from . import verbs_storage as vs
from .rows import Row


def _kinds(ctx: Context, rows: list[Row]) -> set[str]:
    return {ctx.inventory.backends[r.remote].kind for r in rows
            if r.remote in ctx.inventory.backends}


async def _target(ctx: Context, rows: list[Row], capability: Capability, what: str,
                  *, kind: ResourceKind | None = None, elsewhere: bool = False) -> str | None:
    """The remote to copy the marked ``rows`` to: one that can, where each row's backend
    can copy a ``kind`` object to (``object_copy_problem``; None: any), not the rows' own
    remote when ``elsewhere`` (and they are all on one); the only one, or the user's choice
    (another remote first)."""
    backends = ctx.inventory.backends
    sources = {r.remote for r in rows}
    names = [n for n, b in backends.items() if ctx.can(capability, n)
             and (kind is None or all(backends[s].object_copy_problem(b, kind) is None
                                      for s in sources if s in backends))
             and not (elsewhere and sources == {n})]
    if not names:
        kinds = _kinds(ctx, rows)
        ctx.notify(f"No connected remote to copy these {what} to"
                   + (f" (they copy only between {' or '.join(sorted(kinds))} remotes "
                      "of one kind)." if kind is not None else "."), severity="warning")
        return None
    if len(names) == 1:
        return names[0]
    names.sort(key=lambda n: (n in sources, n))
    return await ctx.ask(ChoiceDialog(f"Copy {len(rows)} {what} to",
                                      [(n, n) for n in names]))


async def _run(ctx: Context, verb: str, rows: list[Row], describe: Callable[[Row], str],
               work: Callable[[Row], Awaitable[object]], note: str = "", *,
               destructive: bool = False) -> None:
    """One confirmation listing every row (``remote:`` + ``describe(row)``), then
    ``work(row)`` for each."""
    if not await bulk.confirm(ctx.app, verb, [f"{r.remote}:{describe(r)}" for r in rows],
                              note, destructive=destructive):
        return
    await bulk.run_all(ctx.app, ctx.inventory, verb, [
        bulk.Target(r.remote, describe(r), partial(work, r)) for r in rows])
    ctx.reload(None)


def _progress(ctx: Context, remote: str, what: str):
    def progress(text: str) -> None:
        ctx.inventory.show_activity(remote, f"{what}: {text}")
    return progress


# Profiles --------------------------------------------------------------------------


async def copy_profile(ctx: Context) -> None:
    """Copy the marked profiles to a remote (the same name; on their own remote,
    ``<name>-copy``); one profile with none marked: :func:`verbs.copy_profile`."""
    rows = list(ctx.marked_rows)
    if not rows:
        await v.copy_profile(ctx)
        return
    remote = await _target(ctx, rows, Capability.PROFILES, "profiles")
    if remote is None:
        return
    target = ctx.backend_of(remote)

    def new_name(row: Row) -> str:
        return f"{row.name}-copy" if row.remote == remote else row.name

    async def work(row: Row) -> None:
        full = await ctx.backend_of(row.remote).get_profile(row.name)
        await target.create_profile(new_name(row), description=full.description,
                                    config=dict(full.config),
                                    devices={dev: dict(keys) for dev, keys
                                             in full.devices.items()})

    await _run(ctx, "copy profile", rows,
               lambda r: f"{r.name} to {remote}:{new_name(r)}", work,
               "A name taken there is refused for that profile; the others are copied.")


# Volumes ---------------------------------------------------------------------------


async def copy_volume(ctx: Context) -> None:
    """Copy the marked volumes into one pool of a remote of their kind (the same name;
    into their own pool, ``<name>-copy``)."""
    rows = list(ctx.marked_rows)
    if not rows:
        await vs.copy_volume(ctx)
        return
    remote = await _target(ctx, rows, Capability.STORAGE, "volumes",
                           kind=ResourceKind.VOLUME)
    if remote is None:
        return
    target = ctx.backend_of(remote)
    try:
        pools = [p.name for p in await target.list_storage_pools()]
    except BackendError as e:
        ctx.fail(e, f"Pools of {remote}")
        return
    if not pools:
        ctx.notify(f"{remote} has no storage pool.", severity="warning")
        return
    pool = pools[0] if len(pools) == 1 else await ctx.ask(ChoiceDialog(
        f"Pool on {remote}", [(p, p) for p in pools]))
    if not pool:
        return

    def new_name(row: Row) -> str:
        return f"{row.name}-copy" if (row.remote, row.parent) == (remote, pool) else row.name

    async def work(row: Row) -> None:
        await ctx.backend_of(row.remote).copy_volume(
            row.parent, row.name, target, pool, new_name(row),
            progress=_progress(ctx, row.remote, f"copying volume {row.name}"))

    await _run(ctx, "copy volume", rows,
               lambda r: f"{r.parent}/{r.name} to {remote}:{pool}/{new_name(r)}", work)


# Images ----------------------------------------------------------------------------


async def copy_image(ctx: Context) -> None:
    """Copy the marked images (with their aliases) to another remote of their kind."""
    rows = list(ctx.marked_rows)
    if not rows:
        await vs.copy_image(ctx)
        return
    remote = await _target(ctx, rows, Capability.IMAGE_ALIASES, "images",
                           kind=ResourceKind.IMAGE,
                           elsewhere=True)
    if remote is None:
        return
    target = ctx.backend_of(remote)

    async def work(row: Row) -> None:
        if row.remote == remote:
            raise InvalidInput(f"It is on {remote} already.")
        await ctx.backend_of(row.remote).copy_image(
            row.obj.fingerprint, target, aliases=row.obj.aliases,
            progress=_progress(ctx, row.remote, f"copying image {row.name}"))

    await _run(ctx, "copy image", rows, lambda r: f"{r.name} to {remote}",
               work)


async def refresh_image(ctx: Context) -> None:
    """Refresh every marked image from the server it came from."""
    rows = list(ctx.marked_rows)
    if not rows:
        await vs.refresh_image(ctx)
        return

    async def work(row: Row) -> str:
        newer = await ctx.backend_of(row.remote).refresh_image(
            row.obj.fingerprint, progress=_progress(ctx, row.remote,
                                                    f"refreshing image {row.name}"))
        return "a newer version was fetched" if newer else "already current"

    await _run(ctx, "refresh image", rows, lambda r: r.name, work,
               "An image not copied from an image server has nothing to refresh from "
               "(that row is refused, the others go on).")


# Operations ------------------------------------------------------------------------


async def cancel_operation(ctx: Context) -> None:
    """Cancel every marked operation of a daemon (corral's own results are left out)."""
    rows = list(ctx.marked_rows)
    if not rows:
        await vs.cancel_operation(ctx)
        return
    rows = [r for r in rows if r.obj is not None and not r.obj.id.startswith("corral-")]
    if not rows:
        ctx.notify("The marked rows are results kept by corral: nothing to cancel.",
                   severity="warning")
        return

    async def work(row: Row) -> None:
        await ctx.backend_of(row.remote).cancel_operation(row.obj.id)

    # "abort": the dialog's own button is "Cancel"
    await _run(ctx, "abort", rows, lambda r: r.name, work, destructive=True)
