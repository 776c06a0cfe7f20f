"""The action table: every action corral offers, declared once.

The key bindings, ``check_action`` (hidden where the backend cannot, greyed with the reason
where the state forbids), the command palette, the actions menu (``a``) and the help screen
are all generated from :data:`ACTIONS`. Adding an action = one entry here + one flow
function in ``tui/flows/``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import partial
from importlib import import_module
from typing import Awaitable, Callable

from textual.binding import Binding

from backends.models import Capability, ConnectionState, InstanceRef

from .flows.context import Context
from .services.inventory import Inventory

Flow = Callable[[Context], Awaitable[None]]


@dataclass(frozen=True)
class _Lazy:
    """A function of a module of ``tui/flows/``, imported when it is first called: the
    flows (dialogs, wizards, file browsers…) are not needed to paint the first screen."""

    module: str
    name: str

    def __call__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return getattr(import_module(f"{__package__}.flows.{self.module}"), self.name)(
            *args, **kwargs)


class _FlowModule:
    def __init__(self, module: str) -> None:
        self._module = module

    def __getattr__(self, name: str) -> _Lazy:
        return _Lazy(self._module, name)


(cluster, consoles, convert_vm, create, files, guest, images, lifecycle, limits, objects,
 remotes, snapshots, transfer) = map(_FlowModule, (
    "cluster", "consoles", "convert_vm", "create", "files", "guest", "images", "lifecycle",
    "limits", "objects", "remotes", "snapshots", "transfer"))


class Scope(str, enum.Enum):
    """What an action acts on."""

    INSTANCE = "instance"
    """The selected instance (greyed without one)."""
    REMOTE = "remote"
    """A remote (the selected instance's, or the one chosen in the palette)."""
    SNAPSHOT = "snapshot"
    """The snapshot selected in the snapshots tab (keys of that table)."""
    CONSOLE = "console"
    """The console tabs (greyed while none is open)."""
    VIEW = "view"
    """The screen itself: filter, details, focus, help."""


@dataclass(frozen=True)
class Action:
    """One thing the user can do."""

    name: str
    """Unique short name; the id of its entry in the actions menu."""
    label: str
    """Footer text (and the palette's verb)."""
    help: str
    """One line: the tooltip, the help screen's and the menu's explanation."""
    scope: Scope
    key: str = ""
    """Default key(s), comma-separated; empty: no key (menu/palette only)."""
    binding_id: str = ""
    """Stable id users rebind in ``[keymap]``."""
    method: str = ""
    """Textual action name (``stop_instance``); default: ``name``."""
    needs: tuple[Capability, ...] = ()
    """Capabilities of which at least one must be offered (empty: always)."""
    flow: Flow | None = None
    """The coroutine that does it; None: a screen method ``action_<method>`` does."""
    show: bool = True
    """Shown in the footer."""
    menu: bool = False
    """Offered in the actions menu (``a``)."""
    palette: str = ""
    """Palette entry, with ``{ref}`` or ``{remote}`` filled in; empty: not in it."""
    available: Callable[[Context], bool] | None = None
    """A further condition beyond the capabilities (e.g. another remote to copy to)."""
    one_at_a_time: str = ""
    """Actions sharing this name run one at a time per target: a new one replaces the one
    in flight (lifecycle verbs of one instance; one console of a kind per instance).
    Empty: runs beside anything else."""

    @property
    def action(self) -> str:
        return self.method or self.name

    priority: bool = False
    """Handled before the focused widget sees the key."""
    background: bool = False
    """The flow works in the background (a lifecycle verb): the keys typed after it are
    not held for it. Every other flow opens something (a dialog, a wizard, a console),
    and the keys typed after its key wait for it and go there (tui/keyboard.py)."""

    def binding(self, prefix: str = "") -> Binding:
        return Binding(self.key, prefix + self.action, self.label, show=self.show,
                       id=self.binding_id or None, tooltip=self.help, priority=self.priority)


I, R, S, C, V = Scope.INSTANCE, Scope.REMOTE, Scope.SNAPSHOT, Scope.CONSOLE, Scope.VIEW
Cap = Capability

ACTIONS: tuple[Action, ...] = (
    # Lifecycle
    Action("start", "Start", "Start the selected instance", I, "S", "instance.start",
           "start_instance", (Cap.START,), lifecycle.start, palette="Start {ref}",
           one_at_a_time="lifecycle", background=True),
    Action("stop", "Stop", "Stop the selected instance (force is offered if it hangs)", I, "s",
           "instance.stop", "stop_instance", (Cap.STOP,), lifecycle.stop,
           palette="Stop {ref}", one_at_a_time="lifecycle", background=True),
    Action("restart", "Restart", "Restart the selected instance", I, "r", "instance.restart",
           "restart_instance", (Cap.RESTART,), lifecycle.restart, palette="Restart {ref}",
           one_at_a_time="lifecycle", background=True),
    Action("pause", "Pause/Resume", "Pause (freeze) or resume the selected instance", I, "p",
           "instance.pause", "pause_instance", (Cap.FREEZE, Cap.UNFREEZE), lifecycle.pause,
           one_at_a_time="lifecycle", background=True),
    Action("freeze", "Pause", "Pause (freeze) the instance", I, needs=(Cap.FREEZE,),
           flow=lifecycle.freeze, show=False, palette="Pause {ref}", one_at_a_time="lifecycle",
           background=True),
    Action("unfreeze", "Resume", "Resume the paused instance", I, needs=(Cap.UNFREEZE,),
           flow=lifecycle.unfreeze, show=False, palette="Resume {ref}", one_at_a_time="lifecycle",
           background=True),
    Action("delete", "Delete", "Delete the selected instance (asks first)", I, "d",
           "instance.delete", "delete_instance", (Cap.DELETE,), lifecycle.delete,
           palette="Delete {ref}", one_at_a_time="lifecycle"),
    # Views
    Action("details", "Details", "Show or hide the details of the selected instance", V, "enter", "view.details",
           "toggle_details"),
    Action("filter", "Filter", "Filter: words, !negation, key=value (status, type, remote, ...)", V, "slash",
           "view.filter"),
    Action("clear", "Clear", "Close details / clear the filter", V, "escape",
           "view.clear", show=False),
    Action("command", "Views", "Switch the table: :profiles :networks :storage :projects "
           ":images :operations :remotes (:instances or esc back)", V, "colon",
           "view.command", "command"),
    Action("retry", "Reconnect", "Reconnect the selected remote now", V, "R", "remote.retry",
           "retry_remote", show=False),
    Action("refresh", "Refresh", "List every connected remote again", V, "ctrl+r", "view.refresh",
           show=False),
    Action("remotes", "Remotes", "Focus the remotes pane", V, "1", "view.remotes",
           "focus_remotes", show=False),
    Action("add-remote", "Add remote", "Add an LXD/Incus remote: its address and a trust "
           "token, or accept its certificate", V, "plus", "remote.add", "add_remote",
           flow=remotes.add_remote, show=False, palette="Add a remote…"),
    Action("remove-remote", "Remove remote", "Remove a remote added in corral (asks first)",
           R, "minus", "remote.remove", "remove_remote", flow=remotes.remove_remote,
           show=False),
    Action("instances", "Instances", "Focus the instance table", V, "2", "view.instances",
           "focus_instances", show=False),
    # Creating, changing
    Action("new", "New", "Create an instance (launch wizard)", R, "N", "instance.new",
           "new_instance", (Cap.CREATE,), create.new_instance, palette="New instance…"),
    Action("actions", "Actions", "Backup, clone, copy/move, publish, password, NICs, rename, …", I, "a", "instance.actions", "instance_actions",
           palette="Actions for {ref}…"),
    Action("operations", "Operations", "Running and recent operations of every remote (cancel with x)", V,
           "w", "view.operations", show=False, palette="Operations"),
    Action("limits", "Limits", "Change CPU, memory, disk, IO and network limits (says "
           "live/restart)", I, "L", "instance.limits", "edit_limits", (Cap.RESOURCES,),
           limits.edit_limits),
    Action("edit", "Edit YAML", "Edit the instance (config, devices, profiles) as YAML in "
           "$EDITOR; a change made meanwhile is refused", I, "E", "instance.edit",
           "edit_yaml", (Cap.YAML_EDIT,), objects.edit_yaml, palette="Edit {ref} as YAML"),
    Action("profiles", "Profiles", "Assign or unassign profiles, in order", I, "P",
           "instance.profiles", "edit_profiles", (Cap.PROFILES,), objects.profiles,
           menu=True, palette="Profiles of {ref}"),
    Action("files", "Files", "Browse the instance's files: pull, push, edit (LXD/Incus, "
           "LXC)", I, "f", "instance.files", "open_files", (Cap.FILES,), files.browse,
           show=False, palette="Files of {ref}"),
    # Snapshots (n on the table; the others are keys of the snapshots tab)
    Action("snapshot", "Snapshot", "Take a snapshot of the selected instance", I, "n",
           "snapshot.new", "new_snapshot", (Cap.SNAPSHOTS,), snapshots.new),
    Action("snapshots", "Snapshots", "Show the snapshots of the selected instance", I, "i",
           "snapshot.list", "show_snapshots", (Cap.SNAPSHOTS,), show=False),
    Action("snapshot-new", "New snapshot", "Take a snapshot of the selected instance", S, "n",
           "snapshot.new", "new_snapshot", (Cap.SNAPSHOTS,), snapshots.new),
    Action("snapshot-restore", "Restore", "Restore the instance to this snapshot (asks "
           "first)", S, "enter", "snapshot.restore", "restore_snapshot", (Cap.SNAPSHOTS,),
           snapshots.restore),
    Action("snapshot-delete", "Delete snapshot", "Delete this snapshot (asks first)", S,
           "delete,d", "snapshot.delete", "delete_snapshot", (Cap.SNAPSHOTS,),
           snapshots.delete),
    Action("snapshot-rename", "Rename", "Rename this snapshot", S, "m", "snapshot.rename",
           "rename_snapshot", (Cap.SNAPSHOT_RENAME,), snapshots.rename),
    Action("snapshot-schedule", "Schedule", "Edit the snapshot schedule and expiry (LXD/Incus)", S, "e",
           "snapshot.schedule", "snapshot_settings", (Cap.SNAPSHOT_SCHEDULE,),
           snapshots.schedule),
    # Consoles
    Action("console", "Console", "Attach to the console of the selected instance (serial, "
           "/dev/console)",
           I, "c", "console.open", "open_console", (Cap.CONSOLE,), consoles.console,
           one_at_a_time="console-console"),
    Action("shell", "Shell", "Open a shell inside the selected instance", I, "e",
           "console.shell", "open_shell", (Cap.EXEC,), consoles.shell,
           one_at_a_time="console-shell"),
    Action("vga", "VGA", "Show the VGA text screen of the selected VM (BIOS, boot loader)", I, "v",
           "console.vga", "open_vga", (Cap.VGA, Cap.SPICE, Cap.DISPLAY), consoles.vga, show=False,
           one_at_a_time="console-vga"),
    Action("screen", "Screen", "Show the graphical screen of the selected VM in the terminal "
           "(local QEMU VMs; LXD/Incus VMs: an external SPICE viewer)", I, "V",
           "console.screen", "open_screen", (Cap.DISPLAY, Cap.SPICE), consoles.screen,
           show=False, one_at_a_time="console-screen"),
    Action("screenshot", "Screenshot", "Save the graphical screen of the current console tab "
           "as PNG", C, "y", "console.screenshot", "screenshot", flow=consoles.screenshot,
           show=False, palette="Screenshot of the current screen", background=True),
    Action("viewer", "Open the screen in a viewer…", "Show the VM's screen in an external "
           "VNC viewer on this desktop", I, needs=(Cap.DISPLAY,), flow=consoles.external_viewer,
           menu=True, available=consoles.has_desktop, background=True),
    Action("console-focus", "To console", "Go back into the current console tab", C, "t",
           "console.focus", "focus_console", show=False),
    Action("console-zoom", "Zoom", "Consoles full screen, or beside the table again (in a "
           "console: its leave key first, which keeps them full screen)", C, "z",
           "console.zoom", "zoom_console", show=False),
    Action("console-close", "Close tab", "Close the current console tab (local consoles keep running)", C, "x",
           "console.close", "close_console", show=False),
    Action("console-next", "Next tab", "Next console tab", C,
           "right_square_bracket", "console.next", "next_console", show=False),
    Action("console-previous", "Previous tab", "Previous console tab", C,
           "left_square_bracket", "console.previous", "previous_console", show=False),
    Action("special-keys", "Special keys", "Send Ctrl+Alt+Del, Ctrl+Alt+Fn, SysRq, Esc, ... to the console", C,
           "K", "console.keys", "special_keys", flow=consoles.special_keys, show=False),
    # The actions menu (a)
    Action("export", "Export a backup…", "Write the instance to a backup file",
           I, needs=(Cap.EXPORT,), flow=transfer.export, menu=True),
    Action("import", "Import a backup…", "Create an instance on this remote from a backup "
           "file", R, needs=(Cap.IMPORT,), flow=transfer.import_backup, menu=True,
           palette="Import a backup onto {remote}…"),
    Action("clone", "Clone…", "Copy it on the same remote under a new name", I,
           needs=(Cap.CLONE,), flow=transfer.clone, menu=True),
    Action("copy", "Copy to another remote…", "Copy it to another remote of a kind that "
           "takes it (stopped)", I, needs=(Cap.COPY_MOVE,), flow=transfer.copy, menu=True,
           available=transfer.has_copy_target),
    Action("move", "Move to another remote…", "Move it to another remote of a kind that "
           "takes it (removed here once it is there; live where the remote can)", I,
           needs=(Cap.COPY_MOVE,), flow=transfer.move, menu=True,
           available=transfer.has_move_target),
    Action("convert_vm", "Convert to a local QEMU VM…", "Make a local QEMU VM from this "
           "stopped VM's definition and copies of its disks (the original is left as it is)",
           I, needs=(Cap.PORTABLE,), flow=convert_vm.convert, menu=True,
           available=convert_vm.has_convert_target),
    Action("publish", "Publish as an image…", "Make an image (with an alias) from it or one "
           "of its snapshots", I, needs=(Cap.PUBLISH,), flow=images.publish, menu=True),
    Action("password", "Change a password…", "Set a user's password inside the running "
           "instance (chpasswd)", I, needs=(Cap.PASSWORD,), flow=guest.password, menu=True),
    Action("nics", "Network interfaces and addresses…", "Add or remove NICs, set static "
           "IPv4/IPv6 addresses", I, needs=(Cap.NICS,), flow=guest.nics, menu=True),
    Action("rename", "Rename…", "Give the stopped instance a new name", I,
           needs=(Cap.RENAME,), flow=transfer.rename, menu=True),
    Action("description", "Description…", "Notes kept with the instance", I,
           needs=(Cap.DESCRIPTION,), flow=transfer.describe, menu=True),
    Action("images", "Images of this remote…", "List and delete images", R,
           needs=(Cap.IMAGES,), flow=images.images, menu=True, palette="Images of {remote}"),
    # Clusters
    Action("move-member", "Move to another member…", "Move it to another member of its "
           "cluster (a running one is stopped and started again)", I, needs=(Cap.CLUSTER,),
           flow=cluster.move_member, menu=True, palette="Move {ref} to another member…",
           available=cluster.is_cluster, one_at_a_time="lifecycle"),
    Action("evacuate", "Evacuate a member…", "Move or stop every instance of a cluster "
           "member and keep new ones off it (lists them first)", R, needs=(Cap.CLUSTER,),
           flow=cluster.evacuate, menu=True, palette="Evacuate a member of {remote}…",
           available=cluster.is_cluster),
    Action("restore-member", "Restore a member…", "Bring an evacuated member back, with "
           "its instances", R, needs=(Cap.CLUSTER,), flow=cluster.restore, menu=True,
           palette="Restore a member of {remote}…", available=cluster.is_cluster),
)

BY_NAME = {a.name: a for a in ACTIONS}
BY_METHOD: dict[str, Action] = {}
for _a in ACTIONS:
    BY_METHOD.setdefault(_a.action, _a)


def bindings(*scopes: Scope, prefix: str = "") -> list[Binding]:
    """The key bindings of the actions of ``scopes`` (those with a key)."""
    return [a.binding(prefix) for a in ACTIONS if a.key and a.scope in scopes]


def offered(action: Action, caps: frozenset[Capability]) -> bool:
    """The action's capabilities are among ``caps`` (any of them; none needed: True)."""
    return not action.needs or any(c in caps for c in action.needs)


def menu_actions(ctx: Context) -> list[Action]:
    """The actions menu (``a``) of ``ctx.ref``: what its remote offers."""
    caps = ctx.inventory.remote_capabilities(ctx.remote or "")
    return [a for a in ACTIONS if a.menu and offered(a, caps)
            and (a.available is None or a.available(ctx))]


ALSO_CALLED = {
    "new": "launch, create", "delete": "remove", "limits": "resources, CPU, memory",
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
