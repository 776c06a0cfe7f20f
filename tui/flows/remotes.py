"""Adding a remote from inside corral (``+``) and removing one corral added (``-``).

The work is :mod:`backends.enrol`; this asks the questions (the dialog, the fingerprint
to accept when there is no token, the confirmation before removing), shows progress on
the activity line and tells the inventory.
"""

from __future__ import annotations

from backends.enrol import add_to_cli, enrol
from backends.errors import BackendError, InvalidInput
from backends.remote_store import RemoteStore
from backends.trust import ServerCert
from backends.work import in_thread

from ..services.remote_admin import attach, detach
from .context import Context


def _store(ctx: Context) -> RemoteStore:
    return ctx.app.store  # type: ignore[attr-defined]


async def add_remote(ctx: Context) -> None:
    from ..screens.add_remote import AddRemoteDialog
    from ..screens.dialogs import ConfirmDialog

    answer = await ctx.ask(AddRemoteDialog(set(ctx.inventory.remotes)))
    if not answer:
        return
    name = answer["name"]

    async def accept(cert: ServerCert) -> bool:
        trusted = await ctx.ask(ConfirmDialog(
            f"Trust {cert.address}?",
            f"The server presents a certificate with the SHA-256 fingerprint\n\n"
            f"{cert.pretty}\n\nCompare it with `lxc info` / `incus info` "
            f"(certificate_fingerprint) on the server itself. Accept it only if they are "
            f"the same; it is pinned from now on.",
            "Trust it", destructive=False))
        return bool(trusted)

    def progress(text: str) -> None:
        ctx.inventory.show_activity(name, f"adding: {text}")

    try:
        done = await enrol(_store(ctx), name, answer["address"], answer["token"],
                           accept=accept, taken=set(ctx.inventory.remotes),
                           timeout=ctx.inventory.timeout, progress=progress)
    except BackendError as e:
        ctx.fail(e, f"Adding remote {name}", timeout=20)
        return
    finally:
        ctx.inventory.show_activity(name, "")
    attach(ctx.app, ctx.inventory, done.remote)
    said = f"{name} ({done.kind}, {done.cert.address}) added; its certificate is pinned."
    if answer["cli"]:
        try:
            said += " " + await add_to_cli(done, _store(ctx), env=ctx.app.env,  # type: ignore[attr-defined]
                                           timeout=ctx.inventory.timeout)
        except BackendError as e:
            ctx.fail(e, f"Adding {name} to the CLI", timeout=20)
    ctx.notify(said, title="Remote added")


async def remove_remote(ctx: Context) -> None:
    from ..screens.dialogs import ConfirmDialog

    name = ctx.remote or ""
    remote = ctx.inventory.remotes.get(name)
    store = _store(ctx)
    if remote is None:
        ctx.notify("Select a remote in the remotes pane (1) first.", severity="warning")
        return
    if not store.owns(remote):
        ctx.fail(InvalidInput(
            f"{name} was not added in corral (it comes from {remote.source or 'elsewhere'}); "
            f"remove it there, e.g. `lxc remote remove {name}`."), f"Removing {name}")
        return
    if not await ctx.ask(ConfirmDialog(
            f"Remove remote {name}?",
            f"corral forgets {name} ({remote.address}) and its pinned certificate. The "
            f"server and its instances are not touched; the server still trusts corral's "
            f"certificate until you remove it there (`lxc config trust list`).",
            "Remove")):
        return
    try:
        await in_thread(lambda _w: store.remove(name))
    except BackendError as e:
        ctx.fail(e, f"Removing {name}")
        return
    await detach(ctx.app, ctx.inventory, name)
    ctx.notify(f"{name} removed from corral.", title="Remote removed")
