"""The file panel (``f``): browse an instance's files, pull and push files and whole
directories with progress and cancel, edit a small text file in ``$EDITOR``.

It asks the backend's ``FILES`` verbs and ``backends.files`` (trees); everything shown
comes from the instance, so it is plain text, never markup.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import tempfile
from typing import Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable
from textual.widgets.data_table import RowDoesNotExist
from textual.worker import Worker

from backends import files
from backends.base import Backend
from backends.errors import BackendError
from backends.models import FileEntry, InstanceRef

from ..flows.yaml_edit import editor_command
from ..format import external
from ..keyboard import handed_over
from ..widgets.footer import FittingFooter
from ..widgets.plain import Plain, PlainLabel
from .dialogs import InputDialog

DETAILS_WAIT = 0.1
"""Seconds a listing waits for its entries' details before showing the names alone."""
EDIT_LIMIT = 1024 * 1024
"""Files larger than this are not opened in the editor (pull them instead)."""


def mode_text(entry: FileEntry) -> str:
    kind = {"directory": "d", "symlink": "l", "file": "-"}.get(entry.kind, "?")
    bits = "".join(ch if entry.mode & (1 << (8 - i)) else "-"
                   for i, ch in enumerate("rwxrwxrwx"))
    return kind + bits


def _sort_key(entry: FileEntry) -> tuple[int, str]:
    return (0 if entry.kind == "directory" else 1, entry.name)


