"""What the action table (:mod:`tui.actions`) offers now: ``check_action``'s answer for an
instance action and for a view's verb, why a greyed one cannot be done, the actions menu
(``a``) and the command palette's entries."""

from __future__ import annotations

from functools import partial
from typing import Callable

from backends.models import Capability, ConnectionState, InstanceRef

from .actions import ACTIONS, BY_VIEW, Action, Scope, Verb, offered
from .flows.context import Context
from .services.inventory import Inventory


def menu_actions(ctx: Context) -> list[Action]:
    """The actions menu (``a``) of ``ctx.ref``: what its remote offers."""
    caps = ctx.inventory.remote_capabilities(ctx.remote or "")
    return [a for a in ACTIONS if a.menu and offered(a, caps)
            and (a.available is None or a.available(ctx))]


ALSO_CALLED = {
    "new": "launch, create", Verb.DELETE: "remove", "limits": "resources, CPU, memory",
    "console": "attach", "shell": "exec", "pause": "freeze, suspend",
    "command": "profiles, networks, storage, volumes, projects, images, remotes",
}
"""Other words for an action, in its palette entry (a newcomer types "launch")."""


def palette_entries(inventory: Inventory, run: Callable[..., None],
                    open_menu: Callable[[InstanceRef], None],
                    screen_action: Callable[[str], Callable[[], None]]
                    ) -> list[tuple[str, str, Callable[[], None], bool]]:
    """(text, help, callback, first) of every palette entry the action table allows now.

    First (``first`` True) every action by its name, as its key does it (on the selected
    instance, the selected remote): each action some remote offers, with its key and its
    other words (:data:`ALSO_CALLED`); then the instance verbs each instance allows and the
    remote actions each remote offers, by name ("Stop lab2:r1"). ``run(action, ref=,
    remote=)`` runs a flow; ``open_menu(ref)`` opens the actions menu;
    ``screen_action(name)`` is the screen's ``action_<name>``."""
    out: list[tuple[str, str, Callable[[], None], bool]] = []
    caps_anywhere: set[Capability] = set()
    for name in inventory.backends:
        caps_anywhere |= inventory.declared_capabilities(name)
    for a in ACTIONS:
        if a.scope not in (Scope.INSTANCE, Scope.REMOTE, Scope.VIEW) or \
                not offered(a, frozenset(caps_anywhere)):
            continue
        text = a.palette if a.palette and "{" not in a.palette else a.label
        also = ALSO_CALLED.get(a.name)
        key = a.key.split(",")[0]
        out.append((f"{text} ({also})" if also else text,
                    a.help + (f" · key {key}" if key else ""),
                    screen_action(a.action), True))
    out.append(("Help: every key", "Every key and what it does, by section · key ?",
                screen_action("help"), True))
    for ref in sorted(inventory.instances):
        caps = inventory.capabilities(ref)
        if inventory.statuses[ref.remote].state is not ConnectionState.CONNECTED:
            continue
        for a in ACTIONS:
            if a.scope is not Scope.INSTANCE or not a.palette or not offered(a, caps):
                continue
            callback = partial(open_menu, ref) if a.flow is None else partial(run, a, ref=ref)
            out.append((a.palette.format(ref=ref), f"{a.help}: {ref.name} on remote "
                        f"{ref.remote}", callback, False))
    for name in sorted(inventory.backends):
        caps = inventory.remote_capabilities(name)
        for a in ACTIONS:
            if a.scope is Scope.REMOTE and "{remote}" in a.palette and offered(a, caps):
                out.append((a.palette.format(remote=name), a.help,
                            partial(run, a, remote=name), False))
    return out


def availability(action: Action, inventory: Inventory, ref: InstanceRef | None, *,
                 consoles_open: bool) -> bool | None:
    """What ``check_action`` answers for ``action`` with ``ref`` selected: True (offered),
    False (hidden: the backend cannot) or None (greyed: not in this state)."""
    if action.scope in (Scope.VIEW, Scope.REMOTE):
        return True
    if action.scope is Scope.CONSOLE:
        return True if consoles_open else None
    if not action.needs:
        return True
    if ref is None:
        return None
    if ref.remote in inventory.backends and not offered(
            action, inventory.declared_capabilities(ref.remote, narrowed=False)):
        return False  # (a read-only remote's: greyed below, not hidden)
    if action.scope is Scope.SNAPSHOT:
        return True
    return True if offered(action, inventory.capabilities(ref)) else None


def why_not(inventory: Inventory, ref: InstanceRef) -> str:
    """Why the instance's greyed actions are not possible now, in words."""
    inst = inventory.instances.get(ref)
    status = inventory.statuses[ref.remote]
    if status.remote.read_only:
        return f"remote {ref.remote} is read-only"
    if status.state is not ConnectionState.CONNECTED:
        return f"remote {ref.remote} is {status.state.value}"
    if ref in inventory.pending:
        return f"it is {inventory.pending[ref]}"
    return f"it is {inst.status.value}" if inst else "it is gone"


def row_allowed(view: str, method: str, caps: frozenset[Capability], *, has_row: bool,
                read_only: bool) -> bool | None:
    """What the views' pane's ``check_action`` answers for the verb ``method`` in
    ``view``: True (offered), False (not in this view, or the remote cannot), None (greyed:
    no row, or a read-only row)."""
    entry = BY_VIEW.get((view, method))
    if entry is None or not offered(entry, caps):
        return False
    if entry.row and not has_row:
        return None
    if entry.writable and read_only:
        return None
    return True
