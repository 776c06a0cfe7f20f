"""Deleting a libvirt domain with its storage never takes a volume something else in the
daemon depends on, against the suite's private libvirtd (``tests/lab_libvirt.py``), read
back with ``virsh`` (not through corral):

- a volume another domain's qcow2 overlay is built on (made by libvirt, ``vol-create-as
  --backing-vol``, or beside it, ``qemu-img create -b``) is kept, and ``storage_offer``
  says why in words; so is a volume another domain uses as a disk too, also one attached
  to a running domain only (its live definition);
- along a chain ``base ← mid ← top``, each volume is kept while a volume above it exists,
  also where only a running domain's definition shows the chain (a file outside any pool
  in the middle);
- the uses are read again when deleting: a dependency that appears after the listing
  refuses the verb before anything is deleted, and one that appears after the domain is
  gone keeps that volume and says so.
"""

# ruff: noqa: F811 - pytest fixtures imported from test_libvirt_storage are parameters here
from __future__ import annotations

import contextlib
import subprocess
import uuid
from pathlib import Path

import pytest

from backends.errors import Conflict, OperationFailed

from .libvirt_helpers import image, virsh
from .test_libvirt_storage import PREFIX, define, in_pool, live, lv, names, pool, vlab  # noqa: F401


def overlay(vlab, pool, name: str, base: Path) -> Path:
    """A qcow2 volume of ``pool`` backed by ``base``, made by libvirt (as corral's create
    makes one)."""
    virsh(vlab, "vol-create-as", pool[0], f"{name}.qcow2", "16M", "--format", "qcow2",
          "--backing-vol", str(base), "--backing-vol-format", "qcow2")
    return pool[1] / f"{name}.qcow2"


def beside(path: Path, base: Path) -> Path:
    """A qcow2 overlay on ``base`` made with qemu-img, libvirt not told (its pool not
    refreshed); the backing file named relative to the overlay's directory."""
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b",
                    f"./{base.name}" if base.parent == path.parent else str(base), str(path)],
                   check=True)
    return path


@live
async def test_a_base_under_another_domains_overlay_is_kept_with_why(lv, vlab, guest, pool):
    tag = uuid.uuid4().hex[:4]
    base = in_pool(vlab, pool, f"{PREFIX}base{tag}")
    owner = define(vlab, lv, guest, [(base, "qcow2")])
    top = overlay(vlab, pool, f"{PREFIX}top{tag}", base)
    user = define(vlab, lv, guest, [(top, "qcow2")])

    offer = await lv.storage_offer(owner)
    assert offer.items == ()
    assert offer.kept == ((str(base), f"{base.name} is the backing file of {top.name}, "
                                      f"which is a disk of {user.name} (vda)"),)
    assert await lv.owned_storage(owner) == []
    with pytest.raises(Conflict, match=f"{base}.*backing file of {top.name}.*nothing was"):
        await lv.delete_with_storage(owner, [str(base)])
    assert owner.name in names(vlab) and base.exists()

    # the overlay's domain goes with its overlay: then the base is its owner's alone
    assert await lv.owned_storage(user) == [str(top)]
    await lv.delete_with_storage(user, [str(top)])
    assert not top.exists() and user.name not in names(vlab)
    assert await lv.owned_storage(owner) == [str(base)]

    # an overlay made beside libvirt, used by no domain at all, keeps its base too
    loose = beside(pool[1] / f"{PREFIX}loose{tag}.qcow2", base)
    try:
        offer = await lv.storage_offer(owner)
        assert offer.items == ()
        assert offer.kept == ((str(base), f"{base.name} is the backing file of "
                                          f"{loose.name}"),)
    finally:
        loose.unlink()
    await lv.delete_with_storage(owner, await lv.owned_storage(owner))
    assert not base.exists() and owner.name not in names(vlab)


@live
async def test_a_volume_two_domains_use_is_kept_also_attached_live_only(lv, vlab, guest,
                                                                        pool):
    tag = uuid.uuid4().hex[:4]
    shared, own = in_pool(vlab, pool, f"{PREFIX}sh{tag}"), in_pool(vlab, pool, f"{PREFIX}o{tag}")
    first = define(vlab, lv, guest, [(shared, "qcow2"), (own, "qcow2")])
    second = define(vlab, lv, guest, [(shared, "qcow2")])
    offer = await lv.storage_offer(first)
    assert offer.items == (str(own),)
    assert offer.kept == ((str(shared), f"{shared.name} is a disk of {second.name} (vda)"),)

    # a disk attached to a running domain only (not in its saved definition) is used too
    third = define(vlab, lv, guest, [(image(vlab, f"{PREFIX}t{tag}"), "qcow2")], nic=False)
    await lv.start(third)
    try:
        virsh(vlab, "attach-disk", third.name, str(own), "vdc", "--subdriver", "qcow2",
              "--live")
        offer = await lv.storage_offer(first)
        assert offer.items == ()
        assert dict(offer.kept)[str(own)] == f"{own.name} is a disk of {third.name} (vdc)"
    finally:
        with contextlib.suppress(Exception):
            await lv.stop(third, force=True)
    assert (await lv.storage_offer(first)).items == (str(own),)


