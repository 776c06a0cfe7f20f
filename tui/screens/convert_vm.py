"""Convert a VM of one remote into a VM of another (a libvirt domain into a local QEMU VM):
the target's summary of what it understood and could not map, read before anything is
written; a name (checked as it is typed); *Convert* (``ctrl+n``) with the target's
progress, ``x`` to stop a running conversion (the target leaves nothing behind). The
source VM is only read."""

from __future__ import annotations

import asyncio

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input

from backends.errors import BackendError
from backends.models import Instance, InstanceRef
from backends.create_models import CreateRequest, CreateSource

from ..format import external
from ..widgets.plain import Plain, PlainInput, PlainLabel
from .dialogs import dialog_buttons


class ConvertScreen(ModalScreen[Instance | None]):
    """The summary, the name, then the conversion."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="convert.cancel",
                tooltip="Close (stops a running conversion)"),
        Binding("ctrl+n", "convert", "Convert", id="convert.go", tooltip="Convert it"),
        Binding("x", "cancel(True)", "Stop", show=False, tooltip="Stop a running conversion"),
    ]

    def __init__(self, ref: InstanceRef, target: str, backend, source: CreateSource) -> None:
        super().__init__()
        self.ref, self.target, self.backend, self.source = ref, target, backend, source
        self.summary_ready = False
        self._conversion: asyncio.Task | None = None
        """The conversion, while it runs."""
        self._reading: asyncio.Task | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="-safe -wide"):
            yield PlainLabel(f"Convert {self.ref} to a VM on {self.target}", id="dialog-title")
            with VerticalScroll(id="convert-body"):
                yield Plain(f"Reading {self.ref}…", id="convert-summary")
            yield PlainInput("", placeholder="name of the new VM", id="convert-name")
            yield Plain("", id="convert-problem")
            yield Plain("", id="convert-progress")
            yield dialog_buttons("Convert (ctrl+n)", disabled=True)

    def on_mount(self) -> None:
        self._reading = asyncio.ensure_future(self._read())

    def _say(self, text: str) -> None:
        self.query_one("#convert-progress", Plain).update(external(text))

    async def _read(self) -> None:
        try:
            preview = await self.backend.preview_source(self.source, self._say)
        except BackendError as e:
            self.query_one("#convert-summary", Plain).update(
                external(f"{e.title}: {e.message}", "bold"))
            self._say("")
            return
        self._say("")
        self.query_one("#convert-summary", Plain).update(
            external("\n".join(preview.lines), lines=True))
        if preview.problems:
            self.query_one("#convert-problem", Plain).update(external(
                f"It cannot be converted: {'; '.join(preview.problems)}.", "bold"))
            return
        self.summary_ready = True
        box = self.query_one("#convert-name", Input)
        box.value = preview.defaults.get("name", "")
        box.focus()
        self._check()

    @on(Input.Changed, "#convert-name")
    def _check(self) -> None:
        name = self.query_one("#convert-name", Input).value.strip()
        problem = (self.backend.check_name(name) if name else "A name is needed.") \
            if self.summary_ready else None
        self.query_one("#convert-problem", Plain).update(external(problem or ""))
        self.query_one("#confirm", Button).disabled = (not self.summary_ready
                                                       or problem is not None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "confirm":
            self.action_convert()
        else:
            self.action_cancel()

    @on(Input.Submitted, "#convert-name")
    def _submitted(self) -> None:
        self.action_convert()

    def action_convert(self) -> None:
        if self.query_one("#confirm", Button).disabled or self._converting():
            return
        name = self.query_one("#convert-name", Input).value.strip()
        self.query_one("#convert-name", Input).disabled = True
        self.query_one("#confirm", Button).disabled = True
        self.query_one("#cancel", Button).label = "Stop (x)"
        self._say(f"Converting {self.ref} into {self.target}:{name}…")

        async def run() -> None:
            request = CreateRequest(name=name, source=self.source)
            try:
                inst = await self.backend.create_instance(
                    request, lambda text: self._say(f"{self.target}:{name}: {text}"))
            except asyncio.CancelledError:
                self._say(f"Stopped: {name} was not created.")
            except BackendError as e:
                self._say(f"{e.title}: {e.message}")
            else:
                self.dismiss(inst)
                return
            self.query_one("#cancel", Button).label = "Cancel"
            self.query_one("#convert-name", Input).disabled = False
            self._check()

        self._conversion = asyncio.ensure_future(run())

    def _converting(self) -> bool:
        return self._conversion is not None and not self._conversion.done()

    def action_cancel(self, running_only: bool = False) -> None:
        if self._converting():
            self._say("Stopping…")
            self._conversion.cancel()  # type: ignore[union-attr]
            return
        if not running_only:
            self.dismiss(None)

    def on_unmount(self) -> None:
        for task in (self._reading, self._conversion):
            if task is not None and not task.done():
                task.cancel()
        self.backend.drop_preview(self.source)
