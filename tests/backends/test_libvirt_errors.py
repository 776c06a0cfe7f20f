"""libvirt's errors in corral's words, on the suite's private libvirtd: a fault of one
domain is that domain's failure, not a lost connection."""

from __future__ import annotations

import pytest
import pytest_asyncio

import lab_libvirt
from backends.errors import OperationFailed, Unreachable
from backends.models import InstanceStatus

from .libvirt_helpers import connected, define, virsh

live = pytest.mark.asyncio(loop_scope="module")
PREFIX = "lve-"


@pytest.fixture(scope="module")
def vlab(request):
    return lab_libvirt.session_lab(request)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lv(vlab):
    async with connected(vlab, "lve", PREFIX) as backend:
        yield backend


@live
async def test_a_missing_disk_file_is_the_domains_failure_not_a_lost_daemon(lv, vlab, guest):
    # libvirt says "Cannot access storage file '…': No such file or directory": those
    # words once made corral report the daemon as unreachable
    ref = define(vlab, lv, guest, PREFIX)
    disk = vlab.root / f"{ref.name}-0.qcow2"
    disk.unlink()
    with pytest.raises(OperationFailed) as failed:
        await lv.start(ref)
    assert not isinstance(failed.value, Unreachable)
    assert str(disk) in failed.value.message, failed.value.message
    # the connection is as it was: the domain is still listed, shut off
    listed = {i.name: i.status for i in await lv.list_instances()}
    assert listed[ref.name] is InstanceStatus.STOPPED
    assert "shut off" in virsh(vlab, "domstate", ref.name).stdout