@live
async def test_a_chain_keeps_each_volume_while_one_above_it_exists(lv, vlab, guest, pool):
    tag = uuid.uuid4().hex[:4]
    base = in_pool(vlab, pool, f"{PREFIX}b{tag}")
    mid = overlay(vlab, pool, f"{PREFIX}m{tag}", base)
    top = overlay(vlab, pool, f"{PREFIX}t{tag}", mid)
    lowest = define(vlab, lv, guest, [(base, "qcow2")])
    middle = define(vlab, lv, guest, [(mid, "qcow2")])
    upper = define(vlab, lv, guest, [(top, "qcow2")])

    offer = await lv.storage_offer(middle)
    assert offer.items == ()
    assert offer.kept == ((str(mid), f"{mid.name} is the backing file of {top.name}, which "
                                     f"is a disk of {upper.name} (vda)"),)
    assert (await lv.storage_offer(lowest)).items == ()
    assert await lv.owned_storage(upper) == [str(top)]

    # top goes: mid is its domain's own, base still under mid
    await lv.delete_with_storage(upper, [str(top)])
    assert await lv.owned_storage(middle) == [str(mid)]
    assert dict((await lv.storage_offer(lowest)).kept)[str(base)].startswith(
        f"{base.name} is the backing file of {mid.name}")
    # transitively: without mid's domain, base is still under mid (a volume of the pool)
    await lv.delete(middle)
    assert mid.exists()
    assert (await lv.storage_offer(lowest)).kept == (
        (str(base), f"{base.name} is the backing file of {mid.name}"),)
    virsh(vlab, "vol-delete", str(mid))
    assert await lv.owned_storage(lowest) == [str(base)]


@live
async def test_a_chain_through_a_file_outside_any_pool_is_seen_while_it_runs(lv, vlab,
                                                                            guest, pool):
    """base (a volume) ← mid (a file outside any pool) ← top (a volume): the pool lists
    top's backing file, mid, which is no volume; the running domain's definition lists the
    whole chain."""
    tag = uuid.uuid4().hex[:4]
    base = in_pool(vlab, pool, f"{PREFIX}b{tag}")
    owner = define(vlab, lv, guest, [(base, "qcow2")])
    mid = beside(vlab.root / f"{PREFIX}m{tag}.qcow2", base)
    top = beside(pool[1] / f"{PREFIX}t{tag}.qcow2", mid)  # libvirt takes no file as a base
    user = define(vlab, lv, guest, [(top, "qcow2")], nic=False)
    await lv.start(user)
    try:
        offer = await lv.storage_offer(owner)
        assert offer.items == ()
        assert offer.kept == ((str(base), f"{base.name} is the backing file of {mid}, which "
                                          f"is the backing file of {top.name}, which is a "
                                          f"disk of {user.name} (vda)"),)
    finally:
        with contextlib.suppress(Exception):
            await lv.stop(user, force=True)


@live
async def test_a_use_that_appears_before_the_delete_refuses_it(lv, vlab, guest, pool):
    tag = uuid.uuid4().hex[:4]
    own = in_pool(vlab, pool, f"{PREFIX}o{tag}")
    ref = define(vlab, lv, guest, [(own, "qcow2")])
    listed = await lv.owned_storage(ref)
    assert listed == [str(own)]
    late = overlay(vlab, pool, f"{PREFIX}late{tag}", own)  # after the dialog listed it
    try:
        with pytest.raises(Conflict, match=f"{own.name} is the backing file of {late.name}"
                                           f".*nothing was deleted"):
            await lv.delete_with_storage(ref, listed)
        assert ref.name in names(vlab) and own.exists()
    finally:
        virsh(vlab, "vol-delete", str(late))


@live
async def test_a_use_that_appears_after_the_domain_is_gone_keeps_the_volume(
        lv, vlab, guest, pool, monkeypatch):
    """The last check runs with the deletions, after the domain is deleted: a volume used
    by then is kept and named (here another domain takes it while the domain goes)."""
    tag = uuid.uuid4().hex[:4]
    own, other = in_pool(vlab, pool, f"{PREFIX}o{tag}"), in_pool(vlab, pool, f"{PREFIX}x{tag}")
    ref = define(vlab, lv, guest, [(own, "qcow2"), (other, "qcow2")])
    listed = await lv.owned_storage(ref)
    assert listed == sorted([str(own), str(other)])
    taker = f"{PREFIX}k{tag}"
    delete = lv.delete

    async def delete_then_take(victim, **kwargs):
        await delete(victim, **kwargs)
        define(vlab, lv, guest, [(own, "qcow2")], name=taker)

    monkeypatch.setattr(lv, "delete", delete_then_take)
    with pytest.raises(OperationFailed, match=f"{own} is kept: {own.name} is a disk of "
                                              f"{taker} \\(vda\\) now"):
        await lv.delete_with_storage(ref, listed)
    assert ref.name not in names(vlab) and taker in names(vlab)
    assert own.exists() and not other.exists()
