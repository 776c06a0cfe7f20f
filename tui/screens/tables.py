"""Lists with keys of their own: an instance's network interfaces, a remote's images,
every remote's operations."""

from __future__ import annotations

import ipaddress
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from backends.base import Backend
from backends.errors import BackendError
from backends.models import Capability, InstanceRef

from .. import format as fmt
from ..services.inventory import Inventory
from ..widgets.plain import Plain, PlainLabel
from .dialogs import ChoiceDialog, ConfirmDialog, InputDialog


class TableScreen(ModalScreen[None]):
    """A list (NICs, images, operations) with a few keys of its own."""

    BINDINGS = [Binding("escape", "close", "Close", id="dialog.cancel",
                        tooltip="Close this list")]

    def __init__(self, title: str, columns: tuple[str, ...], note: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.columns = columns
        self.note = note

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="-safe -wide"):
            yield PlainLabel(self.title_text, id="dialog-title")
            yield Plain(self.note, id="table-note")
            yield DataTable(id="table-rows", cursor_type="row")
            yield Plain("", id="dialog-problem")

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns(*self.columns)
        self.reload()

    def reload(self) -> None:
        """Read the rows again (in a worker; a reload in flight is replaced)."""
        self.run_worker(self.load(), exclusive=True, group=f"table-{type(self).__name__}",
                        exit_on_error=False)

    async def load(self) -> None:
        """Read the rows and :meth:`set_rows` them (subclasses)."""

    def set_rows(self, rows: list[tuple[str, tuple]]) -> None:
        table = self.query_one(DataTable)
        keep = table.cursor_row
        table.clear()
        for key, cells in rows:
            table.add_row(*(fmt.gate(c) for c in cells), key=key)
        if table.row_count:
            table.move_cursor(row=min(keep, table.row_count - 1))

    @property
    def selected_key(self) -> str | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        return table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value

    def say(self, text: str) -> None:
        """Show a problem under the list (plain text: daemon errors are not markup)."""
        self.query_one("#dialog-problem", Static).update(text)

    def action_close(self) -> None:
        self.dismiss(None)


