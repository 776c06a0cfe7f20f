"""An instance's own objects: its YAML (``E``, like ``lxc config edit``) and its profiles
in order (``P``: assign and unassign, later profiles override earlier ones)."""

from __future__ import annotations

from backends.errors import BackendError
from backends.models import ResourceKind

from ..screens.dialogs import InputDialog
from .context import Context
from .yaml_edit import edit_object


async def edit_yaml(ctx: Context) -> None:
    ref = ctx.ref
    if ref is None:
        return
    if await edit_object(ctx.app, ctx.backend, ResourceKind.INSTANCE, ref.name,
                         what=f"instance {ref}"):
        ctx.inventory.fetch_soon(ref)
        ctx.details_changed()


async def profiles(ctx: Context) -> None:
    ref, inst = ctx.ref, ctx.instance
    if ref is None or inst is None:
        return
    try:
        known = [p.name for p in await ctx.backend.list_profiles()]
    except BackendError as e:
        ctx.fail(e, f"Profiles of {ref.remote}")
        return

    def check(value: str) -> str | None:
        names = [n.strip() for n in value.split(",") if n.strip()]
        missing = [n for n in names if n not in known]
        if missing:
            return f"No profile {', '.join(missing)} on {ref.remote} (has: {', '.join(known)})."
        if len(set(names)) != len(names):
            return "A profile is listed twice."
        return None

    text = await ctx.ask(InputDialog(
        f"Profiles of {ref}", f"In order, comma-separated (later ones win). On "
        f"{ref.remote}: {', '.join(known)}", ", ".join(inst.profiles), confirm="Apply",
        check=lambda v: check(v) if v.strip() else None))
    if text is None:
        return
    wanted = [n.strip() for n in text.split(",") if n.strip()]
    if wanted == list(inst.profiles):
        return
    try:
        await ctx.inventory.track(ref, "profiles…", ctx.backend.set_instance_profiles(
            ref, wanted))
    except BackendError as e:
        ctx.fail(e, f"Profiles of {ref}")
        return
    ctx.notify(f"{ref} has the profiles {', '.join(wanted) or '(none)'}.")
    ctx.details_changed()
