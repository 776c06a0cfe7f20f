"""Consoles in tabs: the serial/console, an exec shell, the VGA text screen, a local VM's
graphical screen (drawn in the terminal, screenshots, an external VNC viewer), and the
hand-off of an LXD/Incus VM's SPICE screen to an external viewer."""

from __future__ import annotations

import asyncio
import os
import shutil

from backends.errors import BackendError, Unsupported
from backends.models import Capability

from ..graphics import choose_mode
from ..screens.dialogs import ConfirmDialog, SpecialKeysMenu
from ..widgets.console_dock import KIND_LABEL
from ..widgets.graphic_console import GraphicView
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
    if kind == "vga" and Capability.VGA not in caps and Capability.DISPLAY in caps:
        await screen(ctx)  # UEFI: no VGA text, but the graphical screen
        return
    if kind == "vga" and Capability.VGA not in caps and Capability.SPICE in caps:
        await offer_spice_viewer(ctx)
        return

    async def opener(width: int, height: int):
        if kind == "shell":
            return await backend.open_shell(ref, list(ctx.settings.shell) or None,
                                            width=width, height=height)
        session = await backend.open_console(ref, width=width, height=height, kind=kind)
        if kind == "vga" and Capability.DISPLAY in caps:
            session.on_event = lambda name: _vga_event(ctx, name)
        return session

    try:
        await dock.open(ref, kind, opener)
    except Unsupported as e:
        ctx.notify(e.message, title=what, severity="warning", timeout=10)
    except BackendError as e:
        ctx.notify(e.message, title=what, severity="error", timeout=10)
    except Exception as e:  # a bug: say it, keep the app alive
        ctx.app.log.error(f"opening {kind} of {ref}", e)
        ctx.notify(f"{type(e).__name__}: {e}", title=f"Opening the {kind} failed",
                   severity="error", timeout=15)


def _vga_event(ctx: Context, name: str) -> None:
    """The guest of a VGA text tab left text mode: while that tab is the one shown, switch
    to the VM's graphical screen (the VGA tab stays, saying why)."""
    active = ctx.consoles.active if ctx.consoles else None
    if name == "graphics" and active is not None and active.ref == ctx.ref \
            and active.kind == "vga":
        ctx.app.run_worker(screen(ctx), group=f"screen:{ctx.ref}", exclusive=True,
                           exit_on_error=False, description=f"screen of {ctx.ref}")


async def console(ctx: Context) -> None:
    await open_kind(ctx, "console")


async def shell(ctx: Context) -> None:
    await open_kind(ctx, "shell")


async def vga(ctx: Context) -> None:
    await open_kind(ctx, "vga")


async def screen(ctx: Context) -> None:
    """The VM's graphical screen in a console tab (a local QEMU VM, a local libvirt
    domain's VNC screen), or — for LXD/Incus VMs, whose screen is SPICE — the external
    viewer and why it cannot be shown here."""
    ref, backend, dock = ctx.ref, ctx.backend, ctx.consoles
    assert ref is not None and dock is not None
    caps = ctx.inventory.capabilities(ref)
    if Capability.DISPLAY not in caps:
        if Capability.SPICE in caps:
            await offer_spice_viewer(ctx)
        else:
            ctx.notify(f"{ref} has no graphical screen corral can show (it must be a "
                       f"running local QEMU VM, or a running libvirt domain with a VNC "
                       f"screen on a local connection).", title=f"Screen of {ref}",
                       severity="warning", timeout=10)
        return
    settings = ctx.settings
    mode = choose_mode(settings.graphics)

    async def opener(width: int, height: int):
        return await backend.open_display(ref, fps=settings.screen_fps)

    def make_view(session, title: str) -> GraphicView:
        return GraphicView(session, title, detach_key=settings.detach_key, mode=mode,
                           fps=settings.screen_fps)

    try:
        await dock.open(ref, "screen", opener, make_view)
    except Unsupported as e:
        ctx.notify(e.message, title=f"Screen of {ref}", severity="warning", timeout=10)
    except BackendError as e:
        ctx.notify(e.message, title=f"Screen of {ref}", severity="error", timeout=10)


async def screenshot(ctx: Context) -> None:
    """Save the graphical screen of the active console tab as PNG."""
    tab = ctx.consoles.active if ctx.consoles else None
    if tab is None or not isinstance(tab.view, GraphicView):
        ctx.notify("Screenshots are taken of a graphical screen: open one with V first.",
                   severity="warning")
        return
    try:
        path = tab.view.screenshot(ctx.settings.screenshot_dir,
                                   f"{tab.ref.remote}-{tab.ref.name}")
    except BackendError as e:
        ctx.notify(e.message, title="Screenshot", severity="error", timeout=10)
        return
    ctx.notify(f"Saved {path}", title=f"Screenshot of {tab.ref}")


def has_desktop(ctx: Context | None = None) -> bool:
    """A graphical desktop to open an external viewer on."""
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


async def external_viewer(ctx: Context) -> None:
    """Open the VM's screen in a VNC viewer on this desktop (the same socket corral
    reads; QEMU shares the screen between viewers)."""
    ref, backend = ctx.ref, ctx.backend
    assert ref is not None
    argv = backend.display_viewer_argv(ref)
    if not shutil.which(argv[0]):
        ctx.notify(f"{argv[0]} is not installed; with a VNC viewer that reads unix sockets, "
                   f"run: {' '.join(argv)}", title=f"Screen of {ref}", severity="warning",
                   timeout=12)
        return
    if not has_desktop():
        ctx.notify("No graphical desktop here (DISPLAY / WAYLAND_DISPLAY are not set).",
                   title=f"Screen of {ref}", severity="warning")
        return
    await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL, start_new_session=True)
    ctx.notify(f"{argv[0]} is opening the screen of {ref}.")


async def offer_spice_viewer(ctx: Context) -> None:
    """A VM screen that is SPICE graphics cannot be drawn in a terminal. Where a graphical
    display and remote-viewer exist, offer to hand the screen to them (the backend names
    the command); otherwise say what to run."""
    ref, backend = ctx.ref, ctx.backend
    assert ref is not None
    try:
        argv = backend.spice_viewer_argv(ref)
    except BackendError as e:
        ctx.notify(e.message, title=f"Screen of {ref}", severity="warning", timeout=12)
        return
    message = (f"The screen of {ref} is SPICE graphics, which corral cannot draw in the "
               f"terminal (that needs a local QEMU VM). Use its serial console here, or "
               f"`{' '.join(argv)}` on a machine with a display.")
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
