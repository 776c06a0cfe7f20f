"""What the keys of the profiles, networks and projects views do, and the verbs every view
shares (delete of the marked rows, YAML edit). Each takes a
:class:`~tui.flows.context.Context` with a view's rows."""

from __future__ import annotations

from functools import partial
from typing import Awaitable

from backends.errors import BackendError
from backends.models import Capability, ResourceKind

from ..flows import bulk
from ..flows.context import Context
from ..flows.yaml_edit import edit_object
from ..format import external
from ..screens.dialogs import ChoiceDialog, ConfirmDialog, InputDialog
from .rows import Row

WORDS = {"profiles": "profile", "networks": "network", "storage": "storage pool",
         "volumes": "volume", "projects": "project", "images": "image"}


def _name_check(existing: set[str]):
    def check(value: str) -> str | None:
        value = value.strip()
        if not value:
            return "A name is needed."
        if any(c in value for c in "/\\ '\"?#:*"):
            return "No spaces, quotes or any of / \\ ? # : *."
        if value in existing:
            return f"'{value}' is taken."
        return None
    return check


async def pick_remote(ctx: Context, capability: Capability, title: str,
                      prefer: str = "") -> str | None:
    """The remote to act on: the only one that can, or the user's choice."""
    names = [n for n in ctx.inventory.backends if ctx.can(capability, n)]
    if not names:
        ctx.notify("No connected remote can do that.", severity="warning")
        return None
    if len(names) == 1:
        return names[0]
    names.sort(key=lambda n: (n != prefer, n))
    return await ctx.ask(ChoiceDialog(title, [(n, n) for n in names]))


# Shared ----------------------------------------------------------------------------


async def delete(ctx: Context) -> None:
    """Delete the marked rows (or the selected one), after one confirmation."""
    what = WORDS.get(ctx.view, "object")
    rows = [r for r in ctx.targets if not r.read_only]
    if not rows:
        ctx.notify(f"Nothing to delete here ({'read-only' if ctx.targets else 'no row'}).",
                   severity="warning")
        return
    names = [f"{what} {r.remote}:{r.name}" for r in rows]
    if not await bulk.confirm(ctx.app, "delete", names, "This cannot be undone."):
        return

    def work(row: Row) -> Awaitable[None]:
        backend = ctx.backend_of(row.remote)
        if ctx.view == "profiles":
            return backend.delete_profile(row.name)
        if ctx.view == "networks":
            return backend.delete_network(row.name)
        if ctx.view == "volumes":
            return backend.delete_volume(row.parent, row.name)
        if ctx.view == "projects":
            return backend.delete_project(row.name)
        return backend.delete_image(row.obj.fingerprint)

    await bulk.run_all(ctx.app, ctx.inventory, f"delete {what}", [
        bulk.Target(r.remote, r.name, partial(work, r)) for r in rows])
    ctx.reload(None)


async def edit(ctx: Context) -> None:
    row = ctx.row
    if row is None or row.kind is None:
        return
    if row.read_only:
        ctx.notify(f"{row.name} is not managed by {row.remote}: it cannot be edited.",
                   severity="warning")
        return
    await edit_object(ctx.app, ctx.backend_of(row.remote), row.kind, row.name, row.parent,
                      what=f"{WORDS.get(ctx.view, row.kind.value)} {row.remote}:{row.name}")
    ctx.reload(row.remote)


# Profiles --------------------------------------------------------------------------


async def new_profile(ctx: Context, *, copy: bool = False) -> None:
    source = ctx.row if ctx.row is not None and ctx.row.kind is ResourceKind.PROFILE else None
    if copy and source is None:
        return
    if not copy and source is not None:
        how = await ctx.ask(ChoiceDialog("New profile", [
            ("empty", "An empty profile"),
            ("copy", f"A copy of {source.remote}:{source.name}")]))
        if how is None:
            return
        copy = how == "copy"
    remote = await pick_remote(ctx, Capability.PROFILES, "Create the profile on",
                               source.remote if source else "")
    if remote is None:
        return
    taken = {r.name for r in ctx.rows_of(remote)}
    default = f"{source.name}-copy" if copy and source else ""
    name = await ctx.ask(InputDialog(f"New profile on {remote}", "Profile name", default,
                                     confirm="Create", check=_name_check(taken)))
    if not name:
        return
    config, devices, description = {}, {}, ""
    if copy and source is not None:
        try:
            full = await ctx.backend_of(source.remote).get_profile(source.name)
        except BackendError as e:
            ctx.fail(e, f"Read profile {source.name}")
            return
        config = dict(full.config)
        devices = {dev: dict(keys) for dev, keys in full.devices.items()}
        description = full.description
    made = await ctx.attempt(f"Create profile {name}", ctx.backend_of(remote).create_profile(
        name, description=description, config=config, devices=devices))
    if made is not None:
        ctx.notify(f"Created profile {remote}:{name}"
                   + (f" as a copy of {source.remote}:{source.name}." if copy and source
                      else "."))


