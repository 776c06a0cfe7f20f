"""A verb pressed on a row whose remote is still connecting: held, and run once the
remote is connected (or refused in words if it does not connect) — never dropped and
never sent anywhere else."""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable, Callable, cast

from backends.models import ConnectionState, InstanceRef

from .context import Context

if TYPE_CHECKING:
    from textual.app import App
    from textual.screen import Screen

    from ..actions import Action
    from ..app import CorralApp
    from ..services.inventory import Inventory


def connecting(ctx: Context) -> bool:
    """The remote ``ctx`` acts on has not connected yet (its rows may be shown already)."""
    return _connecting(ctx.inventory, ctx.remote or "")


def _connecting(inventory: "Inventory", remote: str) -> bool:
    status = inventory.statuses.get(remote)
    return status is not None and status.state is ConnectionState.CONNECTING


async def _connected(app: "CorralApp", notify: Callable[..., None], remote: str, what: str
                     ) -> bool:
    """Say that ``what`` waits for ``remote``, wait until it stops connecting: whether it is
    connected then (if not, said in words)."""
    notify(f"{what}: waiting for {remote}…", timeout=4)
    await app.remote_settled(remote)
    status = app.inventory.statuses.get(remote)
    if status is None or status.state is not ConnectionState.CONNECTED:
        state = status.state.value if status else "gone"
        reason = f": {status.message}" if status and status.message else ""
        notify(f"{what} was not done: {remote} is {state}{reason}.", severity="error",
               timeout=10)
        return False
    return True


async def when_connected(ctx: Context, action: "Action",
                         flow: Callable[[Context], Awaitable[None]]) -> None:
    """Run ``flow`` once ``ctx``'s remote is connected and the action is possible then."""
    from ..offer import availability, why_not

    app = cast("CorralApp", ctx.app)  # held verbs come from the main screen, in corral's app
    what = f"{action.label} {ctx.ref or ctx.remote}"
    if not await _connected(app, ctx.notify, ctx.remote or "", what):
        return
    if ctx.ref is not None and availability(action, ctx.inventory, ctx.ref,
                                            consoles_open=False) is not True:
        ctx.notify(f"{what} is not possible now: {why_not(ctx.inventory, ctx.ref)}.",
                   severity="warning", timeout=10)
        return
    await flow(ctx)


def open_when_connected(screen: "Screen[None]", ref: InstanceRef, action: str,
                        open_it: Callable[[], None]) -> bool:
    """What a key opens without a flow (the actions menu, the snapshots tab: the screen's
    ``action``) on a row of a remote that is still connecting: opened by ``open_it`` once
    the remote is connected and the action possible (else said in words), the keys typed
    after the key held for it meanwhile. True: the remote is connecting and this waits;
    False: go on now."""
    from ..actions import BY_METHOD
    from ..offer import why_not

    app = cast("CorralApp", screen.app)
    if not _connecting(app.inventory, ref.remote):
        return False
    what = f"{BY_METHOD[action].label} {ref}"

    async def later() -> None:
        if not await _connected(app, screen.notify, ref.remote, what):
            return
        if screen.check_action(action, ()) is not True:
            screen.notify(f"{what} is not possible now: {why_not(app.inventory, ref)}.",
                          severity="warning", timeout=10)
            return
        open_it()

    worker = screen.run_worker(later(), group=f"open:{what}", exclusive=True,
                               exit_on_error=False, description=what)
    app.keys.hold(worker, what)  # keys typed next go to what opens (tui/keyboard.py)
    return True


def remotes_connecting(app: "App[object]") -> list[str]:
    """The remotes of corral's ``app`` still connecting (none in another app)."""
    inventory = getattr(app, "inventory", None)
    if inventory is None:
        return []
    return [name for name in inventory.statuses if _connecting(inventory, name)]


async def remotes_settled(app: "App[object]") -> None:
    """Until none of ``app``'s remotes is connecting (each connected, failed or gone)."""
    for name in remotes_connecting(app):
        await cast("CorralApp", app).remote_settled(name)