class FilesScreen(ModalScreen[None]):
    """One instance's files."""

    DEFAULT_CSS = """
    FilesScreen { align: center middle; background: $background 60%; }
    FilesScreen #files-box { width: 96%; height: 90%; border: thick $primary;
                             background: $surface; padding: 0 1; }
    FilesScreen #files-table { height: 1fr; }
    FilesScreen #files-status { height: auto; max-height: 4; color: $foreground-muted; }
    FilesScreen #files-status.-error { color: $error; }
    """
    BINDINGS = [
        Binding("escape,q", "close", "Close", id="files.close"),
        Binding("backspace,left,h", "parent", "Up", id="files.parent"),
        Binding("p", "pull", "Pull", id="files.pull", tooltip="Copy to this machine"),
        Binding("u", "push", "Push", id="files.push", tooltip="Copy a local file or "
                "directory into this directory"),
        Binding("e", "edit", "Edit", id="files.edit", tooltip="Edit in $EDITOR, push back"),
        Binding("x", "cancel", "Cancel copy", id="files.cancel"),
        Binding("g", "goto", "Go to", id="files.goto"),
        Binding("ctrl+r", "reload", "Reload", id="files.reload", show=False),
    ]

    def __init__(self, backend: Backend, ref: InstanceRef, path: str = "/") -> None:
        super().__init__()
        self.backend = backend
        self.ref = ref
        self.path = path
        self.entries: dict[str, FileEntry] = {}
        self.transfer: Worker | None = None
        self._cancelling = False
        """x was pressed: progress still arriving from the copy is not shown."""

    def compose(self) -> ComposeResult:
        with Vertical(id="files-box"):
            yield PlainLabel("", id="files-title")
            yield DataTable(id="files-table", cursor_type="row")
            yield Plain("", id="files-status")
        yield FittingFooter()

    def on_mount(self) -> None:
        self.query_one("#files-title", PlainLabel).update(f"{self.ref}: {self.path}")
        self.say(f"Listing {self.path}…")
        table = self.query_one(DataTable)
        table.add_column("Name", key="name", width=36)
        table.add_column("Size", key="size", width=10)
        table.add_column("Mode", key="mode", width=10)
        table.add_column("Owner", key="owner", width=12)
        table.add_column("Target", key="target", width=30)
        table.focus()
        self.load(self.path)

    # Listing ---------------------------------------------------------------------------

    def say(self, text: str, *, error: bool = False) -> None:
        status = self.query_one("#files-status", Plain)
        status.set_class(error, "-error")
        status.update(text)

    def load(self, path: str, select: str = "", *, keep_status: bool = False) -> None:
        self.run_worker(self._load(path, select, keep_status), group="files-list",
                        exclusive=True, exit_on_error=False)

    async def _load(self, path: str, select: str, keep_status: bool = False) -> None:
        # the path and a sign of work at once: a busy daemon may take seconds to answer
        self.query_one("#files-title", PlainLabel).update(f"{self.ref}: {path}")
        if not keep_status:
            self.say(f"Listing {path}…")
        if not select and path == self.path:
            select = self._cursor_key()  # a reload keeps the cursor where it was
        names_of = getattr(self.backend, "list_names", None)
        stat = getattr(self.backend, "stat_files", None)
        try:
            if names_of is not None and stat is not None:
                # the names in one round trip, shown; their details after
                names = await names_of(self.ref, path)
                details = asyncio.ensure_future(stat(self.ref, path, names))
                try:
                    # details that come at once are shown with the names (one fill)
                    entries = await asyncio.wait_for(asyncio.shield(details), DETAILS_WAIT)
                except TimeoutError:
                    self._show(path, [], select, pending=names)
                    if not keep_status:
                        self.say(f"{len(names)} entries · reading their details…")
                    select = self._cursor_key() or select
                    try:
                        entries = await details
                    except asyncio.CancelledError:
                        details.cancel()  # another directory was chosen meanwhile
                        raise
            else:
                entries = await self.backend.list_files(self.ref, path)
        except BackendError as e:
            self.query_one("#files-title", PlainLabel).update(f"{self.ref}: {self.path}")
            self.say(e.message, error=True)
            return
        self._show(path, entries, select)
        if not keep_status and (not self.transfer or not self.transfer.is_running):
            self.say(f"{len(entries)} entries · enter opens · p pull · u push · e edit · "
                     f"g go to a path")

    def _cursor_key(self) -> str:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return ""
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return key if key and key != ".." else ""

    def _show(self, path: str, entries: list[FileEntry], select: str, *,
              pending: Sequence[str] = ()) -> None:
        """Fill the table with ``entries`` (and ``pending``: names whose details are not
        read yet, shown as such and not acted on)."""
        self.path = path
        self.entries = {e.path: e for e in entries}
        table = self.query_one(DataTable)
        table.clear()
        if path != "/":
            table.add_row(external("../"), "", "", "", "", key="..")
        for entry in sorted(entries, key=_sort_key):
            name = entry.name + ("/" if entry.kind == "directory" else "")
            size = files.human_size(entry.size) if entry.kind == "file" and entry.size else ""
            table.add_row(external(name), size, external(mode_text(entry)),
                          external(f"{entry.uid}:{entry.gid}"), external(entry.target),
                          key=entry.path)
        for name in pending:
            table.add_row(external(name), "", "…", "", "", key=posixpath.join(path, name))
        if select:
            try:
                table.move_cursor(row=table.get_row_index(select))
            except RowDoesNotExist:  # not listed (any more): the cursor stays
                pass

    @property
    def selected(self) -> FileEntry | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return self.entries.get(key or "")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value == "..":
            self.action_parent()
            return
        entry = self.entries.get(event.row_key.value or "")
        if entry is None:
            return
        if entry.kind == "directory":
            self.load(entry.path)
        elif entry.kind == "symlink":
            # listed where it points, resolved inside the instance by the backend
            self.load(posixpath.normpath(posixpath.join(self.path, entry.target)))
        elif entry.kind == "file":
            self.action_edit()

    def action_parent(self) -> None:
        if self.path != "/":
            self.load(posixpath.dirname(self.path.rstrip("/")) or "/", select=self.path)

    def action_reload(self) -> None:
        self.load(self.path)

    async def action_goto(self) -> None:
        def chosen(value: str | None) -> None:
            if value:
                self.load(posixpath.normpath("/" + value.lstrip("/")))

        self.app.push_screen(InputDialog(f"Go to a path in {self.ref}", "Path", self.path),
                             chosen)

    def action_close(self) -> None:
        if self.transfer is not None and self.transfer.is_running:
            self.say("A copy is running: x cancels it first.", error=True)
            return
        self.dismiss(None)

    # Copies ----------------------------------------------------------------------------

    def _run_transfer(self, label: str, work) -> None:
        if self.transfer is not None and self.transfer.is_running:
            self.say("One copy at a time: wait, or x cancels it.", error=True)
            return

        async def run() -> None:
            self.say(f"{label}…")
            self._cancelling = False
            try:
                tally = await work
            except BackendError as e:
                self.say(f"{label}: {e.message}", error=True)
                return
            except asyncio.CancelledError:
                self.say("Copy cancelled; what was copied so far stays.", error=True)
                raise
            self.say(f"{label}: done, {tally.text}.")
            self.load(self.path, keep_status=True)

        self.transfer = self.run_worker(run(), group="files-transfer", exit_on_error=False)

    def _progress(self, label: str):
        def show(text: str) -> None:
            if not self._cancelling:  # reports still queued from the worker thread
                self.say(f"{label}: {text} · x cancels")
        return show

    def action_cancel(self) -> None:
        if self.transfer is not None and self.transfer.is_running:
            self._cancelling = True
            self.transfer.cancel()
            self.say("Cancelling the copy…", error=True)

    def action_pull(self) -> None:
        entry = self.selected
        if entry is None:
            self.say("Select a file or directory to pull first.", error=True)
            return

        def chosen(value: str | None) -> None:
            if value:
                local = os.path.expanduser(value)
                label = f"Pulling {entry.path} to {local}"
                self._run_transfer(label, files.pull(self.backend, self.ref, entry, local,
                                                     self._progress(label)))

        self.app.push_screen(InputDialog(
            f"Pull {entry.path}", "Into this local directory", os.getcwd(),
            confirm="Pull", check=_local_dir_problem, path=True), chosen)

    def action_push(self) -> None:
        def chosen(value: str | None) -> None:
            if value:
                label = f"Pushing {value} to {self.path}"
                self._run_transfer(label, files.push(self.backend, self.ref, value, self.path,
                                                     self._progress(label)))

        self.app.push_screen(InputDialog(
            f"Push into {self.ref}:{self.path}", "Local file or directory",
            os.getcwd() + "/", confirm="Push", check=_local_path_problem,
            path=True), chosen)

    # Editing ---------------------------------------------------------------------------

    def action_edit(self) -> None:
        entry = self.selected
        if entry is None or entry.kind != "file":
            self.say("Only regular files can be edited.", error=True)
            return
        if entry.size > EDIT_LIMIT:
            self.say(f"{entry.name} is {files.human_size(entry.size)}; only files up to "
                     f"{files.human_size(EDIT_LIMIT)} are edited here (pull it instead).",
                     error=True)
            return
        self.run_worker(self._edit(entry), group="files-edit", exclusive=True,
                        exit_on_error=False)

    async def _edit(self, entry: FileEntry) -> None:
        with tempfile.TemporaryDirectory(prefix="corral-edit-") as tmp:
            local = os.path.join(tmp, entry.name)
            try:
                await self.backend.read_file(self.ref, entry, local)
            except BackendError as e:
                self.say(e.message, error=True)
                return
            with open(local, "rb") as f:
                before = f.read()
            if len(before) > EDIT_LIMIT or b"\0" in before:
                self.say(f"{entry.name} is not a small text file; pull it instead.",
                         error=True)
                return
            os.chmod(local, 0o600)
            editor = editor_command(os.environ)
            handed_over(self.app)
            with self.app.suspend():
                proc = await asyncio.create_subprocess_exec(*editor, local)
                returncode = await proc.wait()
            with open(local, "rb") as f:
                after = f.read()
            if returncode != 0:
                self.say(f"The editor exited with {returncode}; nothing was pushed.",
                         error=True)
                return
            if after == before:
                self.say(f"{entry.name} unchanged; nothing pushed.")
                return
            try:
                await self.backend.write_file(self.ref, entry, local)
            except BackendError as e:
                self.say(f"Saving {entry.path} failed: {e.message}", error=True)
                return
        self.say(f"{entry.path} saved ({len(after)} bytes), mode and owner kept.")
        self.load(self.path, select=entry.path, keep_status=True)


def _local_dir_problem(value: str) -> str | None:
    path = os.path.expanduser(value.strip())
    if not path:
        return "A local directory is needed."
    return None if os.path.isdir(path) else f"{path} is not a directory here."


def _local_path_problem(value: str) -> str | None:
    path = os.path.expanduser(value.strip())
    if not path or path.endswith("/") and os.path.isdir(path):
        return "Choose a file or directory (Tab completes)."
    return None if os.path.lexists(path) else f"{path} does not exist here."
