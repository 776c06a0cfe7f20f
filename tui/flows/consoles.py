"""Consoles in tabs: the serial/console, an exec shell, the VGA text screen, and the hand-off
of a graphical (SPICE) screen to an external viewer."""

from __future__ import annotations

import asyncio
import os
import shutil

from backends.errors import BackendError, Unsupported
from backends.models import Capability

from ..screens.dialogs import ConfirmDialog, SpecialKeysMenu
from ..widgets.console_dock import KIND_LABEL
from .context import Context

GENERIC_KEYS = ["esc", "tab", "ctrl+c", "ctrl+d", "ctrl+z", "ctrl+\\", "ctrl+]",
                *(f"f{n}" for n in range(1, 13))]
"""Keys every console's special-keys menu offers (sent as bytes)."""


async def open_kind(ctx: Context, kind: str) -> None:
    """Open (or go back to) the console ``kind`` ("console", "shell", "vga") of ctx.ref."""
    ref, backend, dock = ctx.ref, ctx.backend, ctx.consoles
    assert ref is not None and dock is not None
    what = f"{KIND_LABEL[kind].capitalize()} of {ref}"
    caps = ctx.inventory.capabilities(ref)
    if kind == "vga" and Capability.VGA not in caps and Capability.SPICE in caps:
        await offer_spice_viewer(ctx)
        return

    async def opener(width: int, height: int):
        if kind == "shell":
            return await backend.open_shell(ref, list(ctx.settings.shell) or None,
                                            width=width, height=height)
        return await backend.open_console(ref, width=width, height=height, kind=kind)

    try:
        await dock.open(ref, kind, opener)
    except Unsupported as e:
        ctx.notify(e.message, title=what, severity="warning", timeout=10)
    except BackendError as e:
        ctx.notify(e.message, title=what, severity="error", timeout=10)
    except Exception as e:  # noqa: BLE001 - a bug: say it, keep the app alive
        ctx.app.log.error(f"opening {kind} of {ref}", e)
        ctx.notify(f"{type(e).__name__}: {e}", title=f"Opening the {kind} failed",
                   severity="error", timeout=15)


async def console(ctx: Context) -> None:
    await open_kind(ctx, "console")


async def shell(ctx: Context) -> None:
    await open_kind(ctx, "shell")


async def vga(ctx: Context) -> None:
    await open_kind(ctx, "vga")


async def offer_spice_viewer(ctx: Context) -> None:
    """A VM screen that is SPICE graphics cannot be drawn in a terminal. Where a graphical
    display and remote-viewer exist, offer to hand the screen to them (the backend names
    the command); otherwise say what to run."""
    ref, backend = ctx.ref, ctx.backend
    try:
        argv = backend.spice_viewer_argv(ref)
    except BackendError as e:
        ctx.notify(e.message, title=f"Screen of {ref}", severity="warning", timeout=12)
        return
    message = (f"The screen of {ref} is SPICE graphics, which a terminal cannot show. Use "
               f"its serial console here, or `{' '.join(argv)}` on a machine with a display.")
    display = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    if not (display and shutil.which("remote-viewer") and shutil.which(argv[0])):
        ctx.notify(message + " (No graphical display or remote-viewer here.)",
                   title=f"Screen of {ref}", severity="warning", timeout=12)
        return
    if not await ctx.ask(ConfirmDialog(
            f"Open the screen of {ref}?",
            f"{message}\n\nOpen it in remote-viewer on this display ({' '.join(argv)})?",
            "Open remote-viewer", destructive=False)):
        return
    await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL, start_new_session=True)
    ctx.notify(f"remote-viewer is opening the screen of {ref}.")


async def special_keys(ctx: Context) -> None:
    """The special-keys menu of the active console tab: chords the session sends itself
    (Ctrl+Alt+Del on a VGA screen), then keys sent as bytes."""
    tab = ctx.consoles.active if ctx.consoles else None
    if tab is None:
        return
    session = tab.view.session
    own = tuple(session.special_keys)
    name = await ctx.ask(SpecialKeysMenu(tab.view.title, [*own, *GENERIC_KEYS]))
    if not name:
        return
    if name in own:
        try:
            await session.send_special(name)
        except BackendError as e:
            ctx.notify(e.message, severity="error")
    else:
        tab.view.send_special(name)
    tab.view.focus()
