"""Settings inside the guest and its devices: passwords, network interfaces."""

from __future__ import annotations

from ..screens.dialogs import PasswordDialog
from ..screens.tables import NicScreen
from .context import Context


async def password(ctx: Context) -> None:
    ref, backend = ctx.ref, ctx.backend
    answer = await ctx.ask(PasswordDialog(ref))
    if not answer:
        return
    user, secret = answer
    done = await ctx.on_row("setting password…", lambda _p, s=secret: _set_password(
        backend, ref, user, s))
    del secret, answer
    if done is not None:
        ctx.notify(f"Password of {user} in {ref} changed.")


async def _set_password(backend, ref, user: str, secret: str) -> bool:
    """True when done (the password is passed on and not kept)."""
    await backend.set_password(ref, user, secret)
    return True


async def nics(ctx: Context) -> None:
    ctx.show(NicScreen(ctx.backend, ctx.ref, ctx.inventory.remote_capabilities(ctx.ref.remote)))
