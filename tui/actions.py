"""The action table: every action corral offers, declared once.

Instance, remote, snapshot, console and screen actions and the verbs of the ``:`` views'
rows are all :class:`Action` entries of :data:`ACTIONS`. The key bindings (the main
screen's and the views' pane's), ``check_action`` (hidden where the backend cannot, greyed
with the reason where the state forbids), the command palette, the actions menu (``a``)
and the help screen are all generated from it. Adding an action = one entry here + one
flow function (``tui/flows/``; the views' rows: ``tui/views/verbs*.py``), which gets a
:class:`~tui.flows.context.Context` saying what it acts on.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from importlib import import_module
from typing import Any, Awaitable, Callable

from textual.binding import Binding

from backends.models import Capability

from .flows.context import Context

Flow = Callable[[Context], Awaitable[None]]


class Verb(enum.StrEnum):
    """The lifecycle verbs every backend has (``Backend.start`` …), named here only: the
    instance actions of the same names, their flows (``tui/flows/lifecycle.py``) and the
    inventory's ``act`` take these."""

    START = "start"
    STOP = "stop"
    RESTART = "restart"
    FREEZE = "freeze"
    UNFREEZE = "unfreeze"
    DELETE = "delete"


@dataclass(frozen=True)
class _Lazy:
    """A function of a module of ``tui/`` (``flows.lifecycle``), imported when it is
    first called: the flows (dialogs, wizards, file browsers…) are not needed to paint the
    first screen."""

    module: str
    name: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return getattr(import_module(f"{__package__}.{self.module}"), self.name)(
            *args, **kwargs)


class _FlowModule:
    def __init__(self, module: str) -> None:
        self._module = module

    def __getattr__(self, name: str) -> _Lazy:
        return _Lazy(self._module, name)


(cluster, consoles, convert_vm, create, files, guest, images, lifecycle, limits, objects,
 remotes, snapshots, transfer) = (_FlowModule(f"flows.{m}") for m in (
    "cluster", "consoles", "convert_vm", "create", "files", "guest", "images", "lifecycle",
    "limits", "objects", "remotes", "snapshots", "transfer"))
v, vb, vs = (_FlowModule(f"views.{m}") for m in ("verbs", "verbs_bulk", "verbs_storage"))


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
    ROWS = "rows"
    """The rows of one ``:`` view (:attr:`Action.view`): keys of the views' pane."""


@dataclass(frozen=True, kw_only=True)
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
    priority: bool = False
    """Handled before the focused widget sees the key."""
    background: bool = False
    """The flow works in the background (a lifecycle verb): the keys typed after it are
    not held for it (unless it asks about the marked rows first, as a bulk verb does).
    Every other flow opens something (a dialog, a wizard, a console, the editor), and the
    keys typed after its key wait for it and go there (tui/keyboard.py)."""
    opens: bool | None = None
    """The key opens something the keys typed after it belong to (a dialog, a menu, a
    console): refused, those keys are dropped, never run on the table (tui/keyboard.py).
    None: every flow but a background one does."""
    bulk: bool = False
    """Acts on every marked instance (or marked row of its view) when some are marked."""
    view: str = ""
    """The view whose rows it acts on (scope ``ROWS``)."""
    row: bool = True
    """(``ROWS``) Needs a selected row (``new`` does not)."""
    writable: bool = False
    """(``ROWS``) Not on read-only rows (the host's networks)."""

    @property
    def opening(self) -> bool:
        """:attr:`opens`, or what it is when not said."""
        return self.opens if self.opens is not None else \
            self.flow is not None and not self.background

    @property
    def action(self) -> str:
        return self.method or self.name

    def binding(self, prefix: str = "") -> Binding:
        return Binding(self.key, prefix + self.action, self.label, show=self.show,
                       id=self.binding_id or None, tooltip=self.help, priority=self.priority)


I, R, S, C, V = Scope.INSTANCE, Scope.REMOTE, Scope.SNAPSHOT, Scope.CONSOLE, Scope.VIEW
Cap = Capability

