"""What the main screen needs to switch between the instance table and the resource views
(``:``), kept here so that the screen itself only composes and dispatches."""

from __future__ import annotations

from functools import partial

from textual.css.query import NoMatches
from textual.widgets import Input

from ..actions import Action, Scope
from ..filter import FilterError, parse, why_empty
from ..format import external, markup_safe
from ..widgets.footer import FittingFooter
from .command import CommandLine
from .pane import ResourcePane
from .specs import BY_NAME, ViewSpec, offered


BULK_INSTANCE_VERBS = ("start", "stop", "restart", "pause", "freeze", "unfreeze", "delete")
"""The instance verbs that act on every marked instance (``tui/flows/lifecycle.py``)."""


class ViewSwitching:
    """Mixed into :class:`~tui.screens.main.MainScreen`: the ``:`` command and the view
    shown (``instances`` or a resource view)."""

    view_name: str = "instances"
    _details_were_open: bool = False
    _filters: dict[str, str] | None = None
    """The filter of each view left (its name: the text), given back when it is shown."""

    def offered_views(self) -> list[ViewSpec]:
        return offered(self.inventory)  # type: ignore[attr-defined]

    def view_palette_entries(self) -> list[tuple[str, str, object, bool]]:
        """The palette's entry of each view ``:`` offers ("Networks view (:networks)")."""
        return [(f"{spec.title} view (:{spec.name})",
                 f"Show the {spec.title.lower()} of every remote" if spec.name != "instances"
                 else "Back to the instance table", partial(self.show_view, spec.name), True)
                for spec in self.offered_views()]

    def action_command(self) -> None:
        self.query_one(CommandLine).open()  # type: ignore[attr-defined]

    def on_command_line_chosen(self, event: CommandLine.Chosen) -> None:
        self.show_view(event.spec.name)

    def on_resource_pane_open_view(self, event: ResourcePane.OpenView) -> None:
        self.show_view(event.name, event.parent)

    def show_view(self, name: str, parent: str = "") -> None:
        """Show view ``name`` (``instances``: the instance table)."""
        spec = BY_NAME[name]
        box = self.query_one("#filter", Input)  # type: ignore[attr-defined]
        filters = self._filters = self._filters if self._filters is not None else {}
        filters[self.view_name] = box.value
        text = filters.get(name, "")
        self.view_name = name
        pane = self.query_one(ResourcePane)  # type: ignore[attr-defined]
        # the box says the filter of the view shown: set without a change message (which
        # would come after the switch), applied below
        with box.prevent(Input.Changed):
            box.value = text
        box.set_class(bool(text), "-visible")
        empty = self.query_one("#empty")  # type: ignore[attr-defined]
        where = f" of {parent}" if parent else ""
        self.sub_title = markup_safe(  # type: ignore[attr-defined]
            f"view: {spec.title.lower()}{where}")
        # display flags, not a class on the screen: a screen class restyles every widget
        # (~100 ms with a full table), a flag only lays out again
        instances = self.query_one("#instances")  # type: ignore[attr-defined]
        details = self.query_one("#details")  # type: ignore[attr-defined]
        if name == "instances":
            pane.display = False
            instances.styles.clear_rule("display")  # the stylesheet decides again
            empty.styles.clear_rule("display")
            if self._details_were_open:
                details.add_class("-visible")
            self.apply_filter()  # the instances' own filter, as it was left
            instances.focus()
        else:
            if instances.styles.get_rule("display") is None:  # coming from instances
                self._details_were_open = details.has_class("-visible")
                details.remove_class("-visible")
            instances.display = False
            empty.display = False  # it speaks of the instances
            pane.display = True
            self._filter_looks(None)
            pane.set_filter(text)
            pane.show(spec, parent)
            pane.table.focus()
        self._footer_after_paint(pane.table if name != "instances" else instances)
        self.refresh_bindings()  # type: ignore[attr-defined]

    def _footer_after_paint(self, table) -> None:
        """The footer's keys change with the view: rebuilt once the view's table has
        painted, so that the switch shows the rows first."""
        try:
            footer = self.query_one(FittingFooter)  # type: ignore[attr-defined]
        except NoMatches:
            return
        footer.hold()
        table.after_paint = [*table.after_paint, footer.release]

    @property
    def in_resource_view(self) -> bool:
        return self.view_name != "instances"

    def view_allows(self, entry: Action) -> bool:
        """Instance (and remote: new instance, import) verbs are not offered while a
        resource view is shown; ``:`` is typed as itself into any input."""
        if entry.name == "command" and isinstance(self.focused, Input):  # type: ignore
            return False
        return not (self.in_resource_view and entry.scope in (Scope.INSTANCE, Scope.SNAPSHOT,
                                                               Scope.REMOTE))

    def marks_allow(self, entry: Action) -> bool:
        """With instances marked, the lifecycle verbs are offered whatever the selected
        row's state: they act on the marked ones (each row's refusal is reported)."""
        marked = self.query_one("#instances").marked  # type: ignore[attr-defined]
        return bool(marked) and not self.in_resource_view and \
            entry.one_at_a_time == "lifecycle" and entry.scope is Scope.INSTANCE \
            and entry.name in BULK_INSTANCE_VERBS

    def marks_note(self, entry: Action, marked: tuple, ref) -> None:
        """An instance verb that acts on one instance was run with instances marked: say
        that the marks are not used."""
        if marked and ref is not None and entry.scope is Scope.INSTANCE \
                and entry.name not in BULK_INSTANCE_VERBS:
            self.notify(f"{entry.label.rstrip('…')} acts on one instance at a time: on "  # type: ignore
                        f"{ref} (the {len(marked)} marked are left as they are).",
                        markup=False)

    def instance_filter_text(self) -> str:
        """The instances' filter, whichever view is shown."""
        if self.in_resource_view:
            return (self._filters or {}).get("instances", "")
        return self.query_one("#filter", Input).value  # type: ignore[attr-defined]

    def apply_filter(self) -> None:
        """Apply what the box says (now, not what a queued change said) to the view shown;
        the box's title names what cannot be understood or hides every instance."""
        text = self.query_one("#filter", Input).value  # type: ignore[attr-defined]
        if self.in_resource_view:
            self._filter_looks(None)
            self.query_one(ResourcePane).set_filter(text)  # type: ignore[attr-defined]
            return
        try:
            self.terms = parse(text)
        except FilterError as e:
            self._filter_looks(str(e), invalid=True)
            return
        table = self.query_one("#instances")  # type: ignore[attr-defined]
        table.sync(self.inventory, self.terms, None)  # type: ignore[attr-defined]
        inventory = self.inventory  # type: ignore[attr-defined]
        self._filter_looks(why_empty(self.terms, inventory.instances.values(),
                                     inventory.states) if self.terms and not table.row_count
                           else None)
        self._update_titles()  # type: ignore[attr-defined]

    def _filter_looks(self, note: str | None, *, invalid: bool = False) -> None:
        box = self.query_one("#filter", Input)  # type: ignore[attr-defined]
        box.set_class(invalid, "-invalid")
        box.border_title = external(note) if note else None

    def view_back(self) -> bool:
        """``esc`` in a resource view (nothing else to close): back to the instances, or
        from a pool's volumes to the pools. True when it did."""
        if not self.in_resource_view:
            return False
        pane = self.query_one(ResourcePane)  # type: ignore[attr-defined]
        if pane.table.marked:
            pane.table.clear_marks()
        elif pane.spec is not None and pane.spec.name == "volumes" and pane.parent_key:
            self.show_view("storage")
        else:
            self.show_view("instances")
        return True

    def marks_changed(self, refs: set) -> None:
        """Instance marks changed: repaint those rows and the title."""
        self.query_one("#instances").sync(self.inventory, self.terms, refs)  # type: ignore
        self._update_titles()  # type: ignore[attr-defined]
        self.refresh_bindings()  # type: ignore[attr-defined]

    def view_inventory_changed(self, dirty: dict) -> None:
        try:
            pane = self.query_one(ResourcePane)  # type: ignore[attr-defined]
        except NoMatches:
            return
        connection = any(refs is None for refs in dirty.values())
        pane.inventory_changed(set(dirty), connection)
