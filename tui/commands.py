"""Command palette (``ctrl+p``): instance actions such as "Stop lab2:r1"."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

from backends.models import Capability

if TYPE_CHECKING:
    from .screens.main import MainScreen

VERBS: tuple[tuple[str, Capability, str], ...] = (
    ("Start", Capability.START, "start"),
    ("Stop", Capability.STOP, "stop"),
    ("Restart", Capability.RESTART, "restart"),
    ("Pause", Capability.FREEZE, "freeze"),
    ("Resume", Capability.UNFREEZE, "unfreeze"),
    ("Delete", Capability.DELETE, "delete"),
)
"""(palette label, capability needed, backend verb): the one table of instance verbs."""

VERB_CAPABILITY = {verb: cap for _, cap, verb in VERBS}


class InstanceCommands(Provider):
    """One command per instance and action it allows right now."""

    def _commands(self) -> list[tuple[str, str, object]]:
        from .screens.main import MainScreen

        screen = None
        for s in self.app.screen_stack:
            if isinstance(s, MainScreen):
                screen = s
        if screen is None:
            return []
        main: MainScreen = screen
        out = []
        inv = main.inventory
        for ref in sorted(inv.instances):
            caps = inv.capabilities(ref)
            for label, cap, verb in VERBS:
                if cap in caps:
                    out.append((f"{label} {ref}", f"{label.lower()} the instance {ref.name} on "
                                f"remote {ref.remote}", partial(main.run_verb, ref, verb)))
            if inv.statuses[ref.remote].state.value == "connected":
                out.append((f"Actions for {ref}…", "backup, clone, copy/move, publish, "
                            "password, NICs, rename, description",
                            partial(main.open_actions, ref)))
        for name, backend in inv.backends.items():
            if inv.statuses[name].state.value != "connected":
                continue
            if hasattr(backend, "import_instance") and not inv.remotes[name].read_only:
                out.append((f"Import a backup onto {name}…",
                            "create an instance from a backup file",
                            partial(main.run_remote_action, name, "import")))
            if hasattr(backend, "list_images"):
                out.append((f"Images of {name}", "list and delete images",
                            partial(main.run_remote_action, name, "images")))
        out.append(("Operations", "running and recent operations of every remote",
                    main.action_operations))
        out.append(("New instance…", "the launch wizard", main.action_new_instance))
        return out

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, help_text, callback in self._commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), callback, text=text, help=help_text)

    async def discover(self) -> Hits:
        for text, help_text, callback in self._commands()[:40]:
            yield DiscoveryHit(text, callback, text=text, help=help_text)
