"""Switching the main screen between the instance table and the resource views (``:``):
a :class:`ViewSwitcher` the screen holds and hands itself to, so that the screen itself
only composes and dispatches."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Callable

from textual.css.query import NoMatches
from textual.widgets import Input

from backends.models import InstanceRef

from ..actions import Action, Scope
from ..filter import FilterError, parse, why_empty
from ..format import external, markup_safe
from ..widgets.details import DetailsPane
from ..widgets.empty_state import EmptyState
from ..widgets.fast_table import FastTable
from ..widgets.footer import FittingFooter
from ..widgets.instance_table import InstanceTable
from .pane import ResourcePane
from .specs import BY_NAME, ViewSpec, offered

if TYPE_CHECKING:
    from ..screens.main import MainScreen

INSTANCES = "instances"
"""The view of the instance table."""


class ViewSwitcher:
    """The view the main screen shows (``instances`` or a resource view), the ``:``
    command's choices, and the filter box's text per view."""

    def __init__(self, screen: MainScreen) -> None:
        self.screen = screen
        self.name = INSTANCES
        """The view shown."""
        self._details_were_open = False
        self._filters: dict[str, str] = {}
        """The filter of each view left (its name: the text), given back when it is shown."""

    # The widgets it switches ------------------------------------------------------------

    @property
    def _box(self) -> Input:
        return self.screen.query_one("#filter", Input)

    @property
    def _pane(self) -> ResourcePane:
        return self.screen.query_one(ResourcePane)

    @property
    def _instances(self) -> InstanceTable:
        return self.screen.query_one(InstanceTable)

    # What ``:`` offers -----------------------------------------------------------------

    def offered(self) -> list[ViewSpec]:
        """The views ``:`` offers (those some remote can fill)."""
        return offered(self.screen.inventory)

    def palette_entries(self) -> list[tuple[str, str, Callable[[], None], bool]]:
        """The palette's entry of each view ``:`` offers ("Networks view (:networks)")."""
        return [(f"{spec.title} view (:{spec.name})",
                 f"Show the {spec.title.lower()} of every remote" if spec.name != INSTANCES
                 else "Back to the instance table", partial(self.show, spec.name), True)
                for spec in self.offered()]

    # Switching ---------------------------------------------------------------------------

    @property
    def in_resource_view(self) -> bool:
        return self.name != INSTANCES

    def show(self, name: str, parent: str = "", filter_text: str | None = None) -> None:
        """Show view ``name`` (``instances``: the instance table), with ``filter_text`` in
        the filter box (None: the filter it had when it was left)."""
        spec = BY_NAME[name]
        screen, box, pane = self.screen, self._box, self._pane
        self._filters[self.name] = box.value
        text = self._filters.get(name, "") if filter_text is None else filter_text
        self.name = name
        # the box says the filter of the view shown: set without a change message (which
        # would come after the switch), applied below
        with box.prevent(Input.Changed):
            box.value = text
        box.set_class(bool(text), "-visible")
        empty = screen.query_one(EmptyState)
        where = f" of {parent}" if parent else ""
        screen.sub_title = markup_safe(f"view: {spec.title.lower()}{where}")
        # display flags, not a class on the screen: a screen class restyles every widget
        # (~100 ms with a full table), a flag only lays out again
        instances = self._instances
        details = screen.query_one(DetailsPane)
        table: FastTable
        if name == INSTANCES:
            pane.display = False
            instances.styles.clear_rule("display")  # the stylesheet decides again
            empty.styles.clear_rule("display")
            if self._details_were_open:
                details.add_class("-visible")
            self.apply_filter()  # the instances' own filter, as it was left
            instances.focus()
            table = instances
        else:
            if instances.styles.get_rule("display") is None:  # coming from instances
                self._details_were_open = details.has_class("-visible")
                details.remove_class("-visible")
            instances.display = False
            empty.display = False  # it speaks of the instances
            pane.display = True
            self.filter_looks(None)
            pane.set_filter(text)
            pane.show(spec, parent)
            pane.table.focus()
            table = pane.table
        self._footer_after_paint(table)
        screen.refresh_bindings()

    def _footer_after_paint(self, table: FastTable) -> None:
        """The footer's keys change with the view: rebuilt once the view's table has
        painted, so that the switch shows the rows first."""
        try:
            footer = self.screen.query_one(FittingFooter)
        except NoMatches:
            return
        footer.hold()
        table.after_paint = [*table.after_paint, footer.release]

    def back(self) -> bool:
        """``esc`` in a resource view (nothing else to close): its marks cleared, or back
        to the instances (from a pool's volumes: to the pools). True when it did."""
        if not self.in_resource_view:
            return False
        pane = self._pane
        if pane.table.marked:
            pane.table.clear_marks()
        elif pane.spec is not None and pane.spec.name == "volumes" and pane.parent_key:
            self.show("storage")
        else:
            self.show(INSTANCES)
        return True

    def focus_table(self) -> None:
        """Focus the table of the view shown."""
        (self._pane.table if self.in_resource_view else self._instances).focus()

    # Which actions the view shown allows ------------------------------------------------

    def allows(self, entry: Action) -> bool:
        """Instance (and remote: new instance, import) verbs are not offered while a
        resource view is shown; ``:`` is typed as itself into any input."""
        if entry.name == "command" and isinstance(self.screen.focused, Input):
            return False
        return not (self.in_resource_view and entry.scope in (Scope.INSTANCE, Scope.SNAPSHOT,
                                                               Scope.REMOTE))

    def marks_allow(self, entry: Action) -> bool:
        """With instances marked, the bulk verbs (lifecycle) are offered whatever the
        selected row's state: they act on the marked ones (each row's refusal is
        reported)."""
        return bool(self._instances.marked) and not self.in_resource_view \
            and entry.scope is Scope.INSTANCE and entry.bulk

    def marks_note(self, entry: Action, marked: tuple[InstanceRef, ...],
                   ref: InstanceRef | None) -> None:
        """An instance verb that acts on one instance was run with instances marked: say
        that the marks are not used."""
        if marked and ref is not None and entry.scope is Scope.INSTANCE and not entry.bulk:
            self.screen.notify(f"{entry.label.rstrip('…')} acts on one instance at a time: "
                               f"on {ref} (the {len(marked)} marked are left as they are).",
                               markup=False)

    # The filter box ---------------------------------------------------------------------

    def instance_filter_text(self) -> str:
        """The instances' filter, whichever view is shown."""
        if self.in_resource_view:
            return self._filters.get(INSTANCES, "")
        return self._box.value

    def apply_filter(self) -> None:
        """Apply what the box says (now, not what a queued change said) to the view shown;
        the box's title names what cannot be understood or hides every instance."""
        screen = self.screen
        text = self._box.value
        if self.in_resource_view:
            self.filter_looks(None)
            self._pane.set_filter(text)
            return
        try:
            screen.terms = parse(text)
        except FilterError as e:
            self.filter_looks(str(e), invalid=True)
            return
        table = self._instances
        inventory = screen.inventory
        table.sync(inventory, screen.terms, None)
        self.filter_looks(why_empty(screen.terms, inventory.instances.values(),
                                    inventory.states)
                          if screen.terms and not table.row_count else None)
        screen.update_titles()

    def filter_looks(self, note: str | None, *, invalid: bool = False) -> None:
        box = self._box
        box.set_class(invalid, "-invalid")
        box.border_title = external(note) if note else None

    # Changes ------------------------------------------------------------------------------

    def marks_changed(self, refs: set[InstanceRef]) -> None:
        """Instance marks changed: repaint those rows and the title."""
        screen = self.screen
        self._instances.sync(screen.inventory, screen.terms, refs)
        screen.update_titles()
        screen.refresh_bindings()

    def inventory_changed(self, dirty: dict[str, set[InstanceRef] | None]) -> None:
        """Remotes changed: the resource views that follow them read again."""
        try:
            pane = self._pane
        except NoMatches:
            return
        connection = any(refs is None for refs in dirty.values())
        pane.inventory_changed(set(dirty), connection)