ROW_KEYS: dict[str, tuple[str, str, str]] = {
    # a view verb: (key, binding id, help), the same in every view
    "new": ("N", "resource.new", "Create one (a profile may copy another)"),
    "delete": ("d", "resource.delete",
               "Delete the marked rows, or the selected one (asks once)"),
    "copy": ("c", "resource.copy",
             "Copy the marked rows, or the selected one (also to another remote)"),
    "rename": ("m", "resource.rename", "Rename it"),
    "edit": ("E", "resource.edit", "Edit it as YAML in $EDITOR"),
    "open": ("enter", "resource.open",
             "Open it (a pool's volumes; show a remote in this project)"),
    "leases": ("l", "resource.leases", "DHCP leases of this network"),
    "resize": ("plus", "resource.resize", "Resize this volume"),
    "attach": ("A", "resource.attach", "Attach this volume to an instance"),
    "detach": ("D", "resource.detach", "Detach this volume from an instance"),
    "alias-add": ("a", "resource.alias_add", "Add an alias to this image"),
    "alias-remove": ("X", "resource.alias_remove", "Remove an alias of this image"),
    "cancel": ("x", "resource.cancel", "Cancel the marked operations, or the selected one"),
    "refresh": ("U", "resource.refresh",
                "Refresh the marked images, or the selected one, from where they came"),
}


def row_method(verb: str) -> str:
    """The views' pane's action of a view verb (``alias-add``: ``verb_alias_add``)."""
    return "verb_" + verb.replace("-", "_")


def _rows(view: str, verb: str, label: str, needs: Capability, flow: Flow, *,
          row: bool = True, bulk: bool = False, writable: bool = False,
          background: bool = False) -> Action:
    """The entry of ``verb`` in ``view``, with the verb's key, id and help."""
    key, binding_id, help_text = ROW_KEYS[verb]
    return Action(name=f"{view}.{verb}", label=label, help=help_text, scope=Scope.ROWS,
                  view=view, key=key, binding_id=binding_id, method=row_method(verb),
                  needs=(needs,), flow=flow, row=row, bulk=bulk, writable=writable,
                  background=background)


