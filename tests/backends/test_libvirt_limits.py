"""Resource limits of the libvirt backend against the suite's private libvirtd
(``tests/lab_libvirt.py``), read back from libvirt's own XML (not through corral): each
limit says before it is applied whether it applies live or at the next start; a shut-off
domain's changes are saved; a running domain gets vCPUs hot-added and its balloon moved
(the guest's virtio-balloon driver gives the memory back), fewer vCPUs and a domain without
a balloon wait for the next start; a value over a maximum or a malformed one is refused in
words with nothing changed."""

from __future__ import annotations

import asyncio
import time

import pytest
import pytest_asyncio

import lab_libvirt
from backends.errors import InvalidInput

from .libvirt_helpers import connected, define, domain_xml

live = pytest.mark.asyncio(loop_scope="module")
PREFIX = "lvl-"
MiB = 1024  # KiB


@pytest.fixture(scope="module")
def vlab(request):
    return lab_libvirt.session_lab(request)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lv(vlab):
    async with connected(vlab, "lvl", PREFIX) as backend:
        yield backend


def shape(vlab, name: str, *, saved: bool = False) -> tuple[int, int, int, int]:
    """(vCPUs, max vCPUs, balloon KiB, memory KiB) as libvirt holds them."""
    root = domain_xml(vlab, name, saved=saved)
    vcpu = root.find("vcpu")
    return (int(vcpu.get("current", vcpu.text)), int(vcpu.text),
            int(root.findtext("currentMemory")), int(root.findtext("memory")))


async def fields(lv, ref) -> dict[str, tuple[str, str, str]]:
    return {f.key: (f.value, f.applies, f.pending) for f in await lv.get_limits(ref)}


@live
async def test_a_shut_off_domains_limits_apply_at_the_next_start(lv, vlab, guest):
    ref = define(vlab, lv, guest, PREFIX, formats=(), vcpus=2, current_vcpus=1,
                 memory_mib=256, balloon=True)
    assert await fields(lv, ref) == {
        "cpus": ("1", "restart", ""), "cpus_max": ("2", "restart", ""),
        "memory": ("256MiB", "restart", ""), "memory_max": ("256MiB", "restart", ""),
        "disk": ("", "unsupported", "")}  # no disk (test_libvirt_storage.py resizes one)
    assert await lv.set_limits(ref, {"cpus": "2", "memory": "192"}) == {
        "cpus": "restart", "memory": "restart"}
    assert shape(vlab, ref.name) == (2, 2, 192 * MiB, 256 * MiB)

    for change, words in (({"cpus": "3"}, r"vCPUs must be from 1 to 2: raise 'vCPUs \(max\)'"),
                          ({"memory": "300MiB"}, "The balloon can give at most 256MiB"),
                          ({"cpus": "two"}, "not a number of vCPUs"),
                          ({"cpus": "0"}, "not a number of vCPUs"),
                          ({"memory": "lots"}, "is not a size"),
                          ({"memory": "16MiB"}, "less than 32MiB"),
                          ({"swap": "1G"}, "Unknown resource 'swap'"),
                          ({"cpus_max": "100000"}, r"vCPUs \(max\) must be from 1 to \d+"),
                          ({"cpus": "1", "memory": "1TiB"}, "at most 256MiB")):
        with pytest.raises(InvalidInput, match=words):
            await lv.set_limits(ref, change)
    assert shape(vlab, ref.name) == (2, 2, 192 * MiB, 256 * MiB)  # nothing changed

    # the maximums, and in the same change values up to them
    assert await lv.set_limits(ref, {"cpus_max": "3", "memory_max": "320MiB", "cpus": "3",
                                     "memory": "320MiB"}) == {
        "cpus_max": "restart", "memory_max": "restart", "cpus": "restart",
        "memory": "restart"}
    assert shape(vlab, ref.name) == (3, 3, 320 * MiB, 320 * MiB)
    # lower maximums take the values down with them
    await lv.set_limits(ref, {"cpus_max": "1", "memory_max": "128MiB"})
    assert shape(vlab, ref.name) == (1, 1, 128 * MiB, 128 * MiB)


async def _until(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        await asyncio.sleep(0.5)


@live
async def test_a_running_domain_gets_vcpus_and_memory_live_up_to_its_maximums(lv, vlab, guest):
    ref = define(vlab, lv, guest, PREFIX, formats=(), vcpus=2, current_vcpus=1,
                 memory_mib=256, balloon=True)
    plain = define(vlab, lv, guest, PREFIX, formats=(), memory_mib=128)  # no balloon
    await lv.start(ref)
    await lv.start(plain)
    try:
        assert await fields(lv, ref) == {
            "cpus": ("1", "live", ""), "cpus_max": ("2", "restart", ""),
            "memory": ("256MiB", "live", ""), "memory_max": ("256MiB", "restart", ""),
            "disk": ("", "unsupported", "")}
        assert await lv.set_limits(ref, {"cpus": "2"}) == {"cpus": "live"}
        assert shape(vlab, ref.name)[0] == 2 and shape(vlab, ref.name, saved=True)[0] == 2
        assert await lv.set_limits(ref, {"memory": "160MiB"}) == {"memory": "live"}
        assert shape(vlab, ref.name, saved=True)[2] == 160 * MiB
        # the guest's balloon driver gives the memory back; libvirt hears of it
        await _until(lambda: shape(vlab, ref.name)[2] == 160 * MiB, 120,
                     f"the balloon at 160 MiB ({shape(vlab, ref.name)})")

        with pytest.raises(InvalidInput, match="vCPUs must be from 1 to 2"):
            await lv.set_limits(ref, {"cpus": "3"})
        with pytest.raises(InvalidInput, match="at most 256MiB"):
            await lv.set_limits(ref, {"memory": "300MiB"})
        assert shape(vlab, ref.name)[:2] == (2, 2)

        # fewer vCPUs, and more memory than the running domain has: the next start
        assert await lv.set_limits(ref, {"cpus": "1"}) == {"cpus": "restart"}
        assert shape(vlab, ref.name)[0] == 2 and shape(vlab, ref.name, saved=True)[0] == 1
        assert await lv.set_limits(ref, {"memory_max": "384MiB", "memory": "320MiB"}) == {
            "memory_max": "restart", "memory": "restart"}
        now = await fields(lv, ref)
        assert now["cpus"] == ("2", "restart", "1")  # all vCPUs are in: none to add live
        assert now["memory_max"] == ("256MiB", "restart", "384MiB")
        assert now["memory"] == ("160MiB", "live", "320MiB")
        assert shape(vlab, ref.name)[2:] == (160 * MiB, 256 * MiB)

        # without a balloon device, memory waits for the next start
        memory = {f.key: f for f in await lv.get_limits(plain)}["memory"]
        assert memory.applies == "restart" and "no balloon device" in memory.hint
        assert await lv.set_limits(plain, {"memory": "96MiB"}) == {"memory": "restart"}
        assert shape(vlab, plain.name)[2] == 128 * MiB
        assert shape(vlab, plain.name, saved=True)[2] == 96 * MiB
        assert (await fields(lv, plain))["memory"] == ("128MiB", "restart", "96MiB")
    finally:
        await lv.stop(ref, force=True)
        await lv.stop(plain, force=True)
