"""The ``:`` command line: type a view's name or alias (completed as typed, ``tab`` or
``→`` takes the completion), ``enter`` switches the main table to it, ``esc`` closes."""

from __future__ import annotations

from typing import Callable, ClassVar, Iterable

from textual import on
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.suggester import Suggester
from textual.widgets import Input

from .._textual_compat import input_suggestion
from ..flows import held
from ..format import external
from ..widgets.plain import PlainInput
from .specs import ViewSpec, resolve


class ViewSuggester(Suggester):
    """Completes view names (and aliases, to their view's name)."""

    def __init__(self, names: Callable[[], Iterable[ViewSpec]]) -> None:
        super().__init__(use_cache=False, case_sensitive=False)
        self.names = names

    async def get_suggestion(self, value: str) -> str | None:
        word = value.lstrip(":").lower()
        if not word:
            return None
        for spec in self.names():
            if spec.name.startswith(word):
                return spec.name
        for spec in self.names():
            if any(a.startswith(word) for a in spec.aliases):
                return spec.name
        return None


class CommandLine(PlainInput):
    """Hidden until ``:``; tells the screen which view was chosen."""

    SCOPED_CSS = False
    DEFAULT_CSS = """
    CommandLine { display: none; height: 3; border: round $accent; }
    CommandLine.-visible { display: block; }
    CommandLine.-invalid { border: round $error; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", show=False),
        Binding("tab", "complete", "Complete", show=False)]

    class Chosen(Message):
        def __init__(self, spec: ViewSpec) -> None:
            super().__init__()
            self.spec = spec

    def __init__(self, offered: Callable[[], Iterable[ViewSpec]], *,
                 id: str | None = None) -> None:
        super().__init__(placeholder="view: instances profiles networks storage projects "
                                     "images operations remotes", id=id,
                         suggester=ViewSuggester(offered))
        self.offered = offered

    def open(self) -> None:
        self.value = ""
        self.border_title = "Switch view (tab completes, enter shows, esc closes)"
        self.remove_class("-invalid")
        self.add_class("-visible")
        # at once, not later: keys typed right after ':' must land here, not on the table
        self.screen.set_focus(self)

    def action_close(self) -> None:
        self.remove_class("-visible")
        self.value = ""
        self.screen.focus_next()

    def action_complete(self) -> None:
        suggestion = input_suggestion(self)
        if suggestion:
            self.value = suggestion
            self.cursor_position = len(self.value)

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        spec = resolve(input_suggestion(self) or event.value) or resolve(event.value)
        if spec is not None and spec.name not in self._offered() \
                and held.remotes_connecting(self.app):
            self._when_connected(spec, event.value)  # (a view of a remote not up yet)
            return
        self._choose(spec, event.value)

    def _offered(self) -> set[str]:
        return {s.name for s in self.offered()}

    def _choose(self, spec: ViewSpec | None, typed: str) -> None:
        """Show ``spec``'s view, or say that there is no such view here."""
        offered = self._offered()
        if spec is None or spec.name not in offered:
            self.add_class("-invalid")
            names = ", ".join(sorted(offered))
            self.border_title = external(f"No view '{typed.strip()}' here; views: {names}")
            return
        self.remove_class("-invalid")
        self.remove_class("-visible")
        self.value = ""
        self.post_message(self.Chosen(spec))

    def _when_connected(self, spec: ViewSpec, typed: str) -> None:
        """A view that the remotes still connecting may offer (``:profiles`` typed the
        moment corral starts): shown once they are up, the keys typed after ``enter``
        held for it meanwhile (tui/keyboard.py); else said as any unknown view is."""
        self.border_title = external(f"{spec.name}: waiting for the remotes to connect…")

        async def later() -> None:
            await held.remotes_settled(self.app)
            self._choose(spec, typed)

        worker = self.run_worker(later(), group="command-line", exclusive=True,
                                 exit_on_error=False, description=f"View {spec.name}")
        keys = getattr(self.app, "keys", None)
        if keys is not None:
            keys.hold(worker, f"View {spec.name}")
