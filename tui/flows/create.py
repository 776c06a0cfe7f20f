"""The launch wizard: a new instance on any remote that can create one."""

from __future__ import annotations

from dataclasses import replace

from backends.models import Capability

from . import consoles
from .context import Context


async def new_instance(ctx: Context) -> None:
    inv = ctx.inventory
    backends = {name: b for name, b in sorted(inv.backends.items())
                if Capability.CREATE in inv.remote_capabilities(name)}
    if not backends:
        ctx.notify("No connected, writable remote can create instances.", severity="warning")
        return
    from ..screens.wizard import WizardScreen  # loaded when first used, not at start-up

    result = await ctx.ask(WizardScreen(backends, {name: inv.remote_capabilities(name)
                                                   for name in backends},
                                        preferred=ctx.remote))
    if result is None:
        return
    inst = result.instance
    where = f" on member {inst.location}" if inst.location else ""
    ctx.notify(f"Created {inst.ref}{where} ({inst.status.value}).")
    inv.refresh_soon(inst.ref.remote)
    if result.open_console:
        await consoles.open_kind(replace(ctx, ref=inst.ref, remote=inst.ref.remote), "console")
