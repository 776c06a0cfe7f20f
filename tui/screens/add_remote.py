"""The dialog that adds an LXD/Incus remote: a name, an address and a trust token (or no
token, to accept the server's certificate fingerprint), and whether the ``lxc``/``incus``
CLI should get it too. It only collects and checks the fields; ``tui/flows/remotes.py``
does the work."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Checkbox, Input

from backends.enrol import check_name

from ..widgets.plain import Plain, PlainInput, PlainLabel
from .dialogs import FormDialog, cancel_binding, dialog_buttons


class AddRemoteDialog(FormDialog):
    """Answers ``{"name", "address", "token", "cli"}`` or None."""

    DEFAULT_CSS = """
    AddRemoteDialog { align: center middle; background: $background 60%; }
    AddRemoteDialog .hint { color: $foreground-muted; }
    """
    BINDINGS = [cancel_binding("Close without adding anything")]

    def __init__(self, taken: set[str]) -> None:
        super().__init__()
        self.taken = taken

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="-safe -wide"):
            yield PlainLabel("Add an LXD or Incus remote", id="dialog-title")
            yield Plain("Name (how corral shows it)")
            yield PlainInput(id="remote-name", placeholder="lab")
            yield Plain("Address: host, host:port or https://host:port (empty: the "
                        "token's)")
            yield PlainInput(id="remote-address", placeholder="192.0.2.10:8443")
            yield Plain("Trust token (on the server: `lxc config trust add` or `incus "
                        "config trust add NAME`); empty: check the certificate's "
                        "fingerprint yourself", classes="hint")
            yield PlainInput(id="remote-token", password=True, placeholder="paste the token")
            yield Checkbox("Also add it to the lxc / incus CLI", False, id="remote-cli")
            yield Plain("corral trusts the CLI's own certificate over its pinned "
                        "connection, then writes the CLI's config", classes="hint",
                        id="remote-cli-hint")
            yield Plain("", id="dialog-problem")
            yield dialog_buttons("Add", disabled=True)

    def on_mount(self) -> None:
        self.query_one("#remote-name", Input).focus()

    def _value(self, key: str) -> str:
        return self.query_one(f"#remote-{key}", Input).value.strip()

    def problem(self) -> str | None:
        problem = check_name(self._value("name"), self.taken)
        if problem:
            return problem
        if not self._value("address") and not self._value("token"):
            return "An address, a token, or both."
        return None

    def submit(self) -> None:
        if self.show_problem() is None:  # else the problem is said
            super().submit()

    def answer(self) -> dict:
        return {"name": self._value("name"), "address": self._value("address"),
                "token": self._value("token"),
                "cli": self.query_one("#remote-cli", Checkbox).value}
