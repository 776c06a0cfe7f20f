"""A ``qemu+ssh://`` URI with ``known_hosts=`` (the host key pinned to that file) against the
suite's private libvirtd and its sshd (``tests/lab_libvirt.py``): libvirt runs the ``ssh``
program through corral's ControlMaster, which pins the key (``backends/libvirt/ssh_tunnel.py``),
never libvirt's in-process libssh client.

- A pool of 300 volumes is listed ten times (each followed by a lookup), the domain
  capabilities read and the domains listed, in a corral process of its own (a crash is
  its exit status, not the suite's end). libvirt 9.0's libssh client crashed the process
  on such listings on the lab (not reproduced by this test) and handed each reply over
  only at the next wake-up of libvirt's event loop (3 s with keepalive at 3 s, 5 s with
  it at 30 s: measured with this test on the libssh code). With keepalive at 30 s, all 22
  replies come within one interval (a stalled client needs over 60 s).
- A changed pinned key (also in a hashed file) and an unknown one are refused in words,
  at once, nothing added to the file, no connection left.
- A changed pinned key, an unknown one (also in a hashed file) are refused in words, at
  once, nothing added to the file, no connection left.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import libvirt
import pytest

import lab_libvirt
from backends import get_backend
from backends.errors import AuthError
from backends.models import Remote

from .test_libvirt_display_ssh import ssh_connections

live = pytest.mark.asyncio(loop_scope="module")
ROOT = Path(__file__).resolve().parents[2]
VOLUMES = 300

LISTER = """
import asyncio, json, sys, time
from backends import get_backend
from backends.libvirt import connection
from backends.models import Remote

async def main():
    uri, pool, keepalive, ROUNDS = sys.argv[1], sys.argv[2], int(sys.argv[3]), 10
    connection.KEEPALIVE_INTERVAL = keepalive
    lv = get_backend(Remote(name="k", kind="libvirt", address=uri), timeout=120)
    await lv.connect()
    conn = await lv.lv.live()
    found = await lv.lv.call(conn.storagePoolLookupByName, pool)
    took = {"listings": []}
    t = time.monotonic()
    for _ in range(ROUNDS):
        s = time.monotonic()
        names = await lv.lv.call(lambda: [v.name() for v in found.listAllVolumes(0)])
        await lv.lv.call(found.storageVolLookupByName, names[-1])  # crashed here (libssh)
        took["listings"].append(round(time.monotonic() - s, 4))
    await lv.lv.call(conn.getDomainCapabilities)
    await lv.list_instances()
    took["all"] = time.monotonic() - t
    print(json.dumps({"volumes": len(names), "uri": lv.lv.uri, **took}), flush=True)
    await lv.close()

asyncio.run(main())
"""
"""A corral process that lists a pool over ``uri`` with libvirt's keepalive interval set."""


@pytest.fixture(scope="module")
def vlab(request):
    return lab_libvirt.session_lab(request)


@pytest.fixture(scope="module")
def big_pool(vlab):
    """A directory pool of :data:`VOLUMES` empty raw volumes (removed at the end)."""
    name = f"lvkpool{uuid.uuid4().hex[:6]}"
    path = vlab.root / "pools" / name
    path.mkdir(parents=True)
    for i in range(VOLUMES):
        (path / f"corral-volume-{i:03d}-{uuid.uuid4().hex}.img").touch()
    conn = libvirt.open(vlab.unix_uri)
    made = conn.storagePoolDefineXML(f"<pool type='dir'><name>{name}</name><target>"
                                     f"<path>{path}</path></target></pool>")
    made.create(0)
    yield name
    made.destroy()
    made.undefine()
    conn.close()
    shutil.rmtree(path)


@live
@pytest.mark.parametrize("keepalive", [3, 30])
async def test_a_pool_of_300_volumes_over_a_pinned_uri_neither_crashes_nor_stalls(
        vlab, big_pool, keepalive):
    before = ssh_connections(vlab)
    lister = await asyncio.create_subprocess_exec(
        sys.executable, "-c", LISTER, vlab.ssh_uri(), big_pool, str(keepalive), cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(lister.communicate(), 300)
    finally:
        if lister.returncode is None:
            lister.kill()
            await lister.wait()
    assert lister.returncode == 0, (f"the corral process ended with {lister.returncode} "
                                    f"(-11: it crashed): {err.decode()[-2000:]}")
    seen = json.loads(out.decode().splitlines()[-1])
    print(f"keepalive {keepalive} s: listing and lookup {seen['listings']}, "
          f"everything {seen['all']:.3f} s")
    assert seen["volumes"] == VOLUMES
    # libssh handed each reply over at the next wake-up of libvirt's event loop (3 s with
    # keepalive at 3 s, 5 s at 30 s): 22 replies together within one interval of 30 s
    if keepalive == 30:
        assert seen["all"] < keepalive, seen
    assert seen["uri"].startswith("qemu+ssh://") and "command=" in seen["uri"]
    assert "libssh" not in seen["uri"] and "known_hosts" not in seen["uri"]
    await _until(lambda: ssh_connections(vlab) == before, "the process's master to end")


@live
@pytest.mark.parametrize("hashed", [False, True])
async def test_a_changed_pinned_key_is_refused_in_words(vlab, tmp_path, hashed):
    pinned = tmp_path / "known_hosts"
    shutil.copy(vlab.ssh / "known_hosts_changed", pinned)
    if hashed:  # ssh-keygen -H: the host names only as hashes
        subprocess.run(["ssh-keygen", "-H", "-f", str(pinned)], check=True,
                       capture_output=True)
        assert str(vlab.port) not in pinned.read_text()
    text = pinned.read_text()
    before = ssh_connections(vlab)
    err = await _refused(vlab.ssh_uri(known_hosts=pinned))
    assert err.message.startswith("The SSH host key of root@127.0.0.1:"), err.message
    assert f"is not the one pinned for it ({pinned})" in err.message
    assert pinned.read_text() == text and ssh_connections(vlab) == before


@live
async def test_an_unknown_key_is_refused_in_words_and_not_added(vlab, tmp_path):
    pinned = tmp_path / "known_hosts"
    pinned.write_text("")
    err = await _refused(vlab.ssh_uri(known_hosts=pinned))
    assert f"is not known ({pinned})" in err.message, err.message
    assert pinned.read_text() == ""


async def _refused(uri: str) -> AuthError:
    backend = get_backend(Remote(name="lvk", kind="libvirt", address=uri), timeout=30)
    try:
        with pytest.raises(AuthError) as refused:
            await asyncio.wait_for(backend.connect(), 60)  # a prompt would hang
    finally:
        await backend.close()
    return refused.value


async def _until(check, what: str, timeout: float = 30) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)