class NicScreen(TableScreen):
    """The NICs of one instance: add (a), remove (d), addresses (e)."""

    BINDINGS = [
        Binding("a", "add", "Add NIC", id="nic.add", tooltip="Add a network interface"),
        Binding("d,delete", "remove", "Remove NIC", id="nic.remove",
                tooltip="Remove the selected network interface (asks first)"),
        Binding("e", "addresses", "Addresses", id="nic.addresses",
                tooltip="Set static IPv4/IPv6 addresses of the selected NIC"),
    ]

    def __init__(self, backend: Backend, ref: InstanceRef,
                 caps: frozenset[Capability]) -> None:
        """``caps``: what the remote offers (the inventory's reading)."""
        super().__init__(f"Network interfaces of {ref}",
                         ("Name", "Network / parent", "Type", "IPv4", "IPv6", "Limits"),
                         "a add · d remove · e static addresses · esc close")
        self.backend = backend
        self.ref = ref
        self.caps = caps
        self.nics: dict[str, dict] = {}

    async def load(self) -> None:
        try:
            self.nics = await self.backend.list_nics(self.ref)
        except BackendError as e:
            self.say(e.message)
            return
        self.set_rows([(name, (name, dev.get("network") or dev.get("parent") or "—",
                               dev.get("nictype") or ("managed" if dev.get("network")
                                                      else "—"),
                               dev.get("ipv4.address", ""), dev.get("ipv6.address", ""),
                               ", ".join(f"{k.removeprefix('limits.')}={v}"
                                         for k, v in dev.items()
                                         if k.startswith("limits."))))
                       for name, dev in sorted(self.nics.items())])

    async def _run(self, what: str, work) -> bool:
        self.say(f"{what}…")
        try:
            await work
        except BackendError as e:
            self.say(fmt.external(f"{e.title}: {e.message}", "bold"))
            return False
        self.say(f"{what}: done.")
        self.reload()
        return True

    async def _networks(self) -> list[str]:
        """The networks a NIC can be put on: the remote's own (``list_networks``, those
        it manages) when it lists them, else the ones its create options name."""
        if Capability.NETWORKS in self.caps:
            try:
                return [n.name for n in await self.backend.list_networks()
                        if not n.read_only]
            except BackendError:
                pass
        if Capability.CREATE in self.caps:
            try:
                return list((await self.backend.create_options()).networks)
            except BackendError:
                pass
        return []

    def action_add(self) -> None:
        async def flow() -> None:
            networks = await self._networks()
            name = await self.app.push_screen_wait(InputDialog(
                "New network interface", "Device name", _free_name(self.nics),
                confirm="Next", check=lambda v: _check_device(v, self.nics)))
            if not name:
                return
            choices = [(f"network:{n}", f"Managed network {n}") for n in networks]
            choices += [("bridged", "Bridged to a host bridge…"),
                        ("macvlan", "macvlan on a host interface…"),
                        ("routed", "Routed (static addresses, host interface)…")]
            kind = await self.app.push_screen_wait(ChoiceDialog(
                f"Connect {name} to", choices))
            if not kind:
                return
            network = parent = nictype = ""
            if kind.startswith("network:"):
                network = kind.split(":", 1)[1]
            else:
                nictype = kind
                parent = await self.app.push_screen_wait(InputDialog(
                    f"{kind} NIC {name}", "Host interface (parent), e.g. br0 or eth0",
                    confirm="Next"))
                if not parent:
                    return
            ipv4 = await self.app.push_screen_wait(InputDialog(
                f"Addresses of {name}", "Static IPv4 address (empty: none/DHCP)", "",
                confirm="Next", check=lambda v: _check_ip(v, 4, routed=nictype == "routed")))
            if ipv4 is None:
                return
            ipv6 = await self.app.push_screen_wait(InputDialog(
                f"Addresses of {name}", "Static IPv6 address (empty: none/auto)", "",
                confirm="Add NIC", check=lambda v: _check_ip(v, 6, routed=nictype == "routed")))
            if ipv6 is None:
                return
            await self._run(f"Adding {name}", self.backend.add_nic(
                self.ref, name, network=network, nictype=nictype, parent=parent,
                ipv4=ipv4, ipv6=ipv6))

        self.run_worker(flow(), exit_on_error=False)

    def action_remove(self) -> None:
        name = self.selected_key
        if name is None:
            return

        async def flow() -> None:
            if await self.app.push_screen_wait(ConfirmDialog(
                    f"Remove {name}?", f"The network interface {name} of {self.ref} is "
                    f"removed (a running instance loses it at once).", "Remove NIC")):
                await self._run(f"Removing {name}", self.backend.remove_nic(self.ref, name))

        self.run_worker(flow(), exit_on_error=False)

    def action_addresses(self) -> None:
        name = self.selected_key
        if name is None:
            return
        dev = self.nics.get(name, {})
        routed = dev.get("nictype") == "routed"

        async def flow() -> None:
            ipv4 = await self.app.push_screen_wait(InputDialog(
                f"Addresses of {name}", "Static IPv4 address (empty: none)",
                dev.get("ipv4.address", ""), confirm="Next",
                check=lambda v: _check_ip(v, 4, routed=routed)))
            if ipv4 is None:
                return
            ipv6 = await self.app.push_screen_wait(InputDialog(
                f"Addresses of {name}", "Static IPv6 address (empty: none)",
                dev.get("ipv6.address", ""), confirm="Save",
                check=lambda v: _check_ip(v, 6, routed=routed)))
            if ipv6 is None:
                return
            await self._run(f"Setting the addresses of {name}",
                            self.backend.set_nic_addresses(self.ref, name, ipv4=ipv4,
                                                           ipv6=ipv6))

        self.run_worker(flow(), exit_on_error=False)


