"""Copies and moves of an instance to another remote (``COPY_MOVE``), and of the objects
beside instances (volumes, images): the part of the backend contract that says, before
anything is tried, where they can go.

:meth:`TransferVerbs.copy_problem` answers for a pair of backends (this one, the one ``there``) and
a verb (copy or move): None when this backend can do it, else why not in words. The UI
offers as targets only the remotes with no problem, so a copy is never offered where it
can only be refused; ``copy_to`` still checks everything itself.

A base of :class:`~backends.base.Backend`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .errors import Unsupported
from .models import Instance, InstanceRef, ResourceKind

if TYPE_CHECKING:
    from .base import Backend


class TransferVerbs:
    """The copy/move part of the backend contract."""

    _unsupported: Callable[[str], Unsupported]
    """Provided by :class:`~backends.base.Backend`."""

    def copy_problem(self, there: Backend, *, move: bool = False) -> str | None:
        """Why an instance of this remote cannot be copied (``move``: moved) to the remote
        ``there`` serves, in words; None when it can. The default: only to another
        remote of the same kind (a backend that can do more or less says so)."""
        me: Backend = self  # type: ignore[assignment]
        if there is me or there.remote.name == me.remote.name:
            return "it is the same remote"
        if there.kind != me.kind:
            return f"{there.remote.name} is a {there.kind} remote, not {me.kind}"
        return None

    def object_copy_problem(self, there: Backend, kind: ResourceKind) -> str | None:
        """Why an object of ``kind`` (a volume, an image) of this remote cannot be copied to
        the remote ``there`` serves, in words; None when it can (its own remote included,
        where the verb allows that). The default: only between remotes of the same kind."""
        me: Backend = self  # type: ignore[assignment]
        if there.kind != me.kind:
            return (f"{there.remote.name} is a {there.kind} remote: {kind.value.split('-')[-1]}s "
                    f"copy only between remotes of the same kind.")
        return None

    async def copy_to(self, ref: InstanceRef, target: Backend, new_name: str, *,
                      move: bool = False, with_snapshots: bool = True,
                      progress: Callable[[str], None] | None = None) -> Instance:
        """Copy (or with ``move``, move) a stopped instance to ``target``'s remote (it
        declares ``COPY_MOVE`` too, and :meth:`copy_problem` found none); a running one
        where :meth:`live_move_to_problem` is None."""
        raise self._unsupported("copy instances to other remotes")

    def live_move_to_problem(self, instance: Instance, there: Backend) -> str | None:
        """Why running ``instance`` cannot move to ``there`` live (None: it moves running)."""
        return "it is moved stopped (cold)"
