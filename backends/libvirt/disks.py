"""A libvirt domain's disks and the storage pool volumes behind them, and deleting a domain
with its volumes (``owned_storage``, ``storage_offer``, ``delete_with_storage``:
``backends.deletion``).

- A disk is the pool's when libvirt's storage API knows it (``disk_xml.volume_of``). Only
  such volumes are ever copied, resized or deleted by corral: it works the same over
  ``qemu+ssh://`` (the daemon does the work) and never touches a path libvirt does not
  manage.
- ``owned_storage`` lists the volumes of the domain's writable disks that nothing else in
  the daemon uses (``storage_users``): not a disk of another domain (saved or running
  definition), not the backing file of any volume of an active pool or of a running disk,
  transitively. Read-only and shareable disks (an installer ISO, a disk shared by a
  cluster) are never listed, nor disks outside any pool (``delete`` keeps them, as
  before). ``storage_offer`` says, for each volume left out because something uses it,
  what does (``base.qcow2 is the backing file of web2.qcow2, which is a disk of web2``).
- ``delete_with_storage`` reads the uses again and refuses a list naming anything that is
  not (any more) the domain's own before deleting anything; then it deletes the domain
  (as ``delete``) and, in one call in the remote's thread, reads the uses once more and
  deletes each confirmed volume nothing uses yet. One that became used in between is
  kept, and named with what uses it; so is one that could not be deleted.

Every libvirt call runs in the remote's thread (``self.lv``); the helpers here block and
are called inside those calls.
"""

from __future__ import annotations

import libvirt

from ..base import Backend
from ..deletion import StorageOffer
from ..errors import Conflict, OperationFailed
from ..models import InstanceRef
from .connection import Connection
from .disk_xml import WRITABLE, Disk, disks_of, volume_of
from .storage_users import Users

__all__ = ["WRITABLE", "Disk", "OwnedStorage", "disks_of", "owned_volumes", "volume_of"]
"""``Disk``, ``disks_of`` and ``volume_of`` (``disk_xml``) are imported from here too."""


def owned_volumes(conn: libvirt.virConnect, dom: libvirt.virDomain
                  ) -> tuple[dict[str, libvirt.virStorageVol], list[tuple[str, str]]]:
    """(``{path: volume}`` of the pool volumes of this domain's writable disks that nothing
    else uses, ``[(path, why)]`` of those something else uses) (blocks)."""
    xmls = [dom.XMLDesc(0)]
    if dom.isPersistent() and dom.isActive():
        xmls.append(dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE))
    mine: dict[str, libvirt.virStorageVol] = {}
    for xml in xmls:
        for disk in disks_of(xml):
            if disk.writable and (vol := volume_of(conn, disk)) is not None:
                mine.setdefault(vol.path(), vol)
    users = Users.read(conn, besides=dom.name())
    offered, kept = {}, []
    for path, vol in sorted(mine.items()):
        if (why := users.why(path)) is None:
            offered[path] = vol
        else:
            kept.append((path, why))
    return offered, kept


class OwnedStorage(Backend):
    """``owned_storage``, ``storage_offer`` and ``delete_with_storage`` of a libvirt
    remote."""

    lv: Connection

    @property
    def _reading(self) -> float:
        """The bound of reading every domain and volume (pools refreshed): longer than
        one call's, a daemon with many volumes answers many calls."""
        return max(self.timeout, 30)

    async def owned_storage(self, ref: InstanceRef) -> list[str]:
        """The paths of the pool volumes only this domain uses (see the module)."""
        return list((await self.storage_offer(ref)).items)

    async def storage_offer(self, ref: InstanceRef) -> StorageOffer:
        """``owned_storage``, and the domain's volumes something else uses with what."""
        dom = await self.lv.domain(ref)
        conn = await self.lv.live()
        offered, kept = await self.lv.call(owned_volumes, conn, dom, within=self._reading,
                                           what=f"reading the disks of {ref.name}")
        return StorageOffer(tuple(offered), tuple(kept))

    async def delete_with_storage(self, ref: InstanceRef, storage: list[str], *,
                                  force: bool = False) -> None:
        dom = await self.lv.domain(ref)
        conn = await self.lv.live()
        owned, kept = await self.lv.call(owned_volumes, conn, dom, within=self._reading,
                                         what=f"reading the disks of {ref.name}")
        strangers = [p for p in storage if p not in owned]
        if strangers:
            why = dict(kept)
            raise Conflict(
                f"{', '.join(strangers)} {'is' if len(strangers) == 1 else 'are'} not (any "
                f"more) a volume only {ref} uses"
                + "".join(f" ({why[p]})" for p in strangers if p in why)
                + ": nothing was deleted. Look at its disks again.")
        await self.delete(ref, force=force)

        def remove() -> list[str]:
            users = Users.read(conn, besides=ref.name)  # again: the domain is gone now
            left = []
            for path in dict.fromkeys(storage):
                if (why := users.why(path)) is not None:
                    left.append(f"{path} is kept: {why} now")
                    continue
                try:
                    owned[path].delete(0)
                except libvirt.libvirtError as e:
                    left.append(f"{path} ({(e.get_error_message() or str(e)).strip()})")
            return left

        left = await self.lv.call(remove, what=f"deleting the volumes of {ref.name}",
                                  within=max(self.timeout, 120))
        if left:
            raise OperationFailed(f"{ref} is deleted, but not all of its volumes: "
                                  f"{'; '.join(left)}.")