ACTIONS: tuple[Action, ...] = (
    # Lifecycle: on the selected instance, or on every marked one
    Action(name=Verb.START, label="Start", help="Start the selected instance", scope=I, key="S",
           binding_id="instance.start", method="start_instance", needs=(Cap.START,),
           flow=lifecycle.start, palette="Start {ref}", one_at_a_time="lifecycle", background=True,
           bulk=True),
    Action(name=Verb.STOP, label="Stop", help="Stop the selected instance (force is offered if it "
           "hangs)", scope=I, key="s", binding_id="instance.stop", method="stop_instance",
           needs=(Cap.STOP,), flow=lifecycle.stop, palette="Stop {ref}", one_at_a_time="lifecycle",
           background=True, bulk=True),
    Action(name=Verb.RESTART, label="Restart", help="Restart the selected instance", scope=I,
           key="r", binding_id="instance.restart", method="restart_instance", needs=(Cap.RESTART,),
           flow=lifecycle.restart, palette="Restart {ref}", one_at_a_time="lifecycle",
           background=True, bulk=True),
    Action(name="pause", label="Pause/Resume", help="Pause (freeze) or resume the selected "
           "instance", scope=I, key="p", binding_id="instance.pause", method="pause_instance",
           needs=(Cap.FREEZE, Cap.UNFREEZE), flow=lifecycle.pause, one_at_a_time="lifecycle",
           background=True, bulk=True),
    Action(name=Verb.FREEZE, label="Pause", help="Pause (freeze) the instance", scope=I,
           needs=(Cap.FREEZE,), flow=lifecycle.freeze, show=False, palette="Pause {ref}",
           one_at_a_time="lifecycle", background=True, bulk=True),
    Action(name=Verb.UNFREEZE, label="Resume", help="Resume the paused instance", scope=I,
           needs=(Cap.UNFREEZE,), flow=lifecycle.unfreeze, show=False, palette="Resume {ref}",
           one_at_a_time="lifecycle", background=True, bulk=True),
    Action(name=Verb.DELETE, label="Delete", help="Delete the selected instance (asks first)",
           scope=I, key="d", binding_id="instance.delete", method="delete_instance",
           needs=(Cap.DELETE,), flow=lifecycle.delete, palette="Delete {ref}",
           one_at_a_time="lifecycle", bulk=True),
    # Views
    Action(name="details", label="Details", help="Show or hide the details of the selected "
           "instance", scope=V, key="enter", binding_id="view.details", method="toggle_details"),
    Action(name="filter", label="Filter", help="Filter: words, !negation, key=value (status, "
           "type, remote, ...)", scope=V, key="slash", binding_id="view.filter"),
    Action(name="clear", label="Clear", help="Close details / clear the filter", scope=V,
           key="escape", binding_id="view.clear", show=False),
    Action(name="command", label="Views", help="Switch the table: :profiles :networks :storage "
           ":projects :images :operations :remotes (:instances or esc back)", scope=V, key="colon",
           binding_id="view.command", method="command"),
    Action(name="retry", label="Reconnect", help="Reconnect the selected remote now", scope=V,
           key="R", binding_id="remote.retry", method="retry_remote", show=False),
    Action(name="refresh", label="Refresh", help="List every connected remote again", scope=V,
           key="ctrl+r", binding_id="view.refresh", show=False),
    Action(name="remotes", label="Remotes", help="Focus the remotes pane", scope=V, key="1",
           binding_id="view.remotes", method="focus_remotes", show=False),
    Action(name="add-remote", label="Add remote", help="Add an LXD/Incus remote: its address and "
           "a trust token, or accept its certificate", scope=V, key="plus",
           binding_id="remote.add", method="add_remote", flow=remotes.add_remote, show=False,
           palette="Add a remote…"),
    Action(name="remove-remote", label="Remove remote", help="Remove a remote added in corral "
           "(asks first)", scope=R, key="minus", binding_id="remote.remove",
           method="remove_remote", flow=remotes.remove_remote, show=False),
    Action(name="instances", label="Instances", help="Focus the instance table", scope=V, key="2",
           binding_id="view.instances", method="focus_instances", show=False),
    # Creating, changing
    Action(name="new", label="New", help="Create an instance (launch wizard)", scope=R, key="N",
           binding_id="instance.new", method="new_instance", needs=(Cap.CREATE,),
           flow=create.new_instance, palette="New instance…"),
    Action(name="actions", label="Actions", help="Backup, clone, copy/move, publish, password, "
           "NICs, rename, …", scope=I, key="a", binding_id="instance.actions",
           method="instance_actions", palette="Actions for {ref}…", opens=True),
    Action(name="operations", label="Operations", help="The operations view: running and recent "
           "operations of every remote (cancel with x)", scope=V, key="w",
           binding_id="view.operations", show=False, palette="Operations"),
    Action(name="limits", label="Limits", help="Change CPU, memory, disk, IO and network limits "
           "(says live/restart)", scope=I, key="L", binding_id="instance.limits",
           method="edit_limits", needs=(Cap.RESOURCES,), flow=limits.edit_limits),
    Action(name="edit", label="Edit YAML", help="Edit the instance (config, devices, profiles) as "
           "YAML in $EDITOR; a change made meanwhile is refused", scope=I, key="E",
           binding_id="instance.edit", method="edit_yaml", needs=(Cap.YAML_EDIT,),
           flow=objects.edit_yaml, palette="Edit {ref} as YAML"),
    Action(name="profiles", label="Profiles", help="Assign or unassign profiles, in order",
           scope=I, key="P", binding_id="instance.profiles", method="edit_profiles",
           needs=(Cap.PROFILES,), flow=objects.profiles, menu=True, palette="Profiles of {ref}"),
    Action(name="files", label="Files", help="Browse the instance's files: pull, push, edit "
           "(LXD/Incus, LXC)", scope=I, key="f", binding_id="instance.files", method="open_files",
           needs=(Cap.FILES,), flow=files.browse, show=False, palette="Files of {ref}"),
    # Snapshots (n on the table; the others are keys of the snapshots tab)
    Action(name="snapshot", label="Snapshot", help="Take a snapshot of the selected instance",
           scope=I, key="n", binding_id="snapshot.new", method="new_snapshot",
           needs=(Cap.SNAPSHOTS,), flow=snapshots.new),
    Action(name="snapshots", label="Snapshots", help="Show the snapshots of the selected instance",
           scope=I, key="i", binding_id="snapshot.list", method="show_snapshots",
           needs=(Cap.SNAPSHOTS,), show=False, opens=True),
    Action(name="snapshot-new", label="New snapshot", help="Take a snapshot of the selected "
           "instance", scope=S, key="n", binding_id="snapshot.new", method="new_snapshot",
           needs=(Cap.SNAPSHOTS,), flow=snapshots.new),
    Action(name="snapshot-restore", label="Restore", help="Restore the instance to this snapshot "
           "(asks first)", scope=S, key="enter", binding_id="snapshot.restore",
           method="restore_snapshot", needs=(Cap.SNAPSHOTS,), flow=snapshots.restore),
    Action(name="snapshot-delete", label="Delete snapshot", help="Delete this snapshot (asks "
           "first)", scope=S, key="delete,d", binding_id="snapshot.delete",
           method="delete_snapshot", needs=(Cap.SNAPSHOTS,), flow=snapshots.delete),
    Action(name="snapshot-rename", label="Rename", help="Rename this snapshot", scope=S, key="m",
           binding_id="snapshot.rename", method="rename_snapshot", needs=(Cap.SNAPSHOT_RENAME,),
           flow=snapshots.rename),
    Action(name="snapshot-schedule", label="Schedule", help="Edit the snapshot schedule and "
           "expiry (LXD/Incus)", scope=S, key="e", binding_id="snapshot.schedule",
           method="snapshot_settings", needs=(Cap.SNAPSHOT_SCHEDULE,), flow=snapshots.schedule),
    # Consoles
    Action(name="console", label="Console", help="Attach to the console of the selected instance "
           "(serial, /dev/console)", scope=I, key="c", binding_id="console.open",
           method="open_console", needs=(Cap.CONSOLE,), flow=consoles.console,
           one_at_a_time="console-console"),
    Action(name="shell", label="Shell", help="Open a shell inside the selected instance", scope=I,
           key="e", binding_id="console.shell", method="open_shell", needs=(Cap.EXEC,),
           flow=consoles.shell, one_at_a_time="console-shell"),
    Action(name="vga", label="VGA", help="Show the VGA text screen of the selected VM (BIOS, boot "
           "loader)", scope=I, key="v", binding_id="console.vga", method="open_vga",
           needs=(Cap.VGA, Cap.SPICE, Cap.DISPLAY), flow=consoles.vga, show=False,
           one_at_a_time="console-vga"),
    Action(name="screen", label="Screen", help="Show the graphical screen of the selected VM in "
           "the terminal (local QEMU VMs; LXD/Incus VMs: an external SPICE viewer)", scope=I,
           key="V", binding_id="console.screen", method="open_screen",
           needs=(Cap.DISPLAY, Cap.SPICE), flow=consoles.screen, show=False,
           one_at_a_time="console-screen"),
    Action(name="screenshot", label="Screenshot", help="Save the graphical screen of the current "
           "console tab as PNG", scope=C, key="y", binding_id="console.screenshot",
           method="screenshot", flow=consoles.screenshot, show=False,
           palette="Screenshot of the current screen", background=True),
    Action(name="viewer", label="Open the screen in a viewer…", help="Show the VM's screen in an "
           "external VNC viewer on this desktop", scope=I, needs=(Cap.DISPLAY,),
           flow=consoles.external_viewer, menu=True, available=consoles.has_desktop,
           background=True),
    Action(name="console-focus", label="To console", help="Go back into the current console tab",
           scope=C, key="t", binding_id="console.focus", method="focus_console", show=False,
           opens=True),
    Action(name="console-zoom", label="Zoom", help="Consoles full screen, or beside the table "
           "again (in a console: its leave key first, which keeps them full screen)", scope=C,
           key="z", binding_id="console.zoom", method="zoom_console", show=False),
    Action(name="console-close", label="Close tab", help="Close the current console tab (local "
           "consoles keep running)", scope=C, key="x", binding_id="console.close",
           method="close_console", show=False),
    Action(name="console-next", label="Next tab", help="Next console tab", scope=C,
           key="right_square_bracket", binding_id="console.next", method="next_console",
           show=False),
    Action(name="console-previous", label="Previous tab", help="Previous console tab", scope=C,
           key="left_square_bracket", binding_id="console.previous", method="previous_console",
           show=False),
    Action(name="special-keys", label="Special keys", help="Send Ctrl+Alt+Del, Ctrl+Alt+Fn, "
           "SysRq, Esc, ... to the console", scope=C, key="K", binding_id="console.keys",
           method="special_keys", flow=consoles.special_keys, show=False),
    # The actions menu (a)
    Action(name="export", label="Export a backup…", help="Write the instance to a backup file",
           scope=I, needs=(Cap.EXPORT,), flow=transfer.export, menu=True),
    Action(name="import", label="Import a backup…", help="Create an instance on this remote from "
           "a backup file", scope=R, needs=(Cap.IMPORT,), flow=transfer.import_backup, menu=True,
           palette="Import a backup onto {remote}…"),
    Action(name="clone", label="Clone…", help="Copy it on the same remote under a new name",
           scope=I, needs=(Cap.CLONE,), flow=transfer.clone, menu=True),
    Action(name="copy", label="Copy to another remote…", help="Copy it to another remote of a "
           "kind that takes it (stopped)", scope=I, needs=(Cap.COPY_MOVE,), flow=transfer.copy,
           menu=True, available=transfer.has_copy_target),
    Action(name="move", label="Move to another remote…", help="Move it to another remote of a "
           "kind that takes it (removed here once it is there; live where the remote can)",
           scope=I, needs=(Cap.COPY_MOVE,), flow=transfer.move, menu=True,
           available=transfer.has_move_target),
    Action(name="convert_vm", label="Convert to a local QEMU VM…", help="Make a local QEMU VM "
           "from this stopped VM's definition and copies of its disks (the original is left as it "
           "is)", scope=I, needs=(Cap.PORTABLE,), flow=convert_vm.convert, menu=True,
           available=convert_vm.has_convert_target),
    Action(name="publish", label="Publish as an image…", help="Make an image (with an alias) from "
           "it or one of its snapshots", scope=I, needs=(Cap.PUBLISH,), flow=images.publish,
           menu=True),
    Action(name="password", label="Change a password…", help="Set a user's password inside the "
           "running instance (chpasswd)", scope=I, needs=(Cap.PASSWORD,), flow=guest.password,
           menu=True),
    Action(name="nics", label="Network interfaces and addresses…", help="Add or remove NICs, set "
           "static IPv4/IPv6 addresses", scope=I, needs=(Cap.NICS,), flow=guest.nics, menu=True),
    Action(name="rename", label="Rename…", help="Give the stopped instance a new name", scope=I,
           needs=(Cap.RENAME,), flow=transfer.rename, menu=True),
    Action(name="description", label="Description…", help="Notes kept with the instance", scope=I,
           needs=(Cap.DESCRIPTION,), flow=transfer.describe, menu=True),
    Action(name="images", label="Images of this remote", help="The images view with this "
           "remote's: delete, copy, refresh, aliases", scope=R, needs=(Cap.IMAGES,),
           flow=images.images, menu=True, palette="Images of {remote}"),
    # Clusters
    Action(name="move-member", label="Move to another member…", help="Move it to another member "
           "of its cluster (a running one is stopped and started again)", scope=I,
           needs=(Cap.CLUSTER,), flow=cluster.move_member, menu=True,
           palette="Move {ref} to another member…", available=cluster.is_cluster,
           one_at_a_time="lifecycle"),
    Action(name="evacuate", label="Evacuate a member…", help="Move or stop every instance of a "
           "cluster member and keep new ones off it (lists them first)", scope=R,
           needs=(Cap.CLUSTER,), flow=cluster.evacuate, menu=True,
           palette="Evacuate a member of {remote}…", available=cluster.is_cluster),
    Action(name="restore-member", label="Restore a member…", help="Bring an evacuated member "
           "back, with its instances", scope=R, needs=(Cap.CLUSTER,), flow=cluster.restore,
           menu=True, palette="Restore a member of {remote}…", available=cluster.is_cluster),
    # The rows of the : views (keys of the views' pane; the same key in every view)
    _rows("profiles", "new", "New", Cap.PROFILES, v.new_profile, row=False),
    _rows("profiles", "copy", "Copy", Cap.PROFILES, vb.copy_profile, bulk=True),
    _rows("profiles", "rename", "Rename", Cap.PROFILES, v.rename_profile),
    _rows("profiles", "delete", "Delete", Cap.PROFILES, v.delete, bulk=True),
    _rows("profiles", "edit", "Edit YAML", Cap.YAML_EDIT, v.edit),
    _rows("networks", "new", "New bridge", Cap.NETWORK_MANAGE, v.new_network, row=False),
    _rows("networks", "delete", "Delete", Cap.NETWORK_MANAGE, v.delete, bulk=True,
          writable=True),
    _rows("networks", "leases", "Leases", Cap.NETWORK_MANAGE, v.leases, writable=True),
    _rows("networks", "edit", "Edit YAML", Cap.YAML_EDIT, v.edit, writable=True),
    _rows("storage", "open", "Volumes", Cap.STORAGE, vs.open_volumes, background=True),
    _rows("storage", "edit", "Edit YAML", Cap.YAML_EDIT, v.edit),
    _rows("volumes", "new", "New", Cap.STORAGE, vs.new_volume, row=False),
    _rows("volumes", "resize", "Resize", Cap.STORAGE, vs.resize_volume),
    _rows("volumes", "attach", "Attach", Cap.STORAGE, vs.attach_volume),
    _rows("volumes", "detach", "Detach", Cap.STORAGE, vs.detach_volume),
    _rows("volumes", "copy", "Copy", Cap.STORAGE, vb.copy_volume, bulk=True),
    _rows("volumes", "delete", "Delete", Cap.STORAGE, v.delete, bulk=True),
    _rows("volumes", "edit", "Edit YAML", Cap.YAML_EDIT, v.edit),
    _rows("projects", "open", "Show", Cap.PROJECTS, v.switch_project, background=True),
    _rows("projects", "new", "New", Cap.PROJECTS, v.new_project, row=False),
    _rows("projects", "delete", "Delete", Cap.PROJECTS, v.delete, bulk=True),
    _rows("projects", "edit", "Edit YAML", Cap.YAML_EDIT, v.edit),
    _rows("images", "delete", "Delete", Cap.IMAGES, v.delete, bulk=True),
    _rows("images", "alias-add", "Add alias", Cap.IMAGE_ALIASES, vs.add_alias),
    _rows("images", "alias-remove", "Remove alias", Cap.IMAGE_ALIASES, vs.remove_alias),
    _rows("images", "copy", "Copy to", Cap.IMAGE_ALIASES, vb.copy_image, bulk=True),
    _rows("images", "refresh", "Refresh", Cap.IMAGE_ALIASES, vb.refresh_image, bulk=True,
          background=True),
    _rows("operations", "cancel", "Cancel", Cap.OPERATIONS, vb.cancel_operation, bulk=True),
)

