"""Lists with keys of their own: an instance's network interfaces."""

from __future__ import annotations

import ipaddress

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.coordinate import Coordinate
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from backends.base import Backend
from backends.errors import BackendError
from backends.models import Capability, InstanceRef

from .. import format as fmt
from ..widgets.plain import Plain, PlainLabel
from .dialogs import ChoiceDialog, ConfirmDialog, InputDialog


class TableScreen(ModalScreen[None]):
    """A list (an instance's NICs) with a few keys of its own."""

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
        return table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key.value

    def say(self, text: str | Text) -> None:
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
