"""Where an instance can be copied or moved, asked of the backends before anything is
tried (``Backend.copy_problem``): the UI offers as targets only the remotes with no
problem, so an LXD instance is not offered a libvirt remote, nor a libvirt domain a copy."""

from __future__ import annotations

from backends.libvirt.backend import LibvirtBackend
from backends.lxd import IncusBackend, LXDBackend
from backends.models import Remote, ResourceKind
from backends.qemu.backend import QEMUBackend


def _all():
    return {
        "lxd1": LXDBackend(Remote("lxd1", "lxd", "unix:///run/nothing.socket")),
        "lxd2": LXDBackend(Remote("lxd2", "lxd", "https://127.0.0.1:1")),
        "inc": IncusBackend(Remote("inc", "incus", "https://127.0.0.1:2")),
        "va": LibvirtBackend(Remote("va", "libvirt", "qemu:///system")),
        "vb": LibvirtBackend(Remote("vb", "libvirt", "qemu+ssh://root@host/system")),
        "qemu": QEMUBackend(Remote("qemu", "qemu", "/nonexistent/qemu")),
    }


def test_each_backend_says_where_its_instances_can_go():
    b = _all()
    assert b["lxd1"].copy_problem(b["lxd2"]) is None
    assert b["lxd1"].copy_problem(b["inc"], move=True) is None  # LXD <-> Incus
    assert b["inc"].copy_problem(b["lxd1"]) is None
    assert "same remote" in b["lxd1"].copy_problem(b["lxd1"])
    assert "not an LXD or Incus" in b["lxd1"].copy_problem(b["va"], move=True)
    assert b["va"].copy_problem(b["vb"], move=True) is None  # a live migration
    assert "does not copy" in b["va"].copy_problem(b["vb"])
    assert "only to another libvirt" in b["va"].copy_problem(b["lxd1"], move=True)
    assert "only to another libvirt" in b["va"].copy_problem(b["va"], move=True)
    # the contract's default: another remote of the same kind
    assert "is a lxd remote" in b["qemu"].copy_problem(b["lxd1"])


def test_volumes_and_images_copy_between_remotes_of_one_kind_their_own_included():
    b = _all()
    for kind in (ResourceKind.VOLUME, ResourceKind.IMAGE):
        assert b["lxd1"].object_copy_problem(b["lxd2"], kind) is None
        assert b["lxd1"].object_copy_problem(b["lxd1"], kind) is None  # e.g. <name>-copy
        plural = "volumes" if kind is ResourceKind.VOLUME else "images"
        assert b["lxd1"].object_copy_problem(b["inc"], kind) == (
            f"inc is a incus remote: {plural} copy only between remotes of the same kind.")
        assert b["va"].object_copy_problem(b["lxd1"], kind) is not None
