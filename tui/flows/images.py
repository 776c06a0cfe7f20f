"""Images: publish an instance as an image; a remote's images (the ``:images`` view)."""

from __future__ import annotations

from ..screens.dialogs import ChoiceDialog, InputDialog
from .context import Context


async def publish(ctx: Context) -> None:
    ref, backend = ctx.ref, ctx.backend
    assert ref is not None
    alias = await ctx.ask(InputDialog(f"Publish {ref} as an image", "Alias of the new image",
                                      f"{ref.name}-image", confirm="Next"))
    if not alias:
        return
    public = await ctx.ask(ChoiceDialog(
        f"Publish {ref} as {alias}", [("private", "Private (trusted clients only)"),
                                      ("public", "Public (anyone who can reach it)")]))
    if not public:
        return
    fingerprint = await ctx.on_row("publishing…", lambda p: backend.publish_image(
        ref, alias=alias, public=public == "public", progress=p))
    if fingerprint is not None:
        ctx.notify(f"Published {ref} as image {alias} ({str(fingerprint)[:12]}).")


async def images(ctx: Context) -> None:
    """The images view, filtered to the remote's images (its keys delete, copy, refresh
    and name them)."""
    ctx.open_view("images", "", f"remote={ctx.remote}" if ctx.remote else "")
