"""The footer: rebuilt only when the keys it shows change, and never cutting a key label:
when the keys do not fit beside the palette key, the least useful ones are left out whole
(sorting first; help, filter, new and quit last)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer

from .._textual_compat import (
    FooterKey,  # the key widgets Footer composes
    footer_bindings_ready,
    is_data_bound,
    set_footer_bindings_ready,
    set_footer_key_enabled,
)


class QuietFooter(Footer):
    """Textual's footer rebuilds all its keys (a dozen widgets, each styled twice) on every
    bindings update: focus moves, the cursor moving to a row that allows the same verbs,
    the screen coming back. Most of those change nothing shown; here they cost nothing, and
    the changes of one frame are one rebuild."""

    _shown: tuple | None = None
    _recompose_pending = False

    def bindings_changed(self, screen: Screen) -> None:
        if self.is_attached and screen is self.screen and screen.app.app_focus:
            shown = tuple(
                ((binding.key, binding.key_display, binding.description, binding.action,
                  binding.group), enabled, tooltip)
                for (_, binding, enabled, tooltip) in screen.active_bindings.values()
                if binding.show
            )
            if shown == self._shown and footer_bindings_ready(self):
                return
            if self._shown is not None and footer_bindings_ready(self) \
                    and not self._recompose_pending and not self._held \
                    and [k for k, _, _ in shown] == [k for k, _, _ in self._shown]:
                # the same keys, only some enabled or disabled (a remote connected, the
                # cursor moved to a row that allows other verbs): restyle those in place
                self._shown = shown
                self._enable(shown)
                return
            self._shown = shown
            if self._recompose_pending:
                # one rebuild is asked for already: it reads the keys as they are then
                # (switching views changes them in steps within one frame)
                return
            self._recompose_pending = True
            if self._held:
                return  # rebuilt once the table shown by a switch has painted (release)
        super().bindings_changed(screen)

    def _enable(self, shown: tuple) -> None:
        """Each key's enabled state and tooltip as Textual's compose would make them (the
        first binding of each action gives its key)."""
        first: dict[str, tuple[bool, str, str]] = {}
        for (_, _, description, action, _), enabled, tooltip in shown:
            first.setdefault(action, (enabled, tooltip, description))
        for key in self.query(FooterKey):
            if key.has_class("-command-palette") or key.action not in first:
                continue
            enabled, tooltip, description = first[key.action]
            if key.has_class("-disabled") == enabled:
                set_footer_key_enabled(key, enabled)
            key.tooltip = tooltip or (description if key.has_class("-grouped") else None)

    _held = False

    def hold(self, timeout: float = 0.3) -> None:
        """Rebuild the keys only after :meth:`release` (the table a view switch shows has
        painted: the keys' dozen widgets would delay that first frame), or ``timeout``."""
        self._held = True
        self.set_timer(timeout, self.release)

    def release(self) -> None:
        if not self._held:
            return
        self._held = False
        if self._recompose_pending and self.is_attached:
            set_footer_bindings_ready(self)
            self.call_later(self.recompose)  # in the footer's own queue (its context)

    async def recompose(self) -> None:
        self._recompose_pending = False
        await super().recompose()

    def compose(self) -> ComposeResult:
        # Each key is made compact (its default) and then bound to this footer's
        # ``compact`` (False): two class changes and two restylings per key, ~20 ms for a
        # footer's keys at start here. Made with this footer's value, none happen. (The
        # palette's key is not bound: it stays compact.)
        for widget in super().compose():
            if isinstance(widget, FooterKey) and is_data_bound(widget, "compact"):
                widget.set_reactive(FooterKey.compact, self.compact)
            yield widget


DROP_FIRST = (
    "sort_back", "cycle_sort", "edit_yaml", "edit_profiles", "edit_limits", "new_snapshot",
    "pause_instance", "restart_instance", "open_shell", "instance_actions", "open_console",
    "mark_visible", "mark", "start_instance", "delete_instance", "stop_instance",
)
"""Actions whose keys give way first, in that order; any other key (the keys of other
screens, marks, views) goes only after these, from the right."""

KEEP_LAST = ("new_instance", "filter", "help", "quit")
"""What a newcomer needs first: these keys give way last of all (``quit`` the very last),
so that any width that can show them does."""


class FittingFooter(QuietFooter):
    """The footer corral shows: rebuilt only when its keys change, and hiding whole keys
    instead of cutting the last one."""

    def on_mount(self) -> None:
        super().on_mount()
        self.fit()
        self.call_after_refresh(self.fit)

    def on_resize(self) -> None:
        self.call_after_refresh(self.fit)

    async def recompose(self) -> None:
        await super().recompose()
        # Fitted before the keys are laid out (from their texts), so the frame that shows
        # them is laid out once: fitted only after it, the keys hidden then laid out the
        # whole screen again (~60 ms with 700 rows here, as remotes were connecting).
        self.fit()
        self.call_after_refresh(self.fit)

    def fit(self) -> None:
        """Show as many keys as fit, leaving out the least useful ones whole."""
        keys = [k for k in self.query(FooterKey) if not k.has_class("-command-palette")]
        if not keys:
            return
        palette = sum(self._width(k) for k in self.query(FooterKey)
                      if k.has_class("-command-palette"))
        # Not laid out yet: as wide as the screen (the footer is docked across it).
        room = (self.size.width or self.app.size.width) - palette
        widths = {k: self._width(k) for k in keys}

        def rank(item: tuple[int, FooterKey]) -> tuple[int, int]:
            index, key = item
            action = key.action.removeprefix("screen.")  # a widget's key for the screen's
            if action in DROP_FIRST:
                return (0, DROP_FIRST.index(action))
            if action in KEEP_LAST:
                return (2, KEEP_LAST.index(action))
            return (1, -index)

        shown = set(keys)
        for _, key in sorted(enumerate(keys), key=rank):
            if sum(widths[k] for k in shown) <= room:
                break
            shown.discard(key)
        for key in keys:
            if key.display != (key in shown):
                key.display = key in shown

    @staticmethod
    def _width(key: FooterKey) -> int:
        """The cells ``key`` takes with its margins (measured when shown, else computed)."""
        if key.display and key.outer_size.width:
            return key.outer_size.width
        margin = key.styles.margin
        return key.get_content_width(key.container_size, key.app.size) + \
            key.styles.padding.width + margin.left + margin.right
