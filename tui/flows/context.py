"""The one thing every action's flow gets: what it acts on (instances, or rows of a
``:`` view) and the services it may use."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, TypeVar

from backends.base import Backend
from backends.errors import BackendError
from backends.models import Capability, ConnectionState, Instance, InstanceRef, Snapshot

from ..format import printable
from ..services.inventory import Inventory

if TYPE_CHECKING:
    from textual.app import App
    from textual.screen import Screen

    from ..views.rows import Row
    from ..widgets.console_dock import ConsoleDock

T = TypeVar("T")


@dataclass(frozen=True)
class Settings:
    """User settings flows honour."""

    stop_timeout: int = 30
    shell: tuple[str, ...] = ()
    detach_key: str = "ctrl+right_square_bracket"
    graphics: str = "auto"
    """How the graphical screen is drawn: auto, kitty, sixel or halfblock."""
    screen_fps: float = 10.0
    """Most repaints a second of a changing graphical screen."""
    screenshot_dir: str = "~/corral-screenshots"


OpenView = Callable[[str, str, "str | None"], None]
"""Show a view: its name, its parent (``remote/pool`` of a pool's volumes, else "") and
the filter to show it with (None: the one it had)."""


def _no_view(name: str, parent: str, filter_text: str | None) -> None:
    """(A context made without a screen to switch: tests.)"""


@dataclass(kw_only=True)
class Context:
    """What an action acts on and what its flow may use.

    It acts on instances (``ref``, the selected one or the one named in the palette, its
    ``remote``, and the ``marked`` ones) or on a remote (``remote`` alone), or, in a
    ``:`` view (``view``), on that view's rows (``row``, the selected one, and
    ``marked_rows``)."""

    app: "App"
    inventory: Inventory
    settings: Settings = field(default_factory=Settings)
    # What it acts on: instances or a remote…
    ref: InstanceRef | None = None
    remote: str | None = None
    """The remote acted on (the instance's, or the selected row's in a view)."""
    marked: tuple[InstanceRef, ...] = ()
    """The instances marked in the table (lifecycle verbs act on all of them)."""
    snapshot: Snapshot | None = None
    """The snapshot selected in the snapshots tab (snapshot actions)."""
    snapshot_names: frozenset[str] = frozenset()
    """Names of the snapshots shown for ``ref`` (to refuse a taken name as it is typed)."""
    # … or the rows of a view
    view: str = ""
    """The ``:`` view whose rows it acts on (``profiles``); "": the instances."""
    row: Row | None = None
    """The view's selected row."""
    marked_rows: tuple[Row, ...] = ()
    """The view's marked rows (its bulk verbs act on all of them)."""
    parent: str = ""
    """``remote/pool`` when the view shows the volumes of one pool."""
    # What it may use
    consoles: "ConsoleDock | None" = None
    details_changed: Callable[[], None] = lambda: None
    """Tell the details pane that what it shows of ``ref`` changed (snapshots, limits)."""
    open_view: OpenView = _no_view
    """Show another view (a pool's volumes, a remote's images)."""
    reload: Callable[[str | None], None] = lambda remote: None
    """Read the view's rows of a remote (None: of every remote) again now."""
    switch_project: Callable[[str, str], None] = lambda remote, project: None
    rows_of: Callable[[str], list[Row]] = lambda remote: []
    """The view's rows of one remote (to refuse a taken name as it is typed)."""

    def __post_init__(self) -> None:
        if self.remote is None:
            where = self.ref or self.row
            self.remote = where.remote if where is not None else None

    # What is acted on -----------------------------------------------------------------

    @property
    def backend(self) -> Backend:
        """The backend of ``remote``.

        Raises:
            BackendError: the remote is not connected.
        """
        backend = self.inventory.backends.get(self.remote or "")
        if backend is None:
            raise BackendError(f"Remote '{self.remote}' is not connected.")
        return backend

    def backend_of(self, remote: str) -> Backend:
        """The backend of ``remote`` (a view's row may be of any remote).

        Raises:
            BackendError: the remote is not connected.
        """
        backend = self.inventory.backends.get(remote)
        status = self.inventory.statuses.get(remote)
        if backend is None or status is None or status.state is not ConnectionState.CONNECTED:
            raise BackendError(f"Remote '{remote}' is not connected.")
        return backend

    @property
    def instance(self) -> Instance | None:
        return self.inventory.instances.get(self.ref) if self.ref else None

    @property
    def targets(self) -> list[Row]:
        """The view's marked rows, or else its selected one."""
        return list(self.marked_rows) or ([self.row] if self.row else [])

    def can(self, capability: Capability, remote: str | None = None) -> bool:
        """``remote`` (default: the one acted on) offers ``capability`` at all (read-only
        remotes offer less)."""
        return capability in self.inventory.remote_capabilities(remote or self.remote or "")

    # Talking to the user --------------------------------------------------------------

    def notify(self, message: str, *, title: str = "", severity: str = "information",
               timeout: float | None = None) -> None:
        """Tell the user ``message``, shown as plain text: names, daemon errors and guest
        output may hold ``[`` and must never be read as markup, nor control characters
        reach the terminal."""
        self.app.notify(printable(message, lines=True), title=printable(title),
                        severity=severity,  # type: ignore[arg-type]
                        timeout=timeout, markup=False)

    def fail(self, error: BackendError, what: str, *, timeout: float = 10) -> None:
        """Report a backend's refusal in words: ``what`` says what was being done (also
        written to the log file, with the remote)."""
        logging.getLogger("corral.flows").warning("%s (remote %s): %s: %s", what,
                                                  self.remote, error.title, error.message)
        self.notify(error.message, title=f"{what}: {error.title}", severity="error",
                    timeout=timeout)

    async def ask(self, screen: "Screen[T]") -> T | None:
        """Show a dialog and wait for its answer (flows run in workers)."""
        return await self.app.push_screen_wait(screen)

    def show(self, screen: "Screen[Any]") -> None:
        """Open a screen without waiting for it."""
        self.app.push_screen(screen)

    # Running work with progress --------------------------------------------------------

    async def on_row(self, label: str, make: Callable[[Callable[[str], None]], Awaitable[T]]
                     ) -> T | None:
        """Run ``make(progress)`` on the instance ``ref``, showing ``label`` and its
        progress on the instance's row; report a failure in words. Returns the result, or
        None after a failure."""
        ref = self.ref
        assert ref is not None
        inventory = self.inventory

        def progress(text: str) -> None:
            inventory.show_progress(ref, f"{label} {text}")

        try:
            return await inventory.track(ref, label, make(progress))
        except BackendError as e:
            self.fail(e, f"{label.rstrip('…').capitalize()} {ref}", timeout=12)
            return None

    async def on_remote(self, label: str,
                        make: Callable[[Callable[[str], None]], Awaitable[T]]) -> T | None:
        """Like :meth:`on_row` for work that belongs to the remote, not to one row: its
        progress goes to the activity line."""
        remote = self.remote or ""
        inventory = self.inventory

        def progress(text: str) -> None:
            inventory.show_activity(remote, f"{label} {text}")

        progress("")
        try:
            return await make(progress)
        except BackendError as e:
            self.fail(e, label.rstrip("…").capitalize(), timeout=12)
            return None
        finally:
            inventory.show_activity(remote, "")

    async def attempt(self, what: str, work: Awaitable[T]) -> T | bool | None:
        """Await ``work`` on a view's row; a refusal is told in words (None), the view read
        again. What the work returned, or True when it returned nothing."""
        try:
            result = await work
            return True if result is None else result
        except BackendError as e:
            self.fail(e, what, timeout=12)
            return None
        finally:
            self.reload(self.row.remote if self.row else None)
