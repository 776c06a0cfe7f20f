"""The launch wizard's *Cancel* button: at once from its first two steps, where nothing
was typed yet (and while a creation runs: it cancels that); past them, only after
asking, since what was filled in (name, resources, network, cloud-init) would be lost.
The question's focus starts on its own *Cancel*, so the Tab-then-Enter that reaches the
wizard's Cancel button from the cloud-init text by mistake keeps the wizard open.
``escape`` is the deliberate way out and leaves at once."""

from __future__ import annotations

from .dialogs import ConfirmDialog

ASK_FROM = "name"
"""The first step whose contents are worth a question."""


def leave(wizard) -> None:
    """Cancel ``wizard`` (a :class:`~tui.screens.wizard.WizardScreen`), asking first
    once it is past its first steps."""
    steps = wizard.steps()
    step = wizard.step
    creating = wizard.creating
    filled = step != "progress" and (step not in steps or ASK_FROM not in steps
                                     or steps.index(step) >= steps.index(ASK_FROM))
    if creating or not filled:
        wizard.action_cancel()
        return

    def answered(discard: bool | None) -> None:
        if discard:
            wizard.dismiss(None)

    wizard.app.push_screen(ConfirmDialog(
        "Leave the wizard?",
        "What you filled in is lost, and N starts again from the first step.",
        "Discard and leave"), answered)