BY_NAME = {a.name: a for a in ACTIONS}
BY_METHOD: dict[str, Action] = {}
"""The main screen's actions by their Textual action (``stop_instance``)."""
for _a in ACTIONS:
    if _a.scope is not Scope.ROWS:
        BY_METHOD.setdefault(_a.action, _a)
BY_VIEW: dict[tuple[str, str], Action] = {(a.view, a.action): a for a in ACTIONS
                                          if a.scope is Scope.ROWS}
"""The views' verbs by (view, Textual action): ``("profiles", "verb_new")``."""


def bindings(*scopes: Scope, prefix: str = "") -> list[Binding]:
    """The key bindings of the actions of ``scopes`` (those with a key)."""
    return [a.binding(prefix) for a in ACTIONS if a.key and a.scope in scopes]


def row_bindings() -> list[Binding]:
    """The views' pane's bindings: one per view verb, whichever views have it (which view
    it acts in is decided when pressed); enter is the table's own row selection."""
    out: dict[str, Binding] = {}
    for a in ACTIONS:
        if a.scope is Scope.ROWS and a.action not in out and a.key != "enter":
            verb = a.action.removeprefix("verb_").replace("_", " ")
            out[a.action] = Binding(a.key, a.action, verb.capitalize(), id=a.binding_id,
                                    tooltip=a.help)
    return list(out.values())


def offered(action: Action, caps: frozenset[Capability]) -> bool:
    """The action's capabilities are among ``caps`` (any of them; none needed: True)."""
    return not action.needs or any(c in caps for c in action.needs)
