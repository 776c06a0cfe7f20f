"""Settings inside the guest and its devices: passwords, network interfaces."""

from __future__ import annotations

from typing import Awaitable, Callable

from backends.base import Backend
from backends.models import InstanceRef

from ..screens.dialogs import PasswordDialog
from ..screens.tables import NicScreen
from .context import Context


async def password(ctx: Context) -> None:
    ref, backend = ctx.ref, ctx.backend
    assert ref is not None
    answer = await ctx.ask(PasswordDialog(ref))
    if not answer:
        return
    user, secret = answer

    def work(_progress: Callable[[str], None], s: str = secret) -> Awaitable[bool]:
        return _set_password(backend, ref, user, s)

    done = await ctx.on_row("setting password…", work)
    del secret, answer
    if done is not None:
        ctx.notify(f"Password of {user} in {ref} changed.")


async def _set_password(backend: Backend, ref: InstanceRef, user: str, secret: str) -> bool:
    """True when done (the password is passed on and not kept)."""
    await backend.set_password(ref, user, secret)
    return True


async def nics(ctx: Context) -> None:
    ref = ctx.ref
    assert ref is not None
    ctx.show(NicScreen(ctx.backend, ref, ctx.inventory.remote_capabilities(ref.remote)))