async def copy_profile(ctx: Context) -> None:
    await new_profile(ctx, copy=True)


async def rename_profile(ctx: Context) -> None:
    row = ctx.row
    if row is None:
        return
    taken = {r.name for r in ctx.rows_of(row.remote)}
    name = await ctx.ask(InputDialog(f"Rename profile {row.remote}:{row.name}", "New name",
                                     row.name, confirm="Rename", check=_name_check(taken)))
    if name and await ctx.attempt(f"Rename profile {row.name}",
                                  ctx.backend_of(row.remote).rename_profile(row.name, name)):
        ctx.notify(f"Renamed profile {row.name} to {name}.")


# Networks --------------------------------------------------------------------------


def _cidr_check(version: int):
    import ipaddress

    def check(value: str) -> str | None:
        value = value.strip()
        if value in ("", "auto", "none"):
            return None
        try:
            iface = ipaddress.ip_interface(value)
        except ValueError:
            return f"An IPv{version} address with a prefix, auto or none."
        return None if iface.version == version and "/" in value else \
            f"An IPv{version} address with a prefix, auto or none."
    return check


async def new_network(ctx: Context) -> None:
    remote = await pick_remote(ctx, Capability.NETWORK_MANAGE, "Create the bridge on",
                               ctx.row.remote if ctx.row else "")
    if remote is None:
        return
    taken = {r.name for r in ctx.rows_of(remote)}
    name = await ctx.ask(InputDialog(f"New bridge on {remote}", "Bridge name (≤ 15 "
                                     "characters)", "", confirm="Next",
                                     check=_name_check(taken)))
    if not name:
        return
    ipv4 = await ctx.ask(InputDialog(f"Bridge {name}", "IPv4 address/prefix (auto, none, "
                                     "10.20.0.1/24)", "auto", confirm="Next",
                                     check=_cidr_check(4)))
    if ipv4 is None:
        return
    ipv6 = await ctx.ask(InputDialog(f"Bridge {name}", "IPv6 address/prefix (auto, none, "
                                     "fd42::1/64)", "none", confirm="Next",
                                     check=_cidr_check(6)))
    if ipv6 is None:
        return
    nat = await ctx.ask(ChoiceDialog(f"Bridge {name}", [("yes", "NAT to the outside"),
                                                        ("no", "No NAT")]))
    if nat is None:
        return
    if await ctx.attempt(f"Create bridge {name}", ctx.backend_of(remote).create_network(
            name, ipv4=ipv4 or "auto", ipv6=ipv6 or "none", nat=nat == "yes")):
        ctx.notify(f"Created bridge {remote}:{name}.")


async def leases(ctx: Context) -> None:
    row = ctx.row
    if row is None:
        return
    try:
        found = await ctx.backend_of(row.remote).network_leases(row.name)
    except BackendError as e:
        ctx.fail(e, f"Leases of {row.name}")
        return
    text = "\n".join(f"{x['hostname'] or '—':<24} {x['address']:<40} {x['hwaddr'] or '—':<18} "
                     f"{x['type']}" for x in found) or "No leases."
    await ctx.ask(ConfirmDialog(f"DHCP leases of {row.remote}:{row.name}",
                                external(text, lines=True), "Close", destructive=False))


# Projects --------------------------------------------------------------------------


async def new_project(ctx: Context) -> None:
    remote = await pick_remote(ctx, Capability.PROJECTS, "Create the project on",
                               ctx.row.remote if ctx.row else "")
    if remote is None:
        return
    taken = {r.name for r in ctx.rows_of(remote)}
    name = await ctx.ask(InputDialog(f"New project on {remote}", "Project name", "",
                                     confirm="Create", check=_name_check(taken)))
    if name and await ctx.attempt(f"Create project {name}",
                                  ctx.backend_of(remote).create_project(name)):
        ctx.notify(f"Created project {remote}:{name}.")


async def switch_project(ctx: Context) -> None:
    row = ctx.row
    if row is None:
        return
    ctx.switch_project(row.remote, row.name)
