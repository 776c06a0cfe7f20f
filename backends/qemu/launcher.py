"""Starting a VM's QEMU: the accelerator it gets, its command line, and the detached launch
(the monitor then attaches to it).

Which accelerator: 'auto' is KVM when ``/dev/kvm`` is usable and KVM was not found broken
on this host (:mod:`.kvm`), else TCG; a launch that KVM refuses is reported so that the
caller can offer TCG.
"""

from __future__ import annotations

import asyncio
import os
import time

from ..errors import AcceleratorUnusable, OperationFailed
from ..models import InstanceRef
from .definition import VMDefinition, command_line
from .kvm import KVMWatch, kvm_error
from .machines import Machines
from .monitor import Monitor


def kvm_usable() -> bool:
    return os.access("/dev/kvm", os.R_OK | os.W_OK)


class Launcher:
    """Builds a VM's QEMU command line and starts it; remembers (in :attr:`kvm`) how KVM
    starts went on this host."""

    def __init__(self, vms: Machines, monitor: Monitor, kvm: KVMWatch,
                 default_accel: str = "auto") -> None:
        self.vms = vms
        self.monitor = monitor
        self.kvm = kvm
        self.default_accel = default_accel
        """The remote's setting, used where a VM's definition says 'auto'."""

    def is_auto(self, d: VMDefinition) -> bool:
        return d.accel == "auto" and self.default_accel == "auto"

    def accel(self, d: VMDefinition) -> str:
        """The accelerator ``d`` starts with: 'auto' is KVM when /dev/kvm is usable and
        KVM was not found broken on this host (:mod:`.kvm`), else TCG."""
        accel = d.accel if d.accel != "auto" else self.default_accel
        if accel == "auto":
            accel = "kvm" if kvm_usable() and not self.kvm.fallback.reason() else "tcg"
        return accel

    def argv(self, d: VMDefinition) -> list[str]:
        return command_line(d, self.vms.dir(d.name), self.vms.run_dir(d.name), self.accel(d))

    async def launch(self, ref: InstanceRef, d: VMDefinition,
                     pass_fds: tuple[int, ...] = ()) -> None:
        """Start the VM's QEMU detached and attach to it (:meth:`Monitor.adopt`);
        ``pass_fds``: descriptors QEMU inherits (the boot files ``d`` names as
        ``/dev/fd/N``).

        Raises:
            AcceleratorUnusable: KVM refused (``retry_slower`` when TCG may be tried).
            OperationFailed: QEMU refused (its last error line) or did not detach in 60 s.
        """
        vms = self.vms
        vms.busy[ref.name] = "being started"  # no listing attaches to it meanwhile
        try:
            await self._launch(ref, d, pass_fds)
        finally:
            vms.busy.pop(ref.name, None)
        await self.monitor.adopt(ref.name)

    async def _launch(self, ref: InstanceRef, d: VMDefinition,
                      pass_fds: tuple[int, ...]) -> None:
        vms = self.vms
        run = vms.run_dir(ref.name)
        run.mkdir(parents=True, exist_ok=True)
        os.chmod(run, 0o700)
        vms.clear_runtime(ref.name)
        vms.status.pop(ref.name, None)  # not "stopped": notice_outside_starts leaves it
        accel = self.accel(d)
        proc = await asyncio.create_subprocess_exec(
            *command_line(d, vms.dir(d.name), run, accel), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True, pass_fds=pass_fds)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), 60)
        except asyncio.TimeoutError:
            proc.kill()
            raise OperationFailed(f"QEMU did not start {ref} within 60 s.") from None
        if proc.returncode != 0:
            message = err.decode(errors="replace").strip().splitlines()
            last = message[-1] if message else f"exit {proc.returncode}"
            if accel == "kvm" and kvm_error(err.decode(errors="replace")):
                auto = self.is_auto(d)
                raise AcceleratorUnusable(
                    self.kvm.blame(f"QEMU could not start {ref} with KVM ({last})", auto),
                    retry_slower=auto)
            raise OperationFailed(f"QEMU refused to start {ref}: {last}")
        if accel == "kvm":
            self.kvm.note_start(ref.name, time.monotonic(), self.is_auto(d))
        else:
            self.kvm.forget(ref.name)
        vms.why.pop(ref.name, None)
        vms.status.pop(ref.name, None)
