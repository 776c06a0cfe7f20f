"""Consoles of QEMU VMs: the first serial port, the VGA text screen and the graphical
screen (QEMU's VNC socket), all served by corral's detached console server, so they
survive corral and can be re-attached."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from ..base import Backend
from ..errors import Conflict, InvalidInput, Unsupported
from ..models import InstanceRef
from .machines import Machines

if TYPE_CHECKING:  # the console modules (websockets, Pillow) load with the first console
    from ..console import WebSocketSession
    from ..console.screen import ScreenSession


class Consoles(Backend):
    """``open_console`` (``console``: serial, ``vga``: VGA text), ``open_display`` and
    ``display_viewer_argv`` (the graphical screen)."""

    vms: Machines
    serial_log_max: int

    async def open_console(self, ref: InstanceRef, *, width: int = 80, height: int = 24,
                           kind: str = "console") -> WebSocketSession:
        """The VM's first serial port (``kind="console"``, ttyS0 in the guest) or its VGA
        text screen (``kind="vga"``: firmware, boot loader, text installers; read as
        ``docs/protocols.md``, section "VGA text", says), served by corral's console server
        (:mod:`backends.console.server`). Detach and re-attach freely: QEMU and the server
        keep running; what the guest printed meanwhile is shown on attach (serial: the
        chardev's log; VGA: the current screen)."""
        from ..console import attach_local
        from ..console.vga import SPECIAL_CHORDS

        d = self.vms.definition(ref.name)
        if self.vms.pid(ref.name) is None:
            raise Conflict(f"{ref} is not running: start it to use its console.")
        run = self.vms.run_dir(ref.name)
        if kind == "console":
            return await attach_local(
                f"{ref} serial", str(run / "serial.ws"),
                ["--unix", str(run / "serial.sock"), "--log", str(run / "serial.log"),
                 "--log-max", str(self.serial_log_max)],
                width=width, height=height, resizable=False)
        if kind != "vga":
            raise InvalidInput(f"Unknown console type '{kind}'.")
        if d.firmware == "uefi":
            raise Unsupported(f"{ref} boots UEFI, which draws graphics, not VGA text: "
                              f"use its serial console, or its graphical screen (V).")
        if not (run / "console-qmp.sock").exists():
            raise Unsupported(f"{ref} was started by an older corral without a console "
                              f"monitor: restart it to see its VGA text screen.")
        return await attach_local(
            f"{ref} VGA", str(run / "vga.ws"), ["--vga-qmp", str(run / "console-qmp.sock")],
            special_keys=tuple(SPECIAL_CHORDS), resizable=False)

    async def open_display(self, ref: InstanceRef, *, fps: float = 10.0) -> ScreenSession:
        """The VM's screen as QEMU draws it (any mode: text, framebuffer, desktop), read
        from its private VNC socket by corral's console server (``--vnc``), which keeps
        the connection while viewers come and go."""
        from ..console import ensure_server
        from ..console.client import local_opener
        from ..console.screen import ScreenSession

        self.vms.definition(ref.name)
        if self.vms.pid(ref.name) is None:
            raise Conflict(f"{ref} is not running: start it to see its screen.")
        run = self.vms.run_dir(ref.name)
        vnc = run / "vnc.sock"
        if not vnc.exists():
            raise Unsupported(f"{ref} was started by an older corral without a screen "
                              f"socket: restart it to see its screen here.")
        sock = str(run / "display.ws")
        source = ["--vnc", str(vnc), "--fps", str(fps)]
        await ensure_server(sock, source)
        return ScreenSession(f"{ref} screen",
                             local_opener(sock, lambda: ensure_server(sock, source)),
                             fps=fps, vnc_path=str(vnc))

    def display_viewer_argv(self, ref: InstanceRef) -> list[str]:
        """remote-viewer (virt-viewer) or TigerVNC's vncviewer on the VM's VNC socket,
        whichever is installed (remote-viewer when neither is)."""
        vnc = self.vms.run_dir(ref.name) / "vnc.sock"
        if not shutil.which("remote-viewer") and shutil.which("vncviewer"):
            return ["vncviewer", str(vnc)]
        return ["remote-viewer", f"vnc+unix://{vnc}"]
