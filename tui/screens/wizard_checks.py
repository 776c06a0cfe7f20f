"""What keeps a step of the launch wizard from being done, in words: each field checked as
it is typed, with the backend's own rules (``check_name``), corral's size parser and the
cloud-init checks; the source's own fields by :mod:`.wizard_fields`, the summary's by
:mod:`.wizard_preview`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets import Input, TextArea

from backends.cloudinit import user_data_problem
from backends.units import parse_size

from . import wizard_preview as preview

if TYPE_CHECKING:
    from .wizard import WizardScreen


def problem(w: WizardScreen) -> str | None:
    """What keeps ``w``'s current step from being done (None: nothing)."""
    if w.step == "where":
        return None if w.remote else "Choose a remote."
    if w.step == "what":
        src = w.source
        if src is None:
            return "Choose what to create the instance from."
        found = w.fields.problem()  # the source's own fields, as it declares them
        return found[1] if found else None
    if w.step == "name":
        name = w.query_one("#wizard-name", Input).value
        if not name:
            return "A name is needed."
        return w.backend.check_name(name)
    if w.step == "resources":
        cpus = w.query_one("#wizard-cpus", Input).value.strip()
        if cpus:
            if not cpus.isascii() or not cpus.isdecimal() or int(cpus) < 1:
                return f"CPUs: '{cpus}' is not a whole number of 1 or more."
            if w.options.max_cpus and int(cpus) > w.options.max_cpus:
                return f"CPUs: this host has {w.options.max_cpus}."
            if int(cpus) > 4096:
                return "CPUs: at most 4096."
        for key, label in (("memory", "Memory"), ("disk", "Disk")):
            text = w.query_one(f"#wizard-{key}", Input).value.strip()
            if text:
                try:
                    value = parse_size(text, default_unit="MiB" if key == "memory"
                                       else "GiB")
                except ValueError as e:
                    return f"{label}: {e}"
                if key == "memory" and value < 16 * 2**20:
                    return "Memory: at least 16MiB."
        return None
    if w.step == "cloud-init":
        return user_data_problem(w.query_one("#wizard-user-data", TextArea).text)
    return preview.problem(w) if w.step == "summary" else None
