"""Remotes that come and go while corral runs (added with ``+``, removed with ``-``): the
inventory learns about them here, and the app's per-remote worker follows them."""

from __future__ import annotations

import contextlib

from textual.app import App

from backends.models import Remote

from .inventory import Inventory
from .status import RemoteStatus


def attach(app: App, inventory: Inventory, remote: Remote) -> None:
    """Show ``remote`` and start following it, as the app does for those it started with."""
    inventory.remotes[remote.name] = remote
    inventory.statuses[remote.name] = RemoteStatus(remote)
    app.run_worker(inventory.run_remote(remote.name), group=f"remote:{remote.name}",
                   exclusive=True, exit_on_error=False,
                   description=f"Follow remote {remote.name}")
    inventory.rows_changed(remote.name, None)


async def detach(app: App, inventory: Inventory, name: str) -> None:
    """Stop following ``name`` (its connection is closed) and forget its rows."""
    for worker in [w for w in app.workers if w.group == f"remote:{name}"]:
        worker.cancel()
        with contextlib.suppress(Exception):
            await worker.wait()
    for table in (inventory.instances, inventory.states, inventory.pending,
                  inventory.history):
        for ref in [r for r in table if r.remote == name]:
            del table[ref]
    inventory.statuses.pop(name, None)
    inventory.remotes.pop(name, None)
    inventory.activity.pop(name, None)
    inventory.rows_changed(name, None)
