"""The resource editor: change limits, saying what applied live."""

from __future__ import annotations

from ..screens.limits import LimitsScreen
from .context import Context


def summary(result: dict[str, str]) -> str:
    """What a change of limits did, in words."""
    live = [k for k, v in result.items() if v == "live"]
    later = [k for k, v in result.items() if v != "live"]
    message = ", ".join(live) + " applied live" if live else ""
    if later:
        message += ("; " if message else "") + ", ".join(later) + \
            " saved: applies at the next start"
    return message or "Nothing changed."


async def edit_limits(ctx: Context) -> None:
    ref = ctx.ref
    assert ref is not None
    result = await ctx.ask(LimitsScreen(ctx.backend, ref))
    if result:
        ctx.notify(summary(result), title=f"Limits of {ref}")
        ctx.inventory.fetch_soon(ref)
        ctx.details_changed()
