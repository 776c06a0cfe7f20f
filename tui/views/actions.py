"""The action table of the resource views: per view, what each key does and which
ability of the row's remote it needs. The pane's bindings, footer and ``check_action`` are
generated from it, as the instance actions are from ``tui/actions.py``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from textual.binding import Binding

from backends.models import Capability

from . import verbs as v
from . import verbs_bulk as vb
from . import verbs_storage as vs
from .context import ViewContext

Flow = Callable[[ViewContext], Awaitable[None]]


@dataclass(frozen=True)
class Verb:
    """One key in one view."""

    view: str
    verb: str
    """``new``, ``delete``, ``copy``, ``rename``, ``edit``, ``open``, ``leases``, ``resize``,
    ``attach``, ``detach``, ``alias-add``, ``alias-remove``, ``cancel``."""
    label: str
    needs: Capability
    flow: Flow
    row: bool = True
    """Needs a selected row (``new`` does not)."""
    bulk: bool = False
    """Acts on every marked row."""
    writable: bool = False
    """Not on read-only rows (the host's networks)."""
    background: bool = False
    """Opens nothing (unless it asks about the marked rows, as a bulk verb does): the keys
    typed after it are not held for it. Every other verb opens something (a dialog, the
    editor) and the keys typed after its key wait for it and go there (tui/keyboard.py)."""


KEYS: dict[str, tuple[str, str, str]] = {
    # verb: (key, binding id, help)
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

C = Capability
VERBS: tuple[Verb, ...] = (
    Verb("profiles", "new", "New", C.PROFILES, v.new_profile, row=False),
    Verb("profiles", "copy", "Copy", C.PROFILES, vb.copy_profile, bulk=True),
    Verb("profiles", "rename", "Rename", C.PROFILES, v.rename_profile),
    Verb("profiles", "delete", "Delete", C.PROFILES, v.delete, bulk=True),
    Verb("profiles", "edit", "Edit YAML", C.YAML_EDIT, v.edit),
    Verb("networks", "new", "New bridge", C.NETWORK_MANAGE, v.new_network, row=False),
    Verb("networks", "delete", "Delete", C.NETWORK_MANAGE, v.delete, bulk=True,
         writable=True),
    Verb("networks", "leases", "Leases", C.NETWORK_MANAGE, v.leases, writable=True),
    Verb("networks", "edit", "Edit YAML", C.YAML_EDIT, v.edit, writable=True),
    Verb("storage", "open", "Volumes", C.STORAGE, vs.open_volumes, background=True),
    Verb("storage", "edit", "Edit YAML", C.YAML_EDIT, v.edit),
    Verb("volumes", "new", "New", C.STORAGE, vs.new_volume, row=False),
    Verb("volumes", "resize", "Resize", C.STORAGE, vs.resize_volume),
    Verb("volumes", "attach", "Attach", C.STORAGE, vs.attach_volume),
    Verb("volumes", "detach", "Detach", C.STORAGE, vs.detach_volume),
    Verb("volumes", "copy", "Copy", C.STORAGE, vb.copy_volume, bulk=True),
    Verb("volumes", "delete", "Delete", C.STORAGE, v.delete, bulk=True),
    Verb("volumes", "edit", "Edit YAML", C.YAML_EDIT, v.edit),
    Verb("projects", "open", "Show", C.PROJECTS, v.switch_project, background=True),
    Verb("projects", "new", "New", C.PROJECTS, v.new_project, row=False),
    Verb("projects", "delete", "Delete", C.PROJECTS, v.delete, bulk=True),
    Verb("projects", "edit", "Edit YAML", C.YAML_EDIT, v.edit),
    Verb("images", "delete", "Delete", C.IMAGES, v.delete, bulk=True),
    Verb("images", "alias-add", "Add alias", C.IMAGE_ALIASES, vs.add_alias),
    Verb("images", "alias-remove", "Remove alias", C.IMAGE_ALIASES, vs.remove_alias),
    Verb("images", "copy", "Copy to", C.IMAGE_ALIASES, vb.copy_image, bulk=True),
    Verb("images", "refresh", "Refresh", C.IMAGE_ALIASES, vb.refresh_image, bulk=True,
         background=True),
    Verb("operations", "cancel", "Cancel", C.OPERATIONS, vb.cancel_operation,
         bulk=True, background=True),
)
BY_VIEW: dict[tuple[str, str], Verb] = {(x.view, x.verb): x for x in VERBS}


def method(verb: str) -> str:
    return "verb_" + verb.replace("-", "_")


def bindings() -> list[Binding]:
    """One binding per verb key; which view it acts in is decided when pressed."""
    out = []
    for verb, (key, binding_id, help_text) in KEYS.items():
        if verb == "open":
            continue  # enter: the table's own row selection (ResourcePane._selected)
        label = verb.replace("-", " ").capitalize()
        out.append(Binding(key, method(verb), label, id=binding_id, tooltip=help_text))
    return out


def allowed(view: str, verb: str, caps: frozenset[Capability], *, has_row: bool,
            read_only: bool) -> bool | None:
    """True (offered), False (not in this view or the remote cannot), None (greyed: no
    row, or a read-only row)."""
    entry = BY_VIEW.get((view, verb))
    if entry is None:
        return False
    if entry.needs not in caps:
        return False
    if entry.row and not has_row:
        return None
    if entry.writable and read_only:
        return None
    return True
