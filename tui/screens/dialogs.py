"""Modal dialogs: confirmation (always naming what is affected), a delete that may take
the instance's storage too, input, choices, the actions menu, passwords, snapshots and
special keys."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from rich.text import Text
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, OptionList, Static
from textual.widgets.button import ButtonVariant
from textual.widgets.option_list import Option

from backends.models import InstanceRef

from ..format import external, external_text, gate
from ..widgets.plain import Plain, PlainInput, PlainLabel


def cancel_binding(tooltip: str) -> Binding:
    """``escape``: close the dialog without acting (its ``action_cancel``)."""
    return Binding("escape", "cancel", "Cancel", id="dialog.cancel", tooltip=tooltip)


def dialog_buttons(confirm: str | Text, *, variant: ButtonVariant = "primary",
                   disabled: bool = False) -> Horizontal:
    """The row under a dialog: *Cancel* (``#cancel``) and the confirming button
    (``#confirm``); a plain ``str`` label is not read as markup."""
    label = gate(confirm)
    return Horizontal(Button("Cancel", id="cancel"),
                      Button(label, id="confirm", variant=variant, disabled=disabled),
                      id="dialog-buttons")


class FormDialog(ModalScreen):
    """A dialog of fields checked as they are typed. Subclasses give :meth:`problem` (what
    is wrong, or None) and :meth:`answer` (what the dialog answers), and compose a
    ``#dialog-problem`` line and :func:`dialog_buttons`. The problem is shown as the fields
    change and *confirm* is off while there is one; Enter or *confirm* answers when nothing
    is wrong, and password fields are emptied then (a secret is not kept in the widget);
    ``escape`` or *Cancel* answers None."""

    def problem(self) -> str | None:
        """What is wrong with the fields (None: nothing)."""
        return None

    def answer(self):
        """What the dialog answers once nothing is wrong."""
        return None

    def show_problem(self) -> str | None:
        problem = self.problem()
        self.query_one("#dialog-problem", Static).update(problem or "")
        self.query_one("#confirm", Button).disabled = problem is not None
        return problem

    def on_input_changed(self) -> None:
        self.show_problem()

    def submit(self) -> None:
        if self.problem() is not None:
            return
        answer = self.answer()
        for box in self.query(Input).results(Input):
            if box.password:
                box.value = ""
        self.dismiss(answer)

    def on_input_submitted(self) -> None:
        self.submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "confirm":
            self.submit()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmDialog(ModalScreen[bool]):
    """Ask before doing something. ``escape`` or *Cancel* answers no; the focus starts on
    *Cancel* for destructive actions, so a stray ``enter`` never destroys anything."""

    BINDINGS = [
        cancel_binding("Close without acting"),
        Binding("left,h", "app.focus_previous", show=False),
        Binding("right,l", "app.focus_next", show=False),
    ]

    def __init__(self, title: str, message: str | Text, confirm: str, *,
                 destructive: bool = True) -> None:
        super().__init__()
        self.title_text = title
        self.message = message
        self.confirm_label = confirm
        self.destructive = destructive

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="" if self.destructive else "-safe"):
            yield PlainLabel(self.title_text, id="dialog-title")
            yield Plain(self.message, id="dialog-message")
            yield dialog_buttons(self.confirm_label,
                                 variant="error" if self.destructive else "primary")

    def on_mount(self) -> None:
        self.query_one("#cancel" if self.destructive else "#confirm", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm")

    def action_cancel(self) -> None:
        self.dismiss(False)


class DeleteDialog(ConfirmDialog):
    """The confirmation of a delete that can also remove storage the instance keeps
    (``Backend.owned_storage``): every item listed under a checkbox that is off, so only a
    deliberate tick deletes them. Answers None (cancelled), ``"instance"`` or
    ``"storage"`` (the instance and the storage listed)."""

    def __init__(self, title: str, message: str, confirm: str, storage: list[str]) -> None:
        super().__init__(title, message, confirm)
        self.storage = storage

    def compose(self) -> ComposeResult:
        count = len(self.storage)
        with Vertical(id="dialog"):
            yield PlainLabel(self.title_text, id="dialog-title")
            yield Plain(self.message, id="dialog-message")
            yield Checkbox(gate(f"Also delete its storage ({count} item"
                                f"{'' if count == 1 else 's'}, kept otherwise):"), False,
                           id="delete-storage")
            yield Plain("\n".join(f"  {item}" for item in self.storage),
                        id="delete-storage-list")
            yield dialog_buttons(self.confirm_label, variant="error")

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        label = self.confirm_label + (" with its storage" if event.value else "")
        self.query_one("#confirm", Button).label = gate(label)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.prevent_default()  # not ConfirmDialog's answer as well
        if event.button.id != "confirm":
            self.dismiss(None)
            return
        with_storage = self.query_one("#delete-storage", Checkbox).value
        # A ConfirmDialog (its look, its keys) answering a word, not ConfirmDialog's bool:
        # one screen class has one answer type, which this subclass cannot narrow.
        self.dismiss("storage" if with_storage else "instance")  # type: ignore[arg-type]

    def action_cancel(self) -> None:
        self.dismiss(None)


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

    BINDINGS = [cancel_binding("Close without sending")]

    def __init__(self, title: str, names: list[str]) -> None:
        super().__init__()
        self.title_text = title
        self.names = names

    def compose(self) -> ComposeResult:
        from textual.widgets import OptionList
        from textual.widgets.option_list import Option

        with Vertical(id="dialog", classes="-safe"):
            yield PlainLabel(f"Send a key to {self.title_text}", id="dialog-title")
            yield OptionList(*(Option(external(_label(n)), id=n) for n in self.names),
                             id="special-keys")

    def on_option_list_option_selected(self, event) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


class InputDialog(FormDialog):
    """Ask for one value, checked as it is typed (``check`` returns a problem or None);
    answers it stripped, or None."""

    BINDINGS = [cancel_binding("Close without acting")]

    def __init__(self, title: str, label: str, value: str = "", *, confirm: str = "OK",
                 check=None, path: bool = False) -> None:
        super().__init__()
        self.path = path
        """A local path: Tab completes it (``tui/screens/paths.py``)."""
        self.title_text = title
        self.label = label
        self.value = value
        self.confirm_label = confirm
        self.check = check

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="-safe"):
            yield PlainLabel(self.title_text, id="dialog-title")
            yield Plain(self.label)
            if self.path:
                from .paths import PathInput

                yield PathInput(self.value, id="dialog-input")
            else:
                yield PlainInput(self.value, id="dialog-input")
            yield Plain("", id="dialog-problem")
            yield dialog_buttons(self.confirm_label)

    def _value(self) -> str:
        return self.query_one("#dialog-input", Input).value

    def problem(self) -> str | None:
        value = self._value()
        return self.check(value) if self.check else (None if value.strip() else
                                                     "A value is needed.")

    def answer(self) -> str:
        return self._value().strip()


class SnapshotDialog(ModalScreen["dict | None"]):
    """A new snapshot: name (a default is offered), with memory where the backend can,
    and an expiry where the backend keeps one."""

    BINDINGS = [cancel_binding("Close without taking a snapshot")]

    def __init__(self, title: str, name: str, *, stateful: bool | None,
                 expiry: bool, taken: set[str]) -> None:
        super().__init__()
        self.title_text = title
        self.default_name = name
        self.stateful = stateful
        self.expiry = expiry
        self.taken = taken
        self._note = ""
        """Said once after the next change (why a default name was filled in)."""

    def compose(self) -> ComposeResult:
        from textual.widgets import Checkbox

        with Vertical(id="dialog", classes="-safe"):
            yield PlainLabel(self.title_text, id="dialog-title")
            yield Plain("Name")
            yield PlainInput(self.default_name, id="snapshot-name")
            if self.stateful is not None:
                yield Checkbox("Include the running memory (stateful)", self.stateful,
                               id="snapshot-stateful")
            if self.expiry:
                yield Plain("Expires after (e.g. 2d, 1w, 12H; empty: never)")
                yield PlainInput("", id="snapshot-expiry", placeholder="never")
            yield Plain("", id="dialog-problem")
            yield dialog_buttons("Take snapshot")

    def _values(self) -> tuple[dict | None, str | None]:
        from textual.widgets import Checkbox, Input

        from .. import format as fmt

        name = self.query_one("#snapshot-name", Input).value.strip()
        if not name:
            return None, "A name is needed."
        if any(c.isspace() or c == "/" for c in name):
            return None, "No spaces or slashes in a snapshot name."
        if name in self.taken:
            return None, f"There is already a snapshot named '{name}'."
        values: dict = {"name": name}
        if self.stateful is not None:
            values["stateful"] = self.query_one("#snapshot-stateful", Checkbox).value
        if self.expiry:
            text = self.query_one("#snapshot-expiry", Input).value.strip()
            if text:
                try:
                    values["expires_in"] = fmt.parse_duration(text)
                except ValueError as e:
                    return None, str(e)
        return values, None

    def on_input_changed(self) -> None:
        _, problem = self._values()
        note, self._note = self._note, ""
        self.query_one("#dialog-problem", Static).update(problem or note)
        self.query_one("#confirm", Button).disabled = problem is not None

    def on_input_submitted(self) -> None:
        self._take()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id != "confirm":
            self.dismiss(None)
            return
        self._take()

    def _take(self) -> None:
        """Take the snapshot, or say what is missing (an empty name gets the default back,
        to take with a second Enter)."""
        from textual.widgets import Input

        values, problem = self._values()
        if problem is None:
            self.dismiss(values)
            return
        box = self.query_one("#snapshot-name", Input)
        if not box.value.strip() and self.default_name:
            problem = self._note = (f"A snapshot needs a name: '{self.default_name}' is "
                                    f"filled in; Enter takes it.")
            box.value = self.default_name
        self.app.bell()
        self.query_one("#dialog-problem", Static).update(problem)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ActionsMenu(ModalScreen[str | None]):
    """Pick an action for one instance."""

    BINDINGS = [cancel_binding("Close without acting")]

    def __init__(self, ref: InstanceRef, actions: list[tuple[str, str, str]]) -> None:
        """``actions``: (id, label, help) of each action offered."""
        super().__init__()
        self.ref = ref
        self.actions = actions

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="-safe"):
            yield PlainLabel(f"Actions for {self.ref}", id="dialog-title")
            yield OptionList(*(Option(external_text(Text.assemble((label, "bold"),
                                                                  f"\n  {help_text}")),
                                      id=key) for key, label, help_text in self.actions),
                             id="actions-list")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


