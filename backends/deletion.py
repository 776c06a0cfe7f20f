"""Deleting an instance together with the storage it keeps: :class:`DeletionVerbs` is the
part of the backend contract for a backend whose ``delete`` leaves some storage behind
(libvirt: undefining a domain keeps its disks) and that can remove it too, once the user
has seen it listed. Declared as :attr:`~backends.models.Capability.DELETE_STORAGE`.

- ``owned_storage(ref)`` names what ``delete`` would keep and ``delete_with_storage`` can
  remove: storage the backend itself manages (a libvirt pool's volumes), used by this
  instance alone. What the backend does not manage (a plain file outside any pool, a
  disk another instance uses too) is never listed, so never removed.
- ``storage_offer(ref)`` is the same list with what was left out of it and why, in words
  (:class:`StorageOffer`): the delete dialog shows both, so the user knows why a disk is
  not offered (a volume another instance's disk is built on, say). Its default is
  ``owned_storage`` with no reasons.
- ``delete_with_storage(ref, storage)`` deletes the instance and exactly the listed
  ``storage`` the user confirmed: a name that is no longer among ``owned_storage(ref)``
  refuses the whole verb before anything is deleted, and the backend checks each item
  again right before removing it (what became used meanwhile is kept and named).

A base of :class:`~backends.base.Backend`; the defaults raise
:class:`~backends.errors.Unsupported`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .errors import Unsupported
from .models import InstanceRef


@dataclass(frozen=True, slots=True)
class StorageOffer:
    """What deleting an instance could remove with it, and what it keeps regardless."""

    items: tuple[str, ...] = ()
    """``owned_storage``: what ``delete_with_storage`` may remove, in the backend's words."""
    kept: tuple[tuple[str, str], ...] = ()
    """``(item, why)`` for storage of the instance that is never offered: ``why`` is a
    sentence naming the item (``base.qcow2 is the backing file of web2.qcow2``)."""


class DeletionVerbs:
    """The delete-with-storage part of the backend contract."""

    _unsupported: Callable[[str], Unsupported]
    """Provided by :class:`~backends.base.Backend`."""

    async def owned_storage(self, ref: InstanceRef) -> list[str]:
        """What deleting ``ref`` keeps and ``delete_with_storage`` could remove (paths or
        names in the backend's words, e.g. a pool volume's path); [] when nothing.

        Raises:
            NotFound: the instance does not exist.
        """
        raise self._unsupported("delete instances with their storage")

    async def storage_offer(self, ref: InstanceRef) -> StorageOffer:
        """``owned_storage(ref)`` with the instance's storage left out of it and why (one
        reading of the remote). The default has no reasons.

        Raises:
            NotFound: the instance does not exist.
        """
        return StorageOffer(tuple(await self.owned_storage(ref)))

    async def delete_with_storage(self, ref: InstanceRef, storage: list[str], *,
                                  force: bool = False) -> None:
        """Delete the instance (as ``delete``; a running one needs ``force``), then the
        ``storage`` the user confirmed (each one of ``owned_storage(ref)``).

        Raises:
            Conflict: running and not ``force``, or ``storage`` names something that is
                not (any more) the instance's own: nothing is deleted.
            OperationFailed: a storage item could not be removed after the instance was
                deleted, or became used by something else meanwhile (then it is kept);
                the message names what is left and why.
        """
        raise self._unsupported("delete instances with their storage")


DELETION_METHODS = ("owned_storage", "delete_with_storage")
"""The verbs of ``DELETE_STORAGE`` (merged into ``backends.base.CAPABILITY_METHODS``);
``storage_offer`` has a default built on ``owned_storage``."""