class ImagesScreen(TableScreen):
    """Images of one remote: delete (d)."""

    BINDINGS = [Binding("d,delete", "delete", "Delete image", id="image.delete",
                        tooltip="Delete the selected image (asks first)")]

    def __init__(self, backend: Backend, remote: str) -> None:
        super().__init__(f"Images on {remote}",
                         ("Aliases", "Fingerprint", "Description", "Type", "Size", "Public"),
                         "d delete · esc close")
        self.backend = backend
        self.images: dict[str, Any] = {}

    async def load(self) -> None:
        try:
            images = await self.backend.list_images()
        except BackendError as e:
            self.say(e.message)
            return
        self.images = {i.fingerprint: i for i in images}
        self.set_rows([(fp, (", ".join(i.aliases) or "—", fp[:12], i.description, i.type,
                             fmt.size(i.size) if i.size else "", "yes" if i.public else "no"))
                       for fp, i in self.images.items()])

    def action_delete(self) -> None:
        fp = self.selected_key
        if fp is None:
            return
        aliases = ", ".join(self.images[fp].aliases) or fp[:12]

        async def flow() -> None:
            if not await self.app.push_screen_wait(ConfirmDialog(
                    f"Delete image {aliases}?", f"The image {aliases} ({fp[:12]}) is deleted "
                    f"from this remote. Instances made from it are not affected.",
                    "Delete image")):
                return
            try:
                await self.backend.delete_image(fp)
            except BackendError as e:
                self.say(fmt.external(f"{e.title}: {e.message}", "bold"))
                return
            self.say(f"Deleted image {aliases}.")
            self.reload()

        self.run_worker(flow(), exit_on_error=False)


class OperationsScreen(TableScreen):
    """Running and recent operations of every remote; cancel (x) where allowed."""

    BINDINGS = [Binding("x", "cancel_operation", "Cancel operation", id="operation.cancel",
                        tooltip="Cancel the selected operation (where the daemon allows)"),
                Binding("ctrl+r", "reload", "Refresh", id="operation.refresh",
                        tooltip="Read the operations again")]

    def __init__(self, inventory: Inventory) -> None:
        super().__init__("Operations", ("Remote", "Operation", "Instances", "Status",
                                        "Progress", "Cancel", "Error"),
                         "x cancel · ctrl+r refresh · esc close")
        self.inventory = inventory
        self.ops: dict[str, tuple[str, Any]] = {}

    def action_reload(self) -> None:
        self.reload()

    async def load(self) -> None:
        inv = self.inventory
        rows = []
        self.ops = {}
        for name, backend in sorted(inv.backends.items()):
            if inv.statuses[name].state.value != "connected":
                continue
            if Capability.OPERATIONS in inv.remote_capabilities(name):
                try:
                    ops = await backend.list_operations()
                except BackendError as e:
                    self.say(f"{name}: {e.message}")
                    continue
            else:
                ops = list(inv.statuses[name].operations.values())
            for op in ops:
                key = f"{name}/{op.id}"
                self.ops[key] = (name, op)
                rows.append((key, (name, op.description, ", ".join(op.instances),
                                   op.status, op.progress, "yes" if op.may_cancel else "no",
                                   op.error)))
        self.set_rows(rows)
        if not rows:
            self.say("No operations running or recently finished.")

    def action_cancel_operation(self) -> None:
        key = self.selected_key
        if key is None or key not in self.ops:
            return
        name, op = self.ops[key]
        backend = self.inventory.backends.get(name)
        if backend is None \
                or Capability.OPERATIONS not in self.inventory.remote_capabilities(name):
            self.say(f"{name} cannot cancel operations.")
            return

        async def flow() -> None:
            if not await self.app.push_screen_wait(ConfirmDialog(
                    f"Cancel '{op.description}'?", f"The operation on {name} is cancelled.",
                    "Cancel operation")):
                return
            try:
                await backend.cancel_operation(op.id)
            except BackendError as e:
                self.say(fmt.external(f"{e.title}: {e.message}", "bold"))
                return
            self.say("Cancelled.")
            self.reload()

        self.run_worker(flow(), exit_on_error=False)


# Helpers -----------------------------------------------------------------------------


def _free_name(existing) -> str:
    n = 0
    while f"eth{n}" in existing:
        n += 1
    return f"eth{n}"


def _check_device(name: str, existing) -> str | None:
    name = name.strip()
    if not name or not all(c.isalnum() or c in "-_." for c in name):
        return "A device name of letters, digits, '-', '_' or '.' is needed."
    if name in existing:
        return f"{name} already exists."
    return None


def _check_ip(text: str, version: int, *, routed: bool = False) -> str | None:
    text = text.strip()
    if not text:
        return None
    for part in (p.strip() for p in text.split(",")) if routed else [text]:
        try:
            address = ipaddress.ip_address(part)
        except ValueError:
            return f"'{part}' is not an IPv{version} address."
        if address.version != version:
            return f"'{part}' is not an IPv{version} address."
    return None
