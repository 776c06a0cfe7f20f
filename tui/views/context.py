"""What a resource view's verb acts on: the view, the selected row, the marked rows, and
the services it may use (the same shape as :class:`tui.flows.context.Context`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from backends.base import Backend
from backends.errors import BackendError
from backends.models import Capability, ConnectionState

from ..format import printable
from ..services.inventory import Inventory
from .rows import Row
from .specs import ViewSpec

if TYPE_CHECKING:
    from textual.app import App
    from textual.screen import Screen

T = TypeVar("T")


@dataclass
class ViewContext:
    app: App
    inventory: Inventory
    spec: ViewSpec
    row: Row | None = None
    parent: str = ""
    """``remote/pool`` when the volumes of one pool are shown."""
    marked: list[Row] = field(default_factory=list)
    open_view: Callable[[str, str], None] = lambda name, parent: None
    """Switch to another view (``volumes`` of a pool)."""
    reload: Callable[[str | None], None] = lambda remote: None
    """Read a remote's rows (None: every remote's) again now."""
    switch_project: Callable[[str, str], None] = lambda remote, project: None
    rows_of: Callable[[str], list[Row]] = lambda remote: []
    """The rows of this view on one remote (to refuse a taken name as it is typed)."""

    @property
    def targets(self) -> list[Row]:
        """The marked rows, or else the selected one."""
        return list(self.marked) or ([self.row] if self.row else [])

    def backend(self, remote: str) -> Backend:
        backend = self.inventory.backends.get(remote)
        status = self.inventory.statuses.get(remote)
        if backend is None or status is None or status.state is not ConnectionState.CONNECTED:
            raise BackendError(f"Remote '{remote}' is not connected.")
        return backend

    def can(self, remote: str, capability: Capability) -> bool:
        return capability in self.inventory.remote_capabilities(remote)

    def notify(self, message: str, *, title: str = "", severity: str = "information",
               timeout: float | None = None) -> None:
        self.app.notify(printable(message, lines=True), title=printable(title),
                        severity=severity, timeout=timeout,  # type: ignore[arg-type]
                        markup=False)

    def fail(self, error: BackendError, what: str) -> None:
        self.notify(error.message, title=f"{what}: {error.title}", severity="error",
                    timeout=12)

    async def ask(self, screen: Screen[T]) -> T | None:
        return await self.app.push_screen_wait(screen)

    async def attempt(self, what: str, work: Awaitable[T]) -> T | bool | None:
        """Await ``work``; a refusal is told in words (None), the view read again. What
        the work returned, or True when it returned nothing."""
        try:
            result = await work
            return True if result is None else result
        except BackendError as e:
            self.fail(e, what)
            return None
        finally:
            self.reload(self.row.remote if self.row else None)
