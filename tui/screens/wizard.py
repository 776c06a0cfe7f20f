"""The launch wizard (``N``): where → what → name → resources → network and storage →
cloud-init → summary → create, on any backend that can create instances.

Every field is checked as it is typed, with the backend's own rules (``check_name``) and
corral's size parser; *Next* stays disabled until the step is valid, and the summary shows
exactly what will be asked of the backend. Creation shows the backend's progress and can
be cancelled where the backend allows it; a failed creation leaves nothing behind (the
backend's promise) and says why.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import (
    Button,
    Checkbox,
    ContentSwitcher,
    Input,
    OptionList,
    Select,
    SelectionList,
    TextArea,
)
from textual.widgets.option_list import Option

from backends.errors import BackendError, NeedsConfirmation
from backends.models import Capability, Instance, InstanceType
from backends.create_models import CreateOptions, CreateRequest, CreateSource
from backends.units import format_size, parse_size

from ..format import external, external_text
from ..widgets.marked_list import MarkedOptionList
from ..widgets.plain import Plain, PlainInput, PlainLabel
from .dialogs import ConfirmDialog
from .wizard_leave import leave
from . import wizard_checks as checks
from . import wizard_preview as preview
from .wizard_fields import FieldsHolder, SourceFields
from .placement import AUTO, AUTO_LABEL, chosen_target, load_placements

STEPS = ("where", "what", "name", "resources", "network", "cloud-init", "summary",
         "progress")
TITLES = {
    "where": "Where", "what": "What", "name": "Name", "resources": "Resources",
    "network": "Network and storage", "cloud-init": "cloud-init", "summary": "Summary",
    "progress": "Creating",
}
USER_DATA_EXAMPLE = "#cloud-config\npackages: []\n"


@dataclass
class WizardResult:
    instance: Instance
    open_console: bool


class WizardScreen(ModalScreen[WizardResult | None]):
    """Create an instance, one step at a time."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="wizard.cancel",
                tooltip="Leave the wizard (cancels a running creation where possible)"),
        Binding("ctrl+n", "next", "Next", id="wizard.next", tooltip="Next step"),
        Binding("ctrl+b", "back", "Back", id="wizard.back", tooltip="Previous step"),
        Binding("x", "cancel(True)", "Stop", show=False, tooltip="Cancel a running creation"),
    ]

    def __init__(self, backends: dict, caps: dict, *, preferred: str | None = None) -> None:
        """``backends``: remote name → backend (connected, writable, with ``Capability.CREATE``);
        ``caps``: remote name → what it offers (the inventory's reading)."""
        super().__init__()
        self.backends = backends
        self.caps = caps
        self.remote = preferred if preferred in backends else next(iter(backends), None)
        self.sources: list[CreateSource] = []
        self.options = CreateOptions()
        self._chosen_source: CreateSource | None = None
        self.fields = SourceFields()
        """The chosen source's own fields and what was typed into them."""
        self.step = "where"
        self._create_task: asyncio.Task | None = None
        self._loaded_for: str | None = None

    # Layout ----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="-safe -wide"):
            yield PlainLabel("", id="dialog-title")
            yield Plain("", id="wizard-steps")
            with ContentSwitcher(initial="where", id="wizard-body"):
                with Vertical(id="where"):
                    yield Plain("Create the instance on:")
                    yield MarkedOptionList(*(Option(external(f"{name}  ({b.remote.kind})"),
                                                    id=name)
                                             for name, b in self.backends.items()),
                                           id="wizard-remote")
                with Vertical(id="what"):
                    yield Plain("Create it from:")
                    yield MarkedOptionList(id="wizard-source")
                    yield FieldsHolder(id="wizard-fields")  # the source's own fields
                with Vertical(id="name"):
                    yield Plain("Name of the new instance:")
                    yield PlainInput(id="wizard-name")
                with Vertical(id="resources"):
                    yield Plain("CPUs")
                    yield PlainInput(id="wizard-cpus", placeholder="e.g. 2 (empty: default)")
                    yield Plain("Memory")
                    yield PlainInput(id="wizard-memory", placeholder="e.g. 512MiB, 2GiB")
                    yield Plain("Root disk size", id="wizard-disk-label")
                    yield PlainInput(id="wizard-disk", placeholder="e.g. 10GiB (empty: default)")
                with VerticalScroll(id="network"):
                    yield Plain("Profiles", id="wizard-profiles-label")
                    yield SelectionList[str](id="wizard-profiles")
                    yield Plain("Storage pool", id="wizard-pool-label")
                    yield Select([], id="wizard-pool", prompt="(the remote's default)")
                    yield Plain("Network")
                    yield Select([], id="wizard-network", prompt="(default)")
                    yield Plain("Placement (cluster)", id="wizard-target-label")
                    yield Select([(AUTO_LABEL, AUTO)], value=AUTO, allow_blank=False, id="wizard-target")
                with Vertical(id="cloud-init"):
                    yield Plain("cloud-init user-data (YAML starting with #cloud-config; "
                                "empty: none)")
                    yield TextArea(USER_DATA_EXAMPLE, language="yaml", id="wizard-user-data")
                with Vertical(id="summary"):
                    yield Plain("", id="wizard-summary")
                    yield Checkbox("Start it", True, id="wizard-start")
                    yield Checkbox("Open its console", False, id="wizard-console")
                with Vertical(id="progress"):
                    yield Plain("", id="wizard-progress")
            yield Plain("", id="wizard-problem")
            with Horizontal(id="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Back", id="back")
                yield Button("Next", id="next", variant="primary")

    def on_mount(self) -> None:
        remotes = self.query_one("#wizard-remote", OptionList)
        if self.remote is not None:
            remotes.highlighted = list(self.backends).index(self.remote)
        self.show("where")

    # Steps -----------------------------------------------------------------------------

    @property
    def backend(self):
        return self.backends[self.remote] if self.remote else None

    @property
    def creating(self) -> bool:
        """A creation is under way (Cancel stops it)."""
        return self._create_task is not None and not self._create_task.done()

    def _cancel_creation(self) -> None:
        if self._create_task is not None:
            self._create_task.cancel()

    def steps(self) -> list[str]:
        out = list(STEPS[:-1])
        if not self.options.user_data:
            out.remove("cloud-init")
        return out

    def show(self, step: str) -> None:
        self.step = step
        self.query_one(ContentSwitcher).current = step
        self.query_one("#dialog-title", PlainLabel).update(
            f"New instance — {TITLES[step]}" + (f" on {self.remote}" if self.remote
                                                and step != "where" else ""))
        steps = self.steps()
        marks = Text()
        for i, s in enumerate(steps):
            marks.append(f" {i + 1} {TITLES[s]} ", style="reverse bold" if s == step else "")
        self.query_one("#wizard-steps", Plain).update(marks)
        self.query_one("#back", Button).disabled = step in ("where", "progress")
        self.query_one("#next", Button).label = "Create" if step == "summary" else "Next"
        self.query_one("#next", Button).display = step != "progress"
        if step == "what":
            self._show_source_fields()
        elif step == "summary":
            self.query_one("#wizard-summary", Plain).update(self.summary())
            self.query_one("#wizard-console", Checkbox).display = \
                Capability.CONSOLE in self.caps.get(self.remote or "", frozenset())
        self.validate()
        focus = {
            "where": "#wizard-remote", "what": "#wizard-source", "name": "#wizard-name",
            "resources": "#wizard-cpus", "network": "#wizard-profiles",
            "cloud-init": "#wizard-user-data", "summary": "#next",
        }.get(step)
        if focus:
            widget = self.query_one(focus)
            if widget.display and not widget.disabled:
                widget.focus()

    @property
    def source(self) -> CreateSource | None:
        """The chosen source; choosing one draws its fields."""
        return self._chosen_source

    @source.setter
    def source(self, source: CreateSource | None) -> None:
        self._chosen_source = source
        if self.is_mounted:
            self._show_source_fields()

    def _show_source_fields(self) -> None:
        index = self.sources.index(self.source) if self.source in self.sources else -1
        self.fields.show(self.query_one("#wizard-fields", FieldsHolder), index, self.source)

    # Loading what the remote offers --------------------------------------------------------

    async def load_remote(self) -> bool:
        remote = self.remote
        if self._loaded_for == remote:
            return True
        backend = self.backends[remote]
        problem = self.query_one("#wizard-problem", Plain)
        problem.update(f"Asking {remote} what it offers…")
        remotes = self.query_one("#wizard-remote", OptionList)
        remotes.disabled = True  # the answer must belong to the remote it was asked of
        try:
            sources, options = await asyncio.gather(backend.create_sources(),
                                                    backend.create_options())
        except BackendError as e:
            problem.update(external(f"{remote}: {e.message}", "bold"))
            return False
        finally:
            remotes.disabled = False
        if self.remote != remote:
            return False
        self.sources, self.options = sources, options
        self._loaded_for = remote
        self.fields.forget()
        self.source = None
        sources = self.query_one("#wizard-source", OptionList)
        sources.clear_options()
        sources.add_options([
            Option(external_text(Text.assemble((s.label, "bold"), f"  {s.type.value}", (
                f"  {s.detail}" if s.detail else "", "italic"))), id=str(i))
            for i, s in enumerate(self.sources)])
        if self.sources:
            sources.highlighted = 0
            self.source = self.sources[0]
        self._show_source_fields()
        defaults = self.options.defaults
        self.query_one("#wizard-cpus", Input).value = defaults.get("cpus", "")
        self.query_one("#wizard-memory", Input).value = defaults.get("memory", "")
        self.query_one("#wizard-disk", Input).value = defaults.get("disk", "")
        sized = "disk" in defaults  # a backend without a disk default has no disk size
        self.query_one("#wizard-disk").display = sized
        self.query_one("#wizard-disk-label").display = sized
        profiles = self.query_one("#wizard-profiles", SelectionList)
        profiles.clear_options()
        profiles.add_options([(external(p), p, p in self.options.default_profiles)
                              for p in self.options.profiles])
        has_profiles = bool(self.options.profiles)
        profiles.display = has_profiles
        self.query_one("#wizard-profiles-label").display = has_profiles
        pool = self.query_one("#wizard-pool", Select)
        pool.set_options([(external(p), p) for p in self.options.storage_pools])
        pool.display = bool(self.options.storage_pools)
        self.query_one("#wizard-pool-label").display = bool(self.options.storage_pools)
        network = self.query_one("#wizard-network", Select)
        network.set_options([(external(n), n) for n in self.options.networks])
        await load_placements(self, backend, self.caps.get(self.remote or "", frozenset()))
        problem.update("")
        return True

    # Validation ----------------------------------------------------------------------------

    def problems(self) -> str | None:
        """What keeps the current step from being done, in words."""
        return checks.problem(self)

    def validate(self) -> bool:
        problem = self.problems()
        self.query_one("#wizard-problem", Plain).update(
            external(problem, "bold") if problem else "")
        self.query_one("#next", Button).disabled = problem is not None
        return problem is None

    @on(Input.Changed)
    @on(TextArea.Changed)
    @on(Select.Changed)
    def _changed(self, event: Input.Changed | TextArea.Changed | Select.Changed) -> None:
        self.fields.changed(event.control)
        self.validate()

    @on(OptionList.OptionHighlighted, "#wizard-remote")
    def _remote(self, event: OptionList.OptionHighlighted) -> None:
        self.remote = event.option.id
        self.validate()

    @on(OptionList.OptionHighlighted, "#wizard-source")
    def _source(self, event: OptionList.OptionHighlighted) -> None:
        assert event.option.id is not None  # every source's option has its index as id
        self.source = self.sources[int(event.option.id)]
        self.validate()

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        """Enter on a remote, or on a source that needs nothing more: the next step. On a
        source with a field to fill in: that field (what is typed next goes there)."""
        if event.option_list.id == "wizard-source" and self.problems() is not None:
            widget = self.fields.first_to_fill()
            if widget is not None:
                widget.focus()
                return
        self.action_next()

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.action_next()

    # The request ------------------------------------------------------------------------

    def chosen(self) -> tuple[CreateSource, dict[str, str]]:
        """The chosen source with its value answered, and the options its fields answer."""
        assert self.source is not None
        return self.fields.apply(self.source)

    def request(self) -> CreateRequest:
        src, options = self.chosen()
        cpus = self.query_one("#wizard-cpus", Input).value.strip()
        memory = self.query_one("#wizard-memory", Input).value.strip()
        disk = self.query_one("#wizard-disk", Input).value.strip()
        pool = self.query_one("#wizard-pool", Select).value
        network = self.query_one("#wizard-network", Select).value
        if (target := chosen_target(self)) is not None:
            options["target"] = target
        user_data = ""
        if self.options.user_data:
            text = self.query_one("#wizard-user-data", TextArea).text
            if text.strip() and text.strip() != USER_DATA_EXAMPLE.strip():
                user_data = text
        return CreateRequest(
            name=self.query_one("#wizard-name", Input).value,
            source=src,
            cpus=int(cpus) if cpus else None,
            memory=parse_size(memory, default_unit="MiB") if memory else None,
            disk=parse_size(disk, default_unit="GiB") if disk else None,
            profiles=tuple(self.query_one("#wizard-profiles", SelectionList).selected)
            if self.options.profiles else (),
            storage_pool=pool if isinstance(pool, str) else "",
            network=network if isinstance(network, str) else "",
            user_data=user_data,
            start=self.query_one("#wizard-start", Checkbox).value,
            options=options,
        )

    def summary(self) -> Text:
        r = self.request()
        rows = [
            ("Remote", f"{self.remote} ({self.backend.remote.kind})"),
            ("Name", r.name),
            ("Type", r.source.type.value if r.source.type is InstanceType.VM
             else "container"),
            ("From", r.source.label),
            *self.fields.rows(),
            ("CPUs", str(r.cpus) if r.cpus else "default"),
            ("Memory", format_size(r.memory) if r.memory else "default"),
            ("Disk", format_size(r.disk) if r.disk else "default"),
        ]
        if self.options.profiles:
            rows.append(("Profiles", ", ".join(r.profiles) or "none"))
        if r.storage_pool:
            rows.append(("Storage", r.storage_pool))
        rows.append(("Network", r.network or "default"))
        if "target" in r.options:
            rows.append(("Placement", r.options["target"]))
        if self.query_one("#wizard-target", Select).display and "target" not in r.options:
            rows.append(("Placement", "the cluster chooses the member"))
        if self.options.user_data:
            lines = r.user_data.count("\n") + 1 if r.user_data else 0
            rows.append(("cloud-init", f"{lines} lines of user-data" if lines else "none"))
        text = Text()
        width = max(len(label) for label, _ in rows)  # a source's own labels may be longer
        for label, value in rows:
            text.append(f"{label:>{width}}  ", style="bold")
            text.append(f"{value}\n")
        return text.append_text(preview.lines(self))

    # Navigation --------------------------------------------------------------------------

    def action_next(self) -> None:
        if self.step == "summary-failed":
            self.action_back()  # back on the summary: "Create" tries again from there
            return
        if self.step not in self.steps() or not self.validate():
            return
        if self.step == "summary":
            self.create()
            return
        steps = self.steps()
        following = steps[steps.index(self.step) + 1]
        if self.step == "where" or (self.step == "what" and self.source is not None
                                    and self.source.preview):
            work = self._enter_what() if self.step == "where" else preview.enter(self)
            self.run_worker(work, exclusive=True, group="wizard-load", exit_on_error=False)
            return
        self.show(following)

    async def _enter_what(self) -> None:
        if await self.load_remote():
            self.show("what")

    def action_back(self) -> None:
        if self.step == "summary-failed":
            self.query_one("#next", Button).display = True
            self.show("summary")
            return
        if self.step in ("where", "progress"):
            return
        steps = self.steps()
        self.show(steps[steps.index(self.step) - 1])

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "next":
            self.action_next()
        elif event.button.id == "back":
            self.action_back()
        else:
            leave(self)  # the Cancel button asks first once something was filled in

    def action_cancel(self, running_only: bool = False) -> None:
        if self.creating:
            if not preview.can_cancel(self):
                self.query_one("#wizard-problem", Plain).update(external(
                    f"{self.remote} cannot stop a creation half way; wait for it to end.",
                    "bold"))
                return
            self.query_one("#wizard-progress", Plain).update("Cancelling…")
            self._cancel_creation()
            return
        if not running_only:
            self.dismiss(None)

    # Creating ----------------------------------------------------------------------------

    def create(self) -> None:
        request = self.request()
        self.show("progress")
        progress = self.query_one("#wizard-progress", Plain)
        progress.update(f"Creating {request.name} on {self.remote}…")
        self.query_one("#cancel", Button).label = (
            "Cancel creation (x)" if preview.can_cancel(self) else "Cancel")

        def report(text: str) -> None:
            progress.update(f"Creating {request.name} on {self.remote}: {text}")

        async def run() -> None:
            nonlocal request
            try:
                try:
                    instance = await self.backend.create_instance(request, report)
                except NeedsConfirmation as e:  # ask, then again with the user's agreement
                    agreed = asyncio.get_running_loop().create_future()
                    self.app.push_screen(ConfirmDialog(e.title, e.message, "Create anyway"),
                                         callback=agreed.set_result)
                    if not await agreed:
                        raise
                    request = replace(request, options={**request.options, e.option: "yes"})
                    instance = await self.backend.create_instance(request, report)
            except asyncio.CancelledError:
                progress.update(external(f"Cancelled: {request.name} was not created.",
                                         "bold"))
                self._back_to_summary()
                return
            except BackendError as e:
                progress.update(external(f"{e.title}: {e.message}", "bold"))
                self._back_to_summary()
                return
            self.dismiss(WizardResult(
                instance, self.query_one("#wizard-console", Checkbox).value))

        self._create_task = asyncio.ensure_future(run())

    def _back_to_summary(self) -> None:
        self.query_one("#back", Button).disabled = False
        self.query_one("#cancel", Button).label = "Cancel"
        self.step = "summary-failed"
        self.query_one("#next", Button).display = False

    def on_unmount(self) -> None:
        preview.drop(self)
        if self.creating:
            self._cancel_creation()
