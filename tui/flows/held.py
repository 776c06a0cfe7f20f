"""A verb pressed on a row whose remote is still connecting: held, and run once the
remote is connected (or refused in words if it does not connect) — never dropped and
never sent anywhere else."""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable, Callable, cast

from backends.models import ConnectionState

from .context import Context

if TYPE_CHECKING:
    from ..actions import Action
    from ..app import CorralApp


def connecting(ctx: Context) -> bool:
    """The remote ``ctx`` acts on has not connected yet (its rows may be shown already)."""
    status = ctx.inventory.statuses.get(ctx.remote or "")
    return status is not None and status.state is ConnectionState.CONNECTING


async def when_connected(ctx: Context, action: "Action",
                         flow: Callable[[Context], Awaitable[None]]) -> None:
    """Run ``flow`` once ``ctx``'s remote is connected and the action is possible then."""
    from ..offer import availability, why_not

    app = cast("CorralApp", ctx.app)  # held verbs come from the main screen, in corral's app
    what = f"{action.label} {ctx.ref or ctx.remote}"
    ctx.notify(f"{what}: waiting for {ctx.remote}…", timeout=4)
    await app.remote_settled(ctx.remote)
    status = ctx.inventory.statuses.get(ctx.remote or "")
    if status is None or status.state is not ConnectionState.CONNECTED:
        state = status.state.value if status else "gone"
        reason = f": {status.message}" if status and status.message else ""
        ctx.notify(f"{what} was not done: {ctx.remote} is {state}{reason}.",
                   severity="error", timeout=10)
        return
    if ctx.ref is not None and availability(action, ctx.inventory, ctx.ref,
                                            consoles_open=False) is not True:
        ctx.notify(f"{what} is not possible now: {why_not(ctx.inventory, ctx.ref)}.",
                   severity="warning", timeout=10)
        return
    await flow(ctx)
