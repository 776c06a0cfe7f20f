"""Local QEMU VMs through QMP (no daemon)."""

from .backend import QEMUBackend, default_qemu_dir, qemu_remote

__all__ = ["QEMUBackend", "default_qemu_dir", "qemu_remote"]
