"""The graphical screen of a libvirt domain (``DISPLAY``): its VNC ``<graphics>`` device,
drawn by corral's console server as a local QEMU VM's screen is.

On a local connection (``qemu:///system``, a unix socket) libvirt hands corral a socket
already connected to the domain's VNC server (``virDomainOpenGraphicsFD`` with
``SKIPAUTH``: whatever the device listens on, a unix socket, an address or nothing, and
whatever password it has). That descriptor is given to a new console server (``--vnc-fd``),
which holds the connection while viewers come and go, outlives corral, and ends with the
domain; a server found dead is started again on a fresh descriptor. The server's socket is
private, in corral's runtime directory under the remote's URI and the domain's UUID.

Over ``qemu+ssh://`` a descriptor cannot cross SSH: the screen is refused in words (the
capability is not declared for a remote URI); ``virt-viewer --connect URI NAME`` shows it.
"""

from __future__ import annotations

import hashlib
import os
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

import libvirt

from ..base import Backend
from ..errors import Conflict, Unsupported
from ..models import Capability, Instance, InstanceRef, InstanceStatus
from ..paths import runtime_dir
from .connection import Connection

if TYPE_CHECKING:  # the console modules (websockets, Pillow) load with the first screen
    from ..console.screen import ScreenSession

SHOWN = (InstanceStatus.RUNNING, InstanceStatus.FROZEN)


def vnc_index(xml: str) -> int | None:
    """The index (among the domain's ``<graphics>`` devices, as libvirt counts them for
    ``openGraphicsFD``) of its first VNC device, or None."""
    try:
        devices = ET.fromstring(xml).findall("./devices/graphics")
    except ET.ParseError:
        return None
    for i, graphics in enumerate(devices):
        if graphics.get("type") == "vnc":
            return i
    return None


def description_and_vnc(dom: libvirt.virDomain) -> tuple[str, bool]:
    """The domain's ``<description>`` and whether it has a VNC screen, from one read of its
    XML (live while it runs). Blocks: call it in the remote's thread."""
    try:
        root = ET.fromstring(dom.XMLDesc(0))
    except (libvirt.libvirtError, ET.ParseError):  # gone meanwhile: the caller sees
        return "", False
    vnc = any(g.get("type") == "vnc" for g in root.findall("./devices/graphics"))
    return root.findtext("description") or "", vnc


class Display(Backend):
    """``open_display`` and ``display_viewer_argv`` of a libvirt domain."""

    lv: Connection

    def instance_capabilities(self, instance: Instance) -> frozenset[Capability]:
        """The screen only while the domain runs (or is paused) with a VNC device."""
        caps = super().instance_capabilities(instance)
        if instance.status not in SHOWN or not instance.extra.get("vnc"):
            caps -= {Capability.DISPLAY}
        return caps

    def _local_only(self, ref: InstanceRef) -> None:
        if Capability.DISPLAY not in self.capabilities:
            raise Unsupported(
                f"corral shows the screen of a domain on a local libvirt connection only: "
                f"libvirt hands over the VNC connection as a file descriptor, which cannot "
                f"cross SSH ({self.remote.address}). Use virt-viewer --connect "
                f"'{self.remote.address}' {ref.name}.")

    def _display_socket(self, uuid: str) -> str:
        remote = hashlib.sha256(self.remote.address.encode()).hexdigest()[:12]
        return str(runtime_dir("libvirt", remote, uuid) / "display.ws")

    async def open_display(self, ref: InstanceRef, *, fps: float = 10.0) -> ScreenSession:
        """The domain's screen through its VNC device (local connections only)."""
        from ..console import ensure_server, server_alive
        from ..console.client import local_opener
        from ..console.screen import ScreenSession

        self._local_only(ref)
        dom = await self.lv.domain(ref)

        def facts() -> tuple[str, bool, str]:
            return dom.UUIDString(), bool(dom.isActive()), dom.XMLDesc(0)

        uuid, active, xml = await self.lv.call(facts, what=f"reading {ref.name}")
        if not active:
            raise Conflict(f"{ref} is not running: start it to see its screen.")
        index = vnc_index(xml)
        if index is None:
            raise Unsupported(f"{ref} has no VNC screen (a <graphics type='vnc'> device): "
                              f"corral shows VNC screens only.")
        sock = self._display_socket(uuid)
        source = ["--fps", str(fps)]

        async def start() -> None:
            if server_alive(sock):
                return
            fd = await self.lv.call(dom.openGraphicsFD, index,
                                    libvirt.VIR_DOMAIN_OPEN_GRAPHICS_SKIPAUTH,
                                    what=f"opening the screen of {ref.name}")
            try:
                await ensure_server(sock, [*source, "--vnc-fd", str(fd)], pass_fds=(fd,))
            finally:
                os.close(fd)

        await start()
        return ScreenSession(f"{ref} screen", local_opener(sock, start), fps=fps)

    def display_viewer_argv(self, ref: InstanceRef) -> list[str]:
        """virt-viewer on the same libvirt URI (it finds the device and its listen)."""
        self._local_only(ref)
        return ["virt-viewer", "--connect", self.remote.address, ref.name]
