"""A libvirt domain's name and description: ``rename_instance`` (``virDomainRename``, shut-off
domains only) and ``set_description`` (the domain's ``<description>``, through
``virDomainSetMetadata``).

- libvirt renames only a shut-off, persistent domain without snapshots (its snapshots' files
  are kept under the old name); corral says so before asking, in words. Everything libvirt
  derived from the old name when the domain was defined (e.g. an NVRAM file's path) keeps
  that name, as with ``virsh domrename``.
- The description goes to the saved definition and, while the domain runs, to the running
  one too, so it is the same whichever libvirt shows. libvirt announces the change (its
  metadata event): the row is read again, also when ``virsh desc`` changed it.
"""

from __future__ import annotations

import libvirt

from ..base import Backend
from ..errors import Conflict, InvalidInput, NotFound
from ..models import Instance, InstanceRef, InstanceStatus
from .connection import Connection
from .convert import status_of

NAME_MAX = 200
"""libvirt keeps files named after the domain (``<name>.xml``): well under NAME_MAX."""


def read_description(dom: libvirt.virDomain) -> str:
    """The domain's ``<description>`` (live while it runs), "" when it has none. Blocks:
    call it in the remote's thread."""
    try:
        return dom.metadata(libvirt.VIR_DOMAIN_METADATA_DESCRIPTION, None, 0) or ""
    except libvirt.libvirtError:  # VIR_ERR_NO_DOMAIN_METADATA: none; gone: the caller sees
        return ""


def name_problem(name: str) -> str | None:
    """Why libvirt cannot take ``name`` for a domain, or None."""
    if not name or name != name.strip():
        return "A domain name is needed, without spaces at either end."
    if "/" in name or any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "A domain name has no '/' and no control characters."
    if len(name) > NAME_MAX:
        return f"A domain name has at most {NAME_MAX} characters."
    return None


class Names(Backend):
    """``rename_instance`` and ``set_description`` of a libvirt remote."""

    lv: Connection
    _cpu: dict[str, tuple[int, float]]

    async def rename_instance(self, ref: InstanceRef, new_name: str) -> Instance:
        """Rename a shut-off domain.

        Raises:
            Conflict: it is not shut off, it has snapshots, or the name is taken.
            InvalidInput: a name libvirt cannot take.
        """
        problem = name_problem(new_name)
        if problem:
            raise InvalidInput(problem)
        dom = await self.lv.domain(ref)
        conn = await self.lv.live()

        def check() -> tuple[InstanceStatus, bool, int, bool]:
            taken = True
            try:
                conn.lookupByName(new_name)
            except libvirt.libvirtError as e:
                if e.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
                    raise
                taken = False
            return (status_of(dom.state()[0]), bool(dom.isPersistent()),
                    dom.snapshotNum(0), taken)

        status, persistent, snapshots, taken = await self.lv.call(
            check, what=f"reading {ref.name}")
        if new_name == ref.name:
            return await self.get_instance(ref)
        if status is not InstanceStatus.STOPPED or not persistent:
            raise Conflict(f"{ref} is {status.value}: libvirt renames only a shut-off domain. "
                           f"Shut it down first.")
        if snapshots:
            raise Conflict(f"{ref} has {snapshots} snapshot(s): libvirt cannot rename a domain "
                           f"that has snapshots. Delete them first.")
        if taken:
            raise Conflict(f"A domain named '{new_name}' already exists on {ref.remote}.")
        await self.lv.call(dom.rename, new_name, 0, what=f"renaming {ref.name}")
        self._cpu.pop(ref.name, None)
        return await self.get_instance(InstanceRef(ref.remote, new_name, ref.project))

    async def set_description(self, ref: InstanceRef, text: str) -> None:
        """Keep ``text`` as the domain's description (empty: none): in its saved definition
        and, while it runs, in the running domain too."""
        dom = await self.lv.domain(ref)

        def change() -> None:
            flags = 0
            if dom.isPersistent():
                flags |= libvirt.VIR_DOMAIN_AFFECT_CONFIG
            if dom.isActive():
                flags |= libvirt.VIR_DOMAIN_AFFECT_LIVE
            dom.setMetadata(libvirt.VIR_DOMAIN_METADATA_DESCRIPTION, text.strip() or None,
                            None, None, flags)

        try:
            await self.lv.call(change, what=f"saving the description of {ref.name}")
        except NotFound:
            raise NotFound(f"{ref} does not exist (any more)") from None
