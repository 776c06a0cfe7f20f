"""Edit any object as YAML in ``$EDITOR`` (``E``), like ``lxc config edit``.

corral gives the terminal to the editor (``App.suspend``), then sends the text with the
ETag read when the editor opened. A change made meanwhile by someone else is refused in
words and the user may edit again with their text kept; invalid YAML or a daemon refusal
is shown (with the line, for YAML) and the editor is offered again with the text kept.
Nothing is half-applied: the daemon replaces the object whole or not at all.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import SuspendNotSupported

from backends.base import Backend
from backends.errors import BackendError, Conflict, InvalidInput
from backends.models import ResourceKind

from ..format import printable
from ..keyboard import handed_over
from ..screens.dialogs import ChoiceDialog

if TYPE_CHECKING:
    from collections.abc import Mapping

    from textual.app import App


def editor_command(env: Mapping[str, str]) -> list[str]:
    """``$VISUAL``, ``$EDITOR`` or ``vi``, split like a shell would."""
    return shlex.split(env.get("VISUAL") or env.get("EDITOR") or "vi")


async def run_editor(app: App, text: str, name: str) -> str | None:
    """Let the user edit ``text`` in their editor; the new text, or None when the editor
    failed (exit status not 0)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60]
    fd, path = tempfile.mkstemp(prefix=f"corral-{safe}-", suffix=".yaml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        argv = editor_command(os.environ) + [path]
        handed_over(app)

        async def edit() -> int:
            proc = await asyncio.create_subprocess_exec(*argv)
            return await proc.wait()

        try:
            # Nothing is drawn while the editor owns the terminal (events keep arriving):
            # the batch ends, and the screen is redrawn, after the app has it back.
            with app.batch_update(), app.suspend():
                status = await edit()
        except SuspendNotSupported:  # no terminal to hand over (headless runs)
            status = await edit()
        if status != 0:
            return None
        return Path(path).read_text(encoding="utf-8")  # a small file, just written
    finally:
        os.unlink(path)


NOTE = "# corral: "
CURRENT = "# --- the current version (corral) ---"


def annotate(text: str, notes: list[str], *, current: str = "") -> str:
    """The user's text with corral's notes on top (and the current version commented out
    at the end), earlier notes removed: comments, so the YAML means the same."""
    lines = text.splitlines()
    while lines and lines[0].startswith(NOTE):
        lines.pop(0)
    if CURRENT in lines:
        lines = lines[:lines.index(CURRENT)]
    out = [NOTE + n for n in notes] + lines
    if current:
        out += [CURRENT] + ["# " + line for line in current.splitlines()]
    return "\n".join(out) + "\n"


async def edit_object(app: App, backend: Backend, kind: ResourceKind, name: str,
                      parent: str = "", *, what: str = "") -> bool:
    """The whole edit: read, edit, send; again while the user wants. True when saved."""
    what = what or f"{kind.value} {name}"

    def say(message: str, title: str, severity: str = "error") -> None:
        app.notify(printable(message, lines=True), title=printable(title),
                   severity=severity, markup=False,  # type: ignore
                   timeout=12)

    try:
        original, etag = await backend.get_yaml(kind, name, parent)
    except BackendError as e:
        say(e.message, f"Edit {what}: {e.title}")
        return False
    text = original
    while True:
        edited = await run_editor(app, text, f"{backend.remote.name}-{name}")
        if edited is None:
            say("The editor did not exit cleanly; nothing was changed.", f"Edit {what}",
                "warning")
            return False
        if edited == original:
            say(f"{what}: no change.", "Edit", "information")
            return False
        text = edited
        try:
            await backend.put_yaml(kind, name, text, etag, parent)
        except Conflict as e:
            note = (f"{e.message}\n\nYour text is kept. Edit again: it will be saved over "
                    f"the current version (read now).")
            choice = await app.push_screen_wait(ChoiceDialog(
                f"{what} changed meanwhile", [("again", "Edit again (my text kept)"),
                                              ("drop", "Discard my changes")], note))
            if choice != "again":
                return False
            try:
                original, etag = await backend.get_yaml(kind, name, parent)
            except BackendError as e2:
                say(e2.message, f"Edit {what}: {e2.title}")
                return False
            notes = [f"{what} was changed by someone else while you edited it.",
                     "Your text is below; the current version is at the end, commented out.",
                     "Saving writes your text over it."]
            text = annotate(text, notes, current=original)
            continue
        except (InvalidInput, BackendError) as e:
            note = f"{e.message}\n\nNothing was changed; your text is kept."
            choice = await app.push_screen_wait(ChoiceDialog(
                f"{what}: {e.title}", [("again", "Edit again (my text kept)"),
                                       ("drop", "Discard my changes")], note))
            if choice != "again":
                return False
            text = annotate(text, [f"not saved: {e.message}"])
            continue
        say(f"Saved {what}.", "Edit", "information")
        return True
