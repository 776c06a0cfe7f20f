"""Snapshots: take, restore, delete, rename, and the automatic schedule."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from backends.base import Backend
from backends.errors import BackendError
from backends.models import Capability, InstanceRef, InstanceStatus, Snapshot

from ..screens.dialogs import ConfirmDialog, InputDialog, SnapshotDialog
from .context import Context


async def read(backend: Backend, ref: InstanceRef, caps: frozenset[Capability]
               ) -> tuple[list[Snapshot], str]:
    """The snapshots of ``ref`` and the line that counts them and says the schedule (the
    tab's keys are added by the pane, as the footer names them).

    Raises:
        BackendError: they cannot be listed.
    """
    snapshots = await backend.list_snapshots(ref)
    text = f"{len(snapshots)} snapshot(s)"
    if Capability.SNAPSHOT_SCHEDULE in caps:
        try:
            settings = await backend.snapshot_settings(ref)
        except BackendError:
            settings = {}
        schedule = settings.get("snapshots.schedule") or "none"
        expiry = settings.get("snapshots.expiry") or "never"
        text += f" · schedule {schedule}, expiry {expiry}"
    return snapshots, text


async def new(ctx: Context) -> None:
    ref, backend, inst = ctx.ref, ctx.backend, ctx.instance
    assert ref is not None
    running = inst is not None and inst.status is InstanceStatus.RUNNING
    stateful = False if running and ctx.can(Capability.SNAPSHOT_STATEFUL) else None
    values = await ctx.ask(SnapshotDialog(
        f"New snapshot of {ref}", datetime.now().strftime("snap-%Y%m%d-%H%M%S"),
        stateful=stateful, expiry=ctx.can(Capability.SNAPSHOT_EXPIRY),
        taken=set(ctx.snapshot_names)))
    if not values:
        return
    kwargs = {}
    if "stateful" in values:
        kwargs["stateful"] = values["stateful"]
    if "expires_in" in values:
        kwargs["expires_at"] = datetime.now(timezone.utc) + timedelta(
            seconds=values["expires_in"])
    try:
        snap = await ctx.inventory.track(ref, "snapshotting…", backend.create_snapshot(
            ref, values["name"], **kwargs))
    except BackendError as e:
        ctx.fail(e, f"Snapshot of {ref}")
        return
    ctx.notify(f"Took snapshot {snap.name} of {ref}"
               + (" with its memory." if snap.stateful else "."))
    ctx.details_changed()


def _selected(ctx: Context) -> Snapshot | None:
    if ctx.snapshot is None:
        ctx.notify("No snapshot selected.", severity="warning")
    return ctx.snapshot


async def restore(ctx: Context) -> None:
    snap = _selected(ctx)
    if snap is None:
        return
    taken = f"{snap.created_at:%Y-%m-%d %H:%M}" if snap.created_at else "(date unknown)"
    message = (f"{snap.ref} goes back to snapshot '{snap.name}', taken {taken}. "
               f"Everything written since then is lost")
    message += (", and the running state is replaced by the one saved with it."
                if snap.stateful else ".")
    if not await ctx.ask(ConfirmDialog(f"Restore {snap.ref} to {snap.name}?", message,
                                       "Restore")):
        return
    try:
        await ctx.inventory.track(snap.ref, "restoring…", ctx.backend.restore_snapshot(snap))
    except BackendError as e:
        ctx.fail(e, f"Restore {snap.ref}")
        return
    ctx.notify(f"Restored {snap.ref} to {snap.name}.")


async def delete(ctx: Context) -> None:
    snap = _selected(ctx)
    if snap is None:
        return
    if not await ctx.ask(ConfirmDialog(
            f"Delete snapshot {snap.name}?", f"The snapshot '{snap.name}' of {snap.ref} will "
            f"be deleted. The instance itself is not changed.", "Delete snapshot")):
        return
    try:
        await ctx.inventory.track(snap.ref, "deleting snapshot…",
                                  ctx.backend.delete_snapshot(snap))
    except BackendError as e:
        ctx.fail(e, "Delete snapshot")
        return
    ctx.notify(f"Deleted snapshot {snap.name} of {snap.ref}.")
    ctx.details_changed()


async def rename(ctx: Context) -> None:
    snap = _selected(ctx)
    if snap is None:
        return
    taken = ctx.snapshot_names

    def check(value: str) -> str | None:
        value = value.strip()
        if not value:
            return "A name is needed."
        if any(c.isspace() or c == "/" for c in value):
            return "No spaces or slashes in a snapshot name."
        if value in taken and value != snap.name:
            return f"There is already a snapshot named '{value}'."
        return None

    new_name = await ctx.ask(InputDialog(f"Rename snapshot {snap.name}", "New name",
                                         snap.name, confirm="Rename", check=check))
    if not new_name or new_name == snap.name:
        return
    try:
        await ctx.inventory.track(snap.ref, "renaming snapshot…",
                                  ctx.backend.rename_snapshot(snap, new_name))
    except BackendError as e:
        ctx.fail(e, "Rename snapshot")
        return
    ctx.details_changed()


async def schedule(ctx: Context) -> None:
    ref, backend = ctx.ref, ctx.backend
    assert ref is not None
    try:
        current = await backend.snapshot_settings(ref)
    except BackendError as e:
        ctx.notify(e.message, severity="error")
        return
    when = await ctx.ask(InputDialog(
        f"Snapshot schedule of {ref}",
        "When to take snapshots: cron (5 fields, e.g. '0 3 * * *'), @hourly, @daily, "
        "@weekly, @monthly, @startup, or empty for none",
        current.get("snapshots.schedule", ""), confirm="Next", check=lambda v: None))
    if when is None:
        return
    expiry = await ctx.ask(InputDialog(
        f"Snapshot expiry of {ref}",
        "How long scheduled snapshots are kept (e.g. 2d, 1w 3d; empty: forever)",
        current.get("snapshots.expiry", ""), confirm="Save", check=lambda v: None))
    if expiry is None:
        return
    try:
        await backend.set_snapshot_settings(ref, {"snapshots.schedule": when,
                                                  "snapshots.expiry": expiry})
    except BackendError as e:
        ctx.fail(e, "Snapshot schedule")
        return
    ctx.notify(f"Snapshot schedule of {ref} saved.")
    ctx.details_changed()
