"""Modal dialogs: confirmation (always naming what is affected)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static


class ConfirmDialog(ModalScreen[bool]):
    """Ask before doing something. ``escape`` or *Cancel* answers no; the focus starts on
    *Cancel* for destructive actions, so a stray ``enter`` never destroys anything."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="dialog.cancel", tooltip="Close without acting"),
        Binding("left,h", "app.focus_previous", show=False),
        Binding("right,l", "app.focus_next", show=False),
    ]

    def __init__(self, title: str, message: str, confirm: str, *, destructive: bool = True):
        super().__init__()
        self.title_text = title
        self.message = message
        self.confirm_label = confirm
        self.destructive = destructive

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="" if self.destructive else "-safe"):
            yield Label(self.title_text, id="dialog-title")
            yield Static(self.message, id="dialog-message")
            with Horizontal(id="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button(self.confirm_label, id="confirm",
                             variant="error" if self.destructive else "primary")

    def on_mount(self) -> None:
        self.query_one("#cancel" if self.destructive else "#confirm", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm")

    def action_cancel(self) -> None:
        self.dismiss(False)


_SPECIAL_LABELS = {
    "ctrl+alt+del": "Ctrl+Alt+Del (reboot request)",
    "sysrq": "Alt+SysRq",
    "esc": "Esc", "tab": "Tab", "ctrl+c": "Ctrl+C", "ctrl+d": "Ctrl+D", "ctrl+z": "Ctrl+Z",
    "ctrl+\\": "Ctrl+\\", "ctrl+]": "Ctrl+] (the key itself, not detach)",
}


def _label(name: str) -> str:
    if name in _SPECIAL_LABELS:
        return _SPECIAL_LABELS[name]
    if name.startswith("ctrl+alt+f"):
        return "Ctrl+Alt+F" + name.removeprefix("ctrl+alt+f")
    return name.upper() if name.startswith("f") else name


class SpecialKeysMenu(ModalScreen[str | None]):
    """Keys a terminal cannot type into a console (or that corral keeps for itself)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="dialog.cancel",
                        tooltip="Close without sending")]

    def __init__(self, title: str, names: list[str]) -> None:
        super().__init__()
        self.title_text = title
        self.names = names

    def compose(self) -> ComposeResult:
        from textual.widgets import OptionList
        from textual.widgets.option_list import Option

        with Vertical(id="dialog", classes="-safe"):
            yield Label(f"Send a key to {self.title_text}", id="dialog-title")
            yield OptionList(*(Option(_label(n), id=n) for n in self.names),
                             id="special-keys")

    def on_option_list_option_selected(self, event) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
