"""The launch wizard's look at a source before the summary (a foreign VM to import, for
one): for a source the backend marks ``preview``, leaving the *What* step asks the
backend's ``preview_source`` (with its progress shown, and cancelled by leaving), fills
the name, CPU and memory fields with what the source says, and the summary lists what was
understood and what not; a source that cannot be created from keeps *Create* disabled
with the reason. Also whether a running creation can be cancelled."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Input

from backends.create_preview import SourcePreview
from backends.errors import BackendError

from ..format import external
from ..widgets.plain import Plain

def _chosen(screen):  # the WizardScreen
    """The chosen source as it would be asked for, and the options its fields give."""
    source, options = screen.chosen()
    return source, tuple(sorted(options.items()))


def current(screen) -> SourcePreview | None:
    """The preview of the source and path now chosen (None: none, or another one's)."""
    kept = screen.__dict__.get("_preview")
    src = screen.source
    if kept is None or src is None or not src.preview:
        return None
    key, result = kept
    return result if key == (screen.remote, *_chosen(screen)) else None


async def enter(screen) -> None:
    """Leave the *What* step through the backend's preview of the chosen source."""
    remote = screen.remote
    chosen, options = _chosen(screen)
    path = chosen.value or chosen.label  # (what is read, in the progress line)
    problem = screen.query_one("#wizard-problem", Plain)
    screen.query_one("#next").disabled = True
    drop(screen)

    def report(text: str) -> None:
        problem.update(external(f"Reading {path}: {text}", "italic"))

    report("…")
    try:
        result = await screen.backend.preview_source(chosen, report)
    except BackendError as e:
        problem.update(external(f"{e.title}: {e.message}", "bold"))
        return
    finally:
        screen.query_one("#next").disabled = False
    screen.__dict__["_preview"] = ((remote, chosen, options), result)
    screen.__dict__["_previewed"] = (screen.backend, chosen)
    fields = {"name": "#wizard-name", "cpus": "#wizard-cpus", "memory": "#wizard-memory"}
    for key, widget in fields.items():
        value = result.defaults.get(key)
        if value:
            screen.query_one(widget, Input).value = value
    problem.update("")
    screen.show("name")


def lines(screen) -> Text:
    """The summary's lines of the preview (empty when there is none)."""
    result = current(screen)
    text = Text()
    if result is not None:
        text.append("\n")
        for line in result.lines:
            text.append_text(external(line))
            text.append("\n")
    return text


def problem(screen) -> str | None:
    """Why the summary's source cannot be created from (None: it can)."""
    result = current(screen)
    if result is None:
        src = screen.source
        return "Go back to 'What': the source must be read again." if src and src.preview \
            else None
    return "; ".join(result.problems) or None


def can_cancel(screen) -> bool:
    return bool(screen.options.can_cancel or screen.source and screen.source.cancellable)


def drop(screen) -> None:
    """Let the backend forget what it read for the last preview."""
    previewed = screen.__dict__.pop("_previewed", None)
    screen.__dict__.pop("_preview", None)
    if previewed is not None:
        backend, source = previewed
        backend.drop_preview(source)
