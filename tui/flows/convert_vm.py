"""Convert a VM into a VM of another remote ("Convert to a local QEMU VM…"): the source's
backend gives the stopped VM as a portable description (``portable_vm``: its own
descriptor and readable disk files, ``backends.portable``); a remote whose backend imports
that format makes the VM from it through its import source, with the summary, progress
and stop of :class:`~tui.screens.convert_vm.ConvertScreen`. The original is only read."""

from __future__ import annotations

import tempfile
from dataclasses import replace

from backends.base import Backend
from backends.errors import BackendError
from backends.models import Capability, ConnectionState
from backends.portable import IMPORT_SOURCE

from ..screens.dialogs import ChoiceDialog
from .context import Context
from .lifecycle import stop_first


def convert_targets(ctx: Context) -> dict[str, Backend]:
    """Connected remotes that can make a VM from what the instance's backend gives."""
    inv = ctx.inventory
    source = inv.backends.get(ctx.remote or "")
    if source is None or not source.portable_format:
        return {}
    return {name: b for name, b in sorted(inv.backends.items())
            if name != ctx.remote and source.portable_format in b.imports_portable
            and Capability.CREATE in inv.remote_capabilities(name)
            and inv.statuses[name].state is ConnectionState.CONNECTED}


def has_convert_target(ctx: Context) -> bool:
    return bool(convert_targets(ctx))


async def convert(ctx: Context) -> None:
    ref = ctx.ref
    targets = convert_targets(ctx)
    if ref is None or not targets:
        return
    if not await stop_first(ctx, "convert it", "its disks are copied while it is stopped"):
        return
    target = next(iter(targets))
    if len(targets) > 1:
        chosen = await ctx.ask(ChoiceDialog(f"Convert {ref} to a VM on", [
            (name, f"{name}  ({b.remote.kind})") for name, b in targets.items()]))
        if not chosen:
            return
        target = chosen
    backend = targets[target]
    try:
        vm = await ctx.backend.portable_vm(ref)
        sources = [s for s in await backend.create_sources() if s.kind == IMPORT_SOURCE]
    except BackendError as e:
        ctx.notify(e.message, title=f"Convert {ref}", severity="error")
        return
    if not sources:
        ctx.notify(f"{target} cannot import a VM.", title=f"Convert {ref}", severity="error")
        return
    from ..screens.convert_vm import ConvertScreen

    with tempfile.TemporaryDirectory(prefix="corral-convert-") as scratch:
        source = replace(sources[0], value=vm.write(scratch))
        inst = await ctx.ask(ConvertScreen(ref, target, backend, source))
    if inst is None:
        return
    ctx.notify(f"Converted {ref} into {inst.ref} ({inst.status.value}); {ref} is unchanged.")
    ctx.inventory.refresh_soon(target)
