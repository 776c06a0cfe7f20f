"""An option list whose chosen option reads so without colour: ``▸`` before it, two
spaces before the others (a terminal without colours, a screen reader, a screenshot in
black and white still tell which one the list is on)."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.widgets import OptionList
from textual.visual import VisualType
from textual.widgets.option_list import Option

from ..format import external, external_text

MARK, UNMARKED = "▸ ", "  "


class MarkedOptionList(OptionList):
    """:class:`OptionList` with the highlighted option marked by ``▸`` as well."""

    def __init__(self, *content, **options) -> None:  # OptionList's
        self._plain: dict[Option, VisualType] = {}
        """Each option's prompt as given (before its mark)."""
        super().__init__(*content, **options)

    def clear_options(self):  # Self
        self._plain.clear()
        return super().clear_options()

    def set_options(self, options: Iterable):  # Self
        self._plain.clear()
        return super().set_options(options)

    def add_options(self, new_options: Iterable):  # Self
        super().add_options(new_options)
        self._mark()
        return self

    def on_mount(self) -> None:
        self._mark()

    def watch_highlighted(self, highlighted: int | None) -> None:
        super().watch_highlighted(highlighted)
        self._mark()

    def _mark(self) -> None:
        for index, option in enumerate(self.options):
            plain = self._plain.setdefault(option, option.prompt)
            mark = MARK if index == self.highlighted else UNMARKED
            prompt = external(mark + plain) if isinstance(plain, str) else \
                external_text(Text.assemble(mark, plain)) if isinstance(plain, Text) else plain
            if prompt != option.prompt:
                self.replace_option_prompt_at_index(index, prompt)
