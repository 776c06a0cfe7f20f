"""The graphical screen of a libvirt domain (``DISPLAY``): its VNC ``<graphics>`` device,
drawn by corral's console server as a local QEMU VM's screen is.

On a local connection (``qemu:///system``, a unix socket) libvirt hands corral a socket
already connected to the domain's VNC server (``virDomainOpenGraphicsFD`` with
``SKIPAUTH``: whatever the device listens on, a unix socket, an address or nothing, and
whatever password it has). That descriptor is given to a new console server (``--vnc-fd``),
which holds the connection while viewers come and go, outlives corral, and ends with the
domain; a server found dead is started again on a fresh descriptor. The server's socket is
private, in corral's runtime directory under the remote's URI and the domain's UUID.

Over ``qemu+ssh://`` a descriptor cannot cross SSH: corral reads the running domain's
XML for where its VNC server listens on the server (a unix socket, or an address and the
port autoport gave it) and asks the host's SSH master (``ssh_tunnel.py``, the connection
libvirt's own transport runs in, the host key pinned as the URI says) for a stream to it; that
connected socket is handed to the console server the same way. A device that listens
nowhere (``<listen type='none'/>``) or wants a password is refused in words, as is a
remote reached without SSH (TCP, TLS); ``virt-viewer --connect URI NAME`` shows those.
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
from .uri import is_remote

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


def vnc_target(xml: str) -> tuple[str, str]:
    """Where the first VNC device of a running domain's XML listens, as seen on its host:
    ``(target, "")`` with a unix socket path or ``host:port``, else ``("", why not)``."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError:
        return "", "its definition could not be read"
    graphics = next((g for g in root.findall("./devices/graphics")
                     if g.get("type") == "vnc"), None)
    if graphics is None:
        return "", "it has no VNC screen"
    if graphics.get("passwd") is not None:
        return "", "its VNC screen has a password (corral types none)"
    listens = graphics.findall("listen")
    path = graphics.get("socket") or next(
        (lst.get("socket") for lst in listens if lst.get("type") == "socket"), None)
    if path:
        return path, ""
    if any(lst.get("type") == "none" for lst in listens):
        return "", "its VNC screen listens nowhere (only a local connection reaches it)"
    port = graphics.get("port", "")
    if not port.isdigit() or int(port) <= 0:
        return "", "its VNC screen has no port yet"
    address = graphics.get("listen") or next(
        (lst.get("address") for lst in listens if lst.get("address")), "")
    if address in ("", "0.0.0.0", "::"):  # everywhere: the server itself reaches it
        address = "localhost"
    return (f"[{address}]" if ":" in address else address) + f":{port}", ""


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
                f"corral shows the screen of a domain on a local or SSH libvirt connection "
                f"only: libvirt hands over the VNC connection as a file descriptor, which "
                f"cannot cross the network, and corral reaches the server's VNC listen "
                f"through SSH ({self.remote.address}). Use virt-viewer --connect "
                f"'{self.remote.address}' {ref.name}.")

    def _display_socket(self, uuid: str) -> str:
        remote = hashlib.sha256(self.remote.address.encode()).hexdigest()[:12]
        return str(runtime_dir("libvirt", remote, uuid) / "display.ws")

    async def open_display(self, ref: InstanceRef, *, fps: float = 10.0) -> ScreenSession:
        """The domain's screen through its VNC device (local and SSH connections)."""
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
            if is_remote(self.remote.address):
                fd = await self._tunnelled_fd(dom, ref)
            else:
                fd = await self.lv.call(dom.openGraphicsFD, index,
                                        libvirt.VIR_DOMAIN_OPEN_GRAPHICS_SKIPAUTH,
                                        what=f"opening the screen of {ref.name}")
            try:
                await ensure_server(sock, [*source, "--vnc-fd", str(fd)], pass_fds=(fd,))
            finally:
                os.close(fd)

        await start()
        return ScreenSession(f"{ref} screen", local_opener(sock, start), fps=fps)

    async def _tunnelled_fd(self, dom: libvirt.virDomain, ref: InstanceRef) -> int:
        """A descriptor connected to the domain's VNC server on a remote host, through the
        host's SSH master (read again each time: a restarted domain listens elsewhere)."""
        xml = await self.lv.call(dom.XMLDesc, libvirt.VIR_DOMAIN_XML_SECURE,  # a password
                                 what=f"reading {ref.name}")
        target, why = vnc_target(xml)
        if not target:
            raise Unsupported(f"corral cannot show the screen of {ref}: {why}. Use "
                              f"virt-viewer --connect '{self.remote.address}' {ref.name}.")
        stream = await self.lv.master().stream(target, max(self.lv.timeout, 15),
                                               f"the VNC screen of {ref.name}")
        return stream.detach()

    def display_viewer_argv(self, ref: InstanceRef) -> list[str]:
        """virt-viewer on the same libvirt URI (it finds the device and its listen)."""
        self._local_only(ref)
        return ["virt-viewer", "--connect", self.remote.address, ref.name]
