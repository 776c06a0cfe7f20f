"""KVM that is present but does not work (nested virtualisation: QEMU aborts with
``kvm_buf_set_msrs: Assertion … failed``, or the guest hangs at its first instructions),
and the per-host fallback to TCG that corral remembers once it has seen that.

Three signs are read: QEMU refusing to start with a KVM error; QEMU ending within
:data:`EARLY_EXIT` seconds of a KVM start (an abort after ``-daemonize``, whose error
output is gone); a kernel booted with ``console=ttyS0`` printing nothing on its serial
port within :data:`SILENT_BOOT` seconds under KVM (it prints within a second when KVM
works). The fallback lives in the VM directory's ``.corral-kvm-fallback`` and holds until
the host kernel or QEMU changes; VMs set to ``auto`` then run with TCG; removing the file
tries KVM again."""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

from ..paths import UntrustedFile, read_owned

log = logging.getLogger(__name__)

FALLBACK = ".corral-kvm-fallback"
EARLY_EXIT = 5.0
"""An abort comes at once; a kill by hand this soon after a start is rare (and is then
blamed on KVM: the exit status of a daemonized QEMU is not ours to read)."""
SILENT_BOOT = 10.0
KVM_ERROR = re.compile(r"kvm_buf_set_msrs|failed to initiali[sz]e kvm|Could not access KVM|"
                       r"\bKVM_[A-Z_]+\b|kvm:|/dev/kvm", re.IGNORECASE)


def kvm_error(stderr: str) -> bool:
    """Whether QEMU's error output says KVM failed."""
    return bool(KVM_ERROR.search(stderr))


def _host() -> dict[str, str]:
    return {"kernel": os.uname().release}


class HostFallback:
    """Whether KVM was found broken on this host (for this kernel), and why."""

    def __init__(self, root: Path, qemu_version: str = "") -> None:
        self.path = root / FALLBACK
        self.qemu_version = qemu_version

    def reason(self) -> str:
        """Why KVM is not used here ("" when it may be)."""
        try:
            data = json.loads(read_owned(self.path))
        except (OSError, ValueError, UntrustedFile):  # (a planted file: as if none)
            return ""
        if not isinstance(data, dict) or data.get("kernel") != _host()["kernel"]:
            return ""
        if self.qemu_version and data.get("qemu") not in ("", self.qemu_version):
            return ""
        return str(data.get("reason") or "KVM did not work")

    def remember(self, reason: str) -> None:
        from .files import write_durably

        data = {**_host(), "qemu": self.qemu_version, "reason": reason}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_durably(self.path, (json.dumps(data, indent=2) + "\n").encode())
        except Exception as e:  # the fallback is a convenience
            log.warning("cannot remember the KVM fallback in %s: %s", self.path, e)

    def words(self) -> str:
        return (f"corral now starts VMs set to accelerator 'auto' with TCG on this host "
                f"(remove {self.path} to try KVM again).")


def expects_serial_output(kernel: str, cmdline: str) -> bool:
    """A directly booted kernel with its console on the first serial port."""
    return bool(kernel) and bool(re.search(r"(^|\s)console=ttyS0\b", cmdline))


class KVMWatch:
    """What a :class:`~backends.qemu.launcher.Launcher` knows of its KVM starts."""

    def __init__(self, root: Path) -> None:
        self.fallback = HostFallback(root)
        self.started: dict[str, tuple[float, bool]] = {}
        """VMs started with KVM: when (monotonic), and whether their accelerator was
        'auto' (so that TCG may replace it)."""

    def note_start(self, name: str, when: float, auto: bool) -> None:
        self.started[name] = (when, auto)

    def forget(self, name: str) -> None:
        self.started.pop(name, None)

    def early_exit(self, name: str, now: float) -> str:
        """The note for a VM whose QEMU ended unexpectedly ("" when KVM is not to blame)."""
        when, auto = self.started.pop(name, (0.0, False))
        if not when or now - when > EARLY_EXIT:
            return ""
        reason = f"QEMU ended {now - when:.0f} s after starting with KVM"
        return self.blame(reason, auto)

    def blame(self, reason: str, auto: bool) -> str:
        """Words for a KVM failure; with 'auto', the host fallback is recorded too."""
        text = f"{reason}: KVM does not work on this host (nested virtualisation?)."
        if auto:
            self.fallback.remember(reason)
            return f"{text} {self.fallback.words()} Start the VM again to use TCG."
        return f"{text} The VM is set to use KVM: set its accelerator to tcg or auto."
