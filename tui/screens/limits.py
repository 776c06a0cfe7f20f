"""The resource editor (``L``): every limit the backend knows for one instance, each
saying *live*, *needs restart* or *not supported* before anything is applied."""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from backends.errors import BackendError
from backends.models import InstanceRef, LimitField

from ..format import external
from ..widgets.plain import Plain, PlainInput, PlainLabel

APPLIES = {
    "live": ("live", "success"),
    "restart": ("needs restart", "warning"),
    "unsupported": ("not supported", "error"),
}


def applies_text(field: LimitField) -> Text:
    label, _ = APPLIES.get(field.applies, (field.applies, "foreground"))
    text = external(label, "bold")
    if field.pending:
        text.append(f"\n{field.pending} pending (next start)", style="italic")
    return text


class LimitsScreen(ModalScreen[dict[str, str] | None]):
    """Edit the limits of ``ref``. Dismisses with what was applied (key → live/restart)."""

    BINDINGS = [
        Binding("escape", "cancel", "Close", id="limits.cancel",
                tooltip="Close without applying"),
        Binding("ctrl+s", "apply", "Apply", id="limits.apply",
                tooltip="Apply the changed values"),
    ]

    def __init__(self, backend, ref: InstanceRef) -> None:
        super().__init__()
        self.backend = backend
        self.ref = ref
        self.fields: list[LimitField] = []
        self.loaded = False  # True once the fields are shown and one has the focus

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="-safe -wide"):
            yield PlainLabel(f"Resources of {self.ref}", id="dialog-title")
            yield Plain("Reading the current limits…", id="limits-note")
            yield VerticalScroll(Grid(id="limits-grid"), id="limits-scroll")
            yield Plain("", id="limits-error")
            with Horizontal(id="dialog-buttons"):
                yield Button("Close", id="cancel")
                yield Button("Apply (ctrl+s)", id="confirm", variant="primary",
                             disabled=True)

    def on_mount(self) -> None:
        self.load()

    @work(exclusive=True, group="limits-load", exit_on_error=False)
    async def load(self) -> None:
        try:
            self.fields = await self.backend.get_limits(self.ref)
        except BackendError as e:
            self.query_one("#limits-note", Static).update(
                external(f"Cannot read the limits: {e.message}", "bold"))
            return
        await self.show_fields()

    async def show_fields(self) -> None:
        grid = self.query_one("#limits-grid", Grid)
        await grid.remove_children()
        rows = []
        for f in self.fields:
            unsupported = f.applies == "unsupported"
            rows += [
                PlainLabel(f.label, classes="limit-label"),
                PlainInput(value=f.value, placeholder="(none)" if not unsupported else "",
                      id=f"limit-{f.key}", disabled=unsupported,
                      tooltip=external(f.hint) if f.hint else None, classes="limit-input"),
                Plain(applies_text(f), classes=f"limit-applies -{f.applies}"),
                Plain(external(f.hint, "italic"), classes="limit-hint"),
            ]
        await grid.mount_all(rows)
        live = sum(f.applies == "live" for f in self.fields)
        restart = sum(f.applies == "restart" for f in self.fields)
        note = (f"{live} apply live, {restart} at the next start. Change a value, then "
                f"ctrl+s. Sizes like 512MiB or 2GiB; empty removes a limit.")
        self.query_one("#limits-note", Static).update(note)
        self.query_one("#confirm", Button).disabled = True
        focused = self.focused
        if not (isinstance(focused, Input) and focused.has_class("limit-input")):
            # the first editable field, unless the user already moved into one
            for first in self.query(".limit-input").results(Input):
                if not first.disabled:
                    first.focus()
                    break
        self.loaded = True

    def changes(self) -> dict[str, str]:
        out = {}
        for f in self.fields:
            try:
                box = self.query_one(f"#limit-{f.key}", Input)
            except Exception:  # not mounted yet
                continue
            if not box.disabled and box.value.strip() != f.value:
                out[f.key] = box.value.strip()
        return out

    @on(Input.Changed, ".limit-input")
    def _changed(self) -> None:
        changed = self.changes()
        self.query_one("#confirm", Button).disabled = not changed
        if changed:
            by = {f.key: f for f in self.fields}
            parts = [f"{by[k].label}: {APPLIES.get(by[k].applies, ('?',))[0]}"
                     for k in changed]
            self.query_one("#limits-error", Static).update(
                "Will apply — " + "; ".join(parts))
        else:
            self.query_one("#limits-error", Static).update("")

    @on(Input.Submitted, ".limit-input")
    def _submitted(self) -> None:
        self.action_apply()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "confirm":
            self.action_apply()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_apply(self) -> None:
        if self.changes():
            self.apply()

    @work(exclusive=True, group="limits-apply", exit_on_error=False)
    async def apply(self) -> None:
        changes = self.changes()
        error = self.query_one("#limits-error", Static)
        self.query_one("#confirm", Button).disabled = True
        error.update("Applying…")
        try:
            result = await self.backend.set_limits(self.ref, changes)
        except BackendError as e:
            error.update(external(f"{e.title}: {e.message} — nothing was changed.", "bold"))
            self.query_one("#confirm", Button).disabled = False
            return
        self.dismiss(result)