class PasswordDialog(FormDialog):
    """User and password; the password is masked and never shown, logged or kept."""

    BINDINGS = [cancel_binding("Close without changing anything")]

    def __init__(self, ref: InstanceRef) -> None:
        super().__init__()
        self.ref = ref

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="-safe"):
            yield PlainLabel(f"Change a password in {self.ref}", id="dialog-title")
            yield Plain("User")
            yield PlainInput("root", id="pw-user")
            yield Plain("New password")
            yield PlainInput(password=True, id="pw-1")
            yield Plain("Again")
            yield PlainInput(password=True, id="pw-2")
            yield Plain("", id="dialog-problem")
            yield dialog_buttons("Set password", disabled=True)

    def on_mount(self) -> None:
        # the password first: typed into the user field it would replace "root" in clear
        self.query_one("#pw-1", Input).focus()

    def problem(self) -> str | None:
        user = self.query_one("#pw-user", Input).value
        one = self.query_one("#pw-1", Input).value
        two = self.query_one("#pw-2", Input).value
        if not user or any(c in user for c in ":\n \t"):
            return "A user name without spaces or ':' is needed."
        if not one:
            return "Type the new password."
        if "\n" in one:
            return "The password cannot contain a line break."
        if one != two:
            return "The two passwords differ."
        return None

    def answer(self) -> tuple[str, str]:
        return (self.query_one("#pw-user", Input).value,
                self.query_one("#pw-1", Input).value)


class ChoiceDialog(ModalScreen[str | None]):
    """Pick one of a few labelled choices."""

    BINDINGS = [cancel_binding("Close without choosing")]

    def __init__(self, title: str, choices: list[tuple[str, str]], note: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.choices = choices
        self.note = note

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="-safe"):
            yield PlainLabel(self.title_text, id="dialog-title")
            if self.note:
                yield Plain(self.note)
            yield OptionList(*(Option(gate(label), id=key) for key, label in self.choices),
                             id="choice-list")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
