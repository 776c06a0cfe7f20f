"""The full lifecycle of hosted LXD/Incus instances against the real lab daemons: backups to
a file and back onto another daemon, clone, copy and move between lxd1 ('local', unix
socket) and lxd2 ('lab2', HTTPS), LXD → Incus ('inc1'), rename and description, images,
passwords, NICs and the operations list. Every effect is checked with the real CLI."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest
from backend_checks import names

from backends import get_backend
from backends.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    OperationFailed,
    Unreachable,
    Unsupported,
)
from backends.lxd.guest import check_addresses
from backends.models import ImageInfo, InstanceRef, InstanceStatus
from backends.remotes import discover

PASSWORD = "Corral-Pw-7f3e9a"  # searched for in the captured logs

# Debian's busybox has no chpasswd applet: the test image gets this one (the password goes
# through stdin to mkpasswd, never into an argv). It reads until end of input, so it also
# proves that corral closes stdin.
CHPASSWD = r"""#!/bin/sh
status=0
while IFS= read -r line; do
  user=${line%%:*}; pass=${line#*:}
  if ! grep -q "^$user:" /etc/shadow; then
    echo "chpasswd: unknown user '$user'" >&2; status=1; continue
  fi
  hash=$(printf '%s\n' "$pass" | mkpasswd -m sha512) || { status=1; continue; }
  awk -F: -v u="$user" -v h="$hash" 'BEGIN{OFS=":"} $1==u{$2=h} {print}' /etc/shadow \
    > /etc/shadow.new && cat /etc/shadow.new > /etc/shadow && rm -f /etc/shadow.new
done
exit $status
"""


@pytest.fixture
async def lxd(lab, lab_env):
    """Connected backends for 'local' (lxd1), 'lab2' (lxd2) and 'inc1' (incus1)."""
    remotes = {r.name: r for r in discover(lab_env).remotes}
    backends = {}
    for name in ("local", "lab2", "inc1"):
        backends[name] = get_backend(remotes[name], timeout=10)
        await backends[name].connect()
    yield backends, remotes
    for b in backends.values():
        await b.close()


def user_list(lab, remote):
    """`lxc list <remote>:` as the lab's user runs it (its remotes: local = lxd1, lab2)."""
    r = subprocess.run(["lxc", "list", f"{remote}:", "--format", "csv", "-c", "n"],
                       env=lab.env(), capture_output=True, text=True, check=True,
                       stdin=subprocess.DEVNULL, timeout=60)
    return {line.strip() for line in r.stdout.splitlines() if line.strip()}


def snapshots(daemon, name):
    data = json.loads(daemon.cli("query", f"/1.0/instances/{name}/snapshots").stdout)
    return sorted(u.rsplit("/", 1)[-1] for u in data)


def status(daemon, name):
    return json.loads(daemon.cli("query", f"/1.0/instances/{name}").stdout)["status"]


def ref(remote, name):
    return InstanceRef(remote, name)


def snap(daemon, name, snapshot):
    if daemon.kind == "incus":
        daemon.cli("snapshot", "create", name, snapshot)
    else:
        daemon.cli("snapshot", name, snapshot)


def make(daemon, name, *, start=False, snapshot=""):
    daemon.cli("init", "busybox", name)
    if snapshot:
        snap(daemon, name, snapshot)
    if start:
        daemon.cli("start", name)


def gone(daemon, *instances):
    for n in instances:
        daemon.cli("delete", "--force", n, check=False)


# Pure checks ------------------------------------------------------------------------------


def test_address_checks_in_words():
    assert check_addresses("10.0.0.5", 4, many=False, label="IPv4") == "10.0.0.5"
    assert check_addresses(" 10.0.0.5, 10.0.0.6 ", 4, many=True, label="IPv4") \
        == "10.0.0.5,10.0.0.6"
    assert check_addresses("fd00::0:5", 6, many=False, label="IPv6") == "fd00::5"
    for bad, words in (("10.0.0.300", "not an IPv4"), ("10.0.0.5/24", "without a /prefix"),
                       ("fd00::5", "IPv6 address, not IPv4"),
                       ("10.0.0.5,10.0.0.6", "one address only")):
        with pytest.raises(InvalidInput, match=re.escape(words)):
            check_addresses(bad, 4, many=False, label="IPv4")


# 1-2. Backups -----------------------------------------------------------------------------


async def test_export_from_lxd1_and_import_on_lxd2_and_incus(lxd, lab, unique, tmp_path):
    backends, _ = lxd
    c = unique()
    make(lab.lxd1, c, snapshot="snap0")
    lab.lxd1.cli("config", "set", c, "user.marker", "from-lxd1")
    target = tmp_path / "backup.tar.gz"
    seen: list[str] = []
    try:
        started = time.monotonic()
        size = await backends["local"].export_instance(ref("local", c), str(target),
                                                       progress=seen.append)
        print(f"\nexport: {size} bytes in {time.monotonic() - started:.2f}s; {seen}")
        assert target.stat().st_size == size > 100_000
        assert not Path(str(target) + ".part").exists()
        assert any(s.startswith("downloading") and "MiB" in s for s in seen)
        # the server-side backup was deleted
        assert json.loads(lab.lxd1.cli("query", f"/1.0/instances/{c}/backups").stdout) == []

        with pytest.raises(InvalidInput, match="already exists") as refused:
            await backends["local"].export_instance(ref("local", c), str(target))
        print(f"existing file: {refused.value}")

        seen.clear()
        started = time.monotonic()
        inst = await backends["lab2"].import_instance(str(target), c, progress=seen.append)
        print(f"import on lab2: {time.monotonic() - started:.2f}s; {seen}")
        assert inst.name == c and inst.status is InstanceStatus.STOPPED
        assert c in names(lab.lxd2)
        assert snapshots(lab.lxd2, c) == ["snap0"]
        assert "snap0" in lab.lxd2.cli("info", c).stdout
        assert lab.lxd2.cli("config", "get", c, "user.marker").stdout.strip() == "from-lxd1"
        assert any(s.startswith("uploading") for s in seen)

        # the name is now taken there: refused before anything is uploaded
        with pytest.raises(Conflict, match="already taken on 'lab2'") as taken:
            await backends["lab2"].import_instance(str(target), c)
        print(f"name taken: {taken.value}")

        # an LXD 5.0 backup restores on Incus 6.0 too, under another name, in a given pool
        other = unique("i")
        inst = await backends["inc1"].import_instance(str(target), other,
                                                      storage_pool="default")
        assert inst.name == other and snapshots(lab.incus1, other) == ["snap0"]
        lab.incus1.cli("start", other)
        assert status(lab.incus1, other) == "Running"
        gone(lab.incus1, other)

        # without snapshots
        bare = tmp_path / "bare.tar.gz"
        await backends["local"].export_instance(ref("local", c), str(bare),
                                                with_snapshots=False)
        bare_name = unique("b")
        await backends["lab2"].import_instance(str(bare), bare_name)
        assert snapshots(lab.lxd2, bare_name) == []
        gone(lab.lxd2, bare_name)

        with pytest.raises(InvalidInput, match="no file"):
            await backends["lab2"].import_instance(str(tmp_path / "nope.tar.gz"), unique("n"))
        with pytest.raises(InvalidInput, match="no storage pool 'nopool'"):
            await backends["lab2"].import_instance(str(target), unique("n"),
                                                   storage_pool="nopool")
        junk = tmp_path / "junk.tar.gz"
        junk.write_bytes(b"not a backup" * 100)
        before = names(lab.lxd2)
        with pytest.raises(OperationFailed) as failed:
            await backends["lab2"].import_instance(str(junk), unique("j"))
        print(f"junk file: {failed.value}")
        assert names(lab.lxd2) == before
    finally:
        gone(lab.lxd1, c)
        gone(lab.lxd2, c)


async def test_operations_during_an_export_and_cancel_refused(lxd, lab, unique, tmp_path):
    """A backup of 64 MiB of random data takes long enough to be seen running."""
    backends, _ = lxd
    local = backends["local"]
    c = unique()
    make(lab.lxd1, c, start=True)
    lab.lxd1.cli("exec", c, "--", "dd", "if=/dev/urandom", "of=/big", "bs=1M", "count=64")
    lab.lxd1.cli("stop", "--force", c)
    try:
        task = asyncio.create_task(local.export_instance(ref("local", c),
                                                         str(tmp_path / "big.tar.gz")))
        found = None
        deadline = time.monotonic() + 20
        while found is None and not task.done():
            assert time.monotonic() < deadline
            for op in await local.list_operations():
                if not op.done and c in op.instances and "ack" in op.description:
                    found = op
            await asyncio.sleep(0.05)
        assert found is not None, "no running backup operation seen"
        print(f"\nrunning: {found}")
        assert found.status == "Running" and found.remote == "local"
        assert not found.may_cancel and not found.interactive
        with pytest.raises(Unsupported, match="cannot be cancelled") as refused:
            await local.cancel_operation(found.id)
        print(f"cancel refused: {refused.value}")
        size = await task
        assert size > 64 * 1024 * 1024
        ops = await local.list_operations()
        assert any(o.id == found.id and o.status == "Success" for o in ops)
        with pytest.raises(Conflict, match="already ended"):
            await local.cancel_operation(found.id)
        with pytest.raises(NotFound):
            await local.cancel_operation("00000000-0000-0000-0000-000000000000")
    finally:
        gone(lab.lxd1, c)


async def test_cancelled_export_leaves_no_file_and_no_backup(lxd, lab, unique, tmp_path):
    backends, _ = lxd
    c = unique()
    make(lab.lxd1, c, start=True)
    lab.lxd1.cli("exec", c, "--", "dd", "if=/dev/urandom", "of=/big", "bs=1M", "count=48")
    lab.lxd1.cli("stop", "--force", c)
    target = tmp_path / "cancelled.tar.gz"
    seen: list[str] = []
    try:
        task = asyncio.create_task(backends["local"].export_instance(
            ref("local", c), str(target), progress=seen.append))
        deadline = time.monotonic() + 30
        while not any(s.startswith("downloading") for s in seen):
            assert time.monotonic() < deadline and not task.done(), seen
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not target.exists() and not Path(str(target) + ".part").exists()
        assert json.loads(lab.lxd1.cli("query", f"/1.0/instances/{c}/backups").stdout) == []
    finally:
        gone(lab.lxd1, c)


# 3-4. Clone, copy, move -------------------------------------------------------------------


async def test_clone_on_the_same_remote(lxd, lab, unique):
    backends, _ = lxd
    c, full, bare = unique(), unique("f"), unique("b")
    make(lab.lxd1, c, snapshot="s0")
    try:
        seen: list[str] = []
        inst = await backends["local"].clone_instance(ref("local", c), full,
                                                      progress=seen.append)
        assert inst.name == full and snapshots(lab.lxd1, full) == ["s0"]
        await backends["local"].clone_instance(ref("local", c), bare, with_snapshots=False)
        assert snapshots(lab.lxd1, bare) == []
        assert {c, full, bare} <= names(lab.lxd1)
        with pytest.raises(Conflict, match="already taken"):
            await backends["local"].clone_instance(ref("local", c), full)
        with pytest.raises(InvalidInput, match="name"):
            await backends["local"].clone_instance(ref("local", c), "bad_name")
        with pytest.raises(NotFound):
            await backends["local"].clone_instance(ref("local", unique("x")), unique("y"))
    finally:
        gone(lab.lxd1, c, full, bare)


async def test_copy_and_move_between_lxd1_and_lxd2(lxd, lab, unique):
    backends, _ = lxd
    local, lab2 = backends["local"], backends["lab2"]
    c, copy, moved, back = unique(), unique("c"), unique("m"), unique("r")
    make(lab.lxd1, c, snapshot="s0")
    lab.lxd1.cli("config", "set", c, "user.marker", "copied")
    try:
        seen: list[str] = []
        started = time.monotonic()
        inst = await local.copy_to(ref("local", c), lab2, copy, progress=seen.append)
        print(f"\ncopy local -> lab2: {time.monotonic() - started:.2f}s; {seen}")
        assert inst.ref == ref("lab2", copy) and inst.status is InstanceStatus.STOPPED
        assert copy in user_list(lab, "lab2") and c in user_list(lab, "local")
        assert copy not in user_list(lab, "local")
        assert snapshots(lab.lxd2, copy) == ["s0"]
        assert lab.lxd2.cli("config", "get", copy, "user.marker").stdout.strip() == "copied"
        lab.lxd2.cli("start", copy)
        assert status(lab.lxd2, copy) == "Running"

        # move without snapshots: the source goes only after the target exists
        started = time.monotonic()
        await local.copy_to(ref("local", c), lab2, moved, move=True, with_snapshots=False)
        print(f"move local -> lab2: {time.monotonic() - started:.2f}s")
        assert c not in user_list(lab, "local")
        assert moved in user_list(lab, "lab2") and snapshots(lab.lxd2, moved) == []

        # and back, from the HTTPS remote to the unix-socket one
        await lab2.copy_to(ref("lab2", moved), local, back, move=True)
        assert back in user_list(lab, "local") and moved not in user_list(lab, "lab2")
    finally:
        gone(lab.lxd1, c, back)
        gone(lab.lxd2, copy, moved)


async def test_copy_refusals_change_nothing(lxd, lab, unique):
    backends, remotes = lxd
    local, lab2 = backends["local"], backends["lab2"]
    running, stopped, taken = unique("run"), unique("st"), unique("tk")
    make(lab.lxd1, running, start=True)
    make(lab.lxd1, stopped)
    make(lab.lxd2, taken)
    try:
        before1, before2 = names(lab.lxd1), names(lab.lxd2)
        with pytest.raises(Conflict, match="is running: stop it first, or") as refused:
            await local.copy_to(ref("local", running), lab2, unique("n"))
        print(f"\nrunning: {refused.value}")
        with pytest.raises(Conflict, match="is running: stop it first"):
            await local.copy_to(ref("local", running), lab2, unique("n"), move=True)
        assert status(lab.lxd1, running) == "Running"

        with pytest.raises(Conflict, match=f"'{taken}' is already taken on 'lab2'") as t:
            await local.copy_to(ref("local", stopped), lab2, taken, move=True)
        print(f"taken: {t.value}")

        # a target that cannot be reached: a remote on a closed port
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dead_remote = replace(remotes["lab2"], name="dead", address=f"https://127.0.0.1:{port}",
                              addresses=(f"https://127.0.0.1:{port}",))
        dead = get_backend(dead_remote, timeout=3)
        with pytest.raises(Unreachable) as down:
            await dead.connect()
        print(f"connect: {down.value}")
        with pytest.raises(Unreachable, match="Nothing was changed") as unreachable:
            await local.copy_to(ref("local", stopped), dead, unique("n"), move=True)
        print(f"unreachable: {unreachable.value}")
        await dead.close()

        with pytest.raises(InvalidInput, match="same remote"):
            await local.copy_to(ref("local", stopped), local, unique("n"))
        # a profile the target lacks
        profile = unique("p")
        lab.lxd1.cli("profile", "create", profile)
        lab.lxd1.cli("profile", "add", stopped, profile)
        with pytest.raises(InvalidInput, match=f"no profile '{profile}'") as noprof:
            await local.copy_to(ref("local", stopped), lab2, unique("n"))
        print(f"profile: {noprof.value}")
        lab.lxd1.cli("profile", "remove", stopped, profile)
        lab.lxd1.cli("profile", "delete", profile)

        assert names(lab.lxd1) == before1 and names(lab.lxd2) == before2
        assert status(lab.lxd1, stopped) == "Stopped"
    finally:
        gone(lab.lxd1, running, stopped)
        gone(lab.lxd2, taken)


async def test_copy_to_a_target_that_went_away(lxd, lab, unique):
    """A target that was connected, then stopped answering (a forwarder to lxd2 that is
    shut): refused in words before anything happens to the source."""
    backends, remotes = lxd
    host, port = lab.lxd2.https_address.rsplit(":", 1)

    async def pipe(reader, writer):
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    async def forward(reader, writer):
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(forward, "127.0.0.1", 0)
    fport = server.sockets[0].getsockname()[1]
    proxied = replace(remotes["lab2"], name="proxied", address=f"https://127.0.0.1:{fport}",
                      addresses=(f"https://127.0.0.1:{fport}",))
    target = get_backend(proxied, timeout=3)
    await target.connect()
    await asyncio.to_thread(target.rest.wait_client)  # its pylxd client, built once connected
    c = unique()
    make(lab.lxd1, c)
    try:
        server.close()
        await server.wait_closed()
        # no kept-alive connection through the forwarder
        target.rest.client.api.session.close()
        target.rest.fast.close()
        with pytest.raises(Unreachable, match="Nothing was changed") as refused:
            await backends["local"].copy_to(ref("local", c), target, unique("n"), move=True)
        print(f"\ntarget gone: {refused.value}")
        assert status(lab.lxd1, c) == "Stopped" and c in names(lab.lxd1)
    finally:
        await target.close()
        gone(lab.lxd1, c)


async def test_a_move_cancelled_while_the_target_pulls_leaves_nothing(lxd, lab, unique):
    """The caller cancels a move just after the target was asked to pull (the last step
    that makes something): the steps' undos end the migration on both daemons and remove
    what the target made; the source stays where it was, untouched."""
    backends, _ = lxd
    local, lab2 = backends["local"], backends["lab2"]
    c, there = unique(), unique("m")
    make(lab.lxd1, c, snapshot="s0")
    try:
        def cancel_once_pulling(text: str) -> None:
            if text.startswith("moving"):  # said right after the target's POST
                task.cancel()

        task = asyncio.ensure_future(local.copy_to(ref("local", c), lab2, there, move=True,
                                                   progress=cancel_once_pulling))
        with pytest.raises(asyncio.CancelledError):
            await task
        assert there not in names(lab.lxd2)
        assert c in names(lab.lxd1) and status(lab.lxd1, c) == "Stopped"
        assert snapshots(lab.lxd1, c) == ["s0"]
        # nothing of the migration keeps running on either daemon (the source's side
        # ends when its websockets close)
        def migrating() -> list[str]:
            found = []
            for daemon in (lab.lxd1, lab.lxd2):
                ops = json.loads(daemon.cli("query", "/1.0/operations?recursion=1").stdout)
                found += [o["description"] for o in ops.get("running") or []
                          if c in json.dumps(o.get("resources")) or there in json.dumps(
                              o.get("resources"))]
            return found

        deadline = time.monotonic() + 60
        while (left := migrating()) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert left == [], f"still running after the undo: {left}"
        # LXD's own revert of the failed pull removes the target's volume a moment after
        # the operation has ended (seen up to half a second here); then the same move
        # goes through
        def volumes() -> list[str]:
            out = lab.lxd2.cli("storage", "volume", "list", "default", "--format", "csv")
            return [line for line in out.stdout.splitlines() if f",{there}" in line]

        deadline = time.monotonic() + 30
        while (left := volumes()) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert left == [], f"the target's volume stayed: {left}"
        await local.copy_to(ref("local", c), lab2, there, move=True)
        assert there in names(lab.lxd2) and c not in names(lab.lxd1)
    finally:
        gone(lab.lxd1, c)
        gone(lab.lxd2, there)


async def test_copy_lxd_to_incus(lxd, lab, unique):
    """LXD 5.0.2 → Incus 6.0 by pull migration works (the migration protocol is shared);
    Incus → LXD 5.0.2 works without snapshots only."""
    backends, _ = lxd
    c, there = unique(), unique("i")
    make(lab.lxd1, c, snapshot="s0")
    try:
        started = time.monotonic()
        inst = await backends["local"].copy_to(ref("local", c), backends["inc1"], there)
        print(f"\nLXD -> Incus: {time.monotonic() - started:.2f}s")
        assert inst.ref.remote == "inc1"
        assert snapshots(lab.incus1, there) == ["s0"]
        lab.incus1.cli("start", there)
        assert status(lab.incus1, there) == "Running"
        # and back: Incus → LXD
        back = unique("b")
        lab.incus1.cli("stop", "--force", there)
        try:
            # LXD 5.0.2 does not know a key Incus puts in snapshot records: refused, and
            # nothing is left on lxd1
            with pytest.raises(OperationFailed, match="volatile.uuid.generation") as refused:
                await backends["inc1"].copy_to(ref("inc1", there), backends["local"], back)
            print(f"Incus -> LXD with snapshots: {refused.value}")
            assert "without snapshots" in str(refused.value)
            assert back not in names(lab.lxd1)
            # without snapshots it goes through, and starts
            await backends["inc1"].copy_to(ref("inc1", there), backends["local"], back,
                                           with_snapshots=False)
            assert back in user_list(lab, "local") and snapshots(lab.lxd1, back) == []
            lab.lxd1.cli("start", back)
            assert status(lab.lxd1, back) == "Running"
        finally:
            gone(lab.lxd1, back)
    finally:
        gone(lab.lxd1, c)
        gone(lab.incus1, there)


# 5. Rename, description --------------------------------------------------------------------


async def test_rename_and_description(lxd, lab, unique):
    backends, _ = lxd
    local = backends["local"]
    c, new, other = unique(), unique("n"), unique("o")
    make(lab.lxd1, c, snapshot="s0")
    make(lab.lxd1, other)
    try:
        await local.set_description(ref("local", c), "  made by corral  ")
        assert json.loads(lab.lxd1.cli("query", f"/1.0/instances/{c}").stdout)[
            "description"] == "made by corral"
        inst = await local.rename_instance(ref("local", c), new)
        assert inst.name == new and inst.description == "made by corral"
        assert new in names(lab.lxd1) and c not in names(lab.lxd1)
        assert snapshots(lab.lxd1, new) == ["s0"]
        with pytest.raises(Conflict, match="already taken"):
            await local.rename_instance(ref("local", new), other)
        lab.lxd1.cli("start", new)
        with pytest.raises(Conflict, match="is running: stop it first") as running:
            await local.rename_instance(ref("local", new), unique("z"))
        print(f"\nrename running: {running.value}")
        await local.set_description(ref("local", new), "")
        assert json.loads(lab.lxd1.cli("query", f"/1.0/instances/{new}").stdout)[
            "description"] == ""
    finally:
        gone(lab.lxd1, c, new, other)


# 6. Images -------------------------------------------------------------------------------


@pytest.mark.parametrize("remote", ["local", "inc1"])
async def test_publish_then_launch_from_the_alias(lxd, lab, unique, remote):
    backends, _ = lxd
    b = backends[remote]
    daemon = {"local": lab.lxd1, "inc1": lab.incus1}[remote]
    c, launched, alias, snap_alias = unique(), unique("l"), unique("img"), unique("snp")
    make(daemon, c)
    daemon.cli("exec", c, "--", "true", check=False)
    fps = []
    try:
        daemon.cli("start", c)
        daemon.cli("exec", c, "--", "sh", "-c", "echo published > /marker")
        with pytest.raises(Conflict, match="is running: stop it first, or publish") as r:
            await b.publish_image(ref(remote, c), alias=alias)
        print(f"\n[{remote}] running: {r.value}")
        snap(daemon, c, "s0")
        # a snapshot of a running instance can be published
        fps.append(await b.publish_image(ref(remote, c), snapshot="s0", alias=snap_alias))
        daemon.cli("stop", "--force", c)
        seen: list[str] = []
        fp = await b.publish_image(ref(remote, c), alias=alias, description="corral test",
                                   progress=seen.append)
        fps.append(fp)
        assert re.fullmatch(r"[0-9a-f]{64}", fp)
        with pytest.raises(Conflict, match=f"alias '{alias}' is already taken"):
            await b.publish_image(ref(remote, c), alias=alias)
        with pytest.raises(NotFound, match="no snapshot 'nope'"):
            await b.publish_image(ref(remote, c), snapshot="nope")
        images = await b.list_images()
        mine = next(i for i in images if i.fingerprint == fp)
        assert isinstance(mine, ImageInfo)
        assert mine.aliases == (alias,) and mine.description == "corral test"
        assert mine.size and mine.size > 0 and mine.type == "container" and not mine.public
        assert mine.created_at is not None and mine.uploaded_at is not None
        daemon.cli("launch", alias, launched)
        assert daemon.cli("exec", launched, "--", "cat", "/marker").stdout.strip() \
            == "published"
        gone(daemon, launched)
        for f in fps:
            await b.delete_image(f)
        fps.clear()
        assert fp not in daemon.cli("image", "list", "--format", "csv", "-c", "F").stdout
        with pytest.raises(NotFound):
            await b.delete_image(fp)
    finally:
        gone(daemon, c, launched)
        for f in fps:
            daemon.cli("image", "delete", f, check=False)


# 7. Passwords ----------------------------------------------------------------------------


@pytest.mark.parametrize("remote", ["local", "inc1"])
async def test_set_password(lxd, lab, unique, caplog, tmp_path, remote):
    backends, _ = lxd
    b = backends[remote]
    daemon = {"local": lab.lxd1, "inc1": lab.incus1}[remote]
    caplog.set_level(logging.DEBUG)
    # caplog puts the level back afterwards: left at DEBUG, every websocket frame of the
    # tests that follow was logged and kept by pytest (a console flood grew RSS by 500 MiB)
    caplog.set_level(logging.DEBUG, logger="websockets")
    c = unique()
    make(daemon, c, start=True)
    try:
        r = ref(remote, c)
        # the lab image has no chpasswd: said in words
        with pytest.raises(Unsupported, match="has no chpasswd") as missing:
            await b.set_password(r, "root", PASSWORD)
        print(f"\n[{remote}] {missing.value}")
        shim = tmp_path / "chpasswd"
        shim.write_text(CHPASSWD)
        daemon.cli("file", "push", "--mode", "0755", str(shim), f"{c}/bin/chpasswd")
        before = daemon.cli("exec", c, "--", "cat", "/etc/shadow").stdout
        started = time.monotonic()
        await b.set_password(r, "root", PASSWORD)
        print(f"[{remote}] set_password: {time.monotonic() - started:.2f}s")
        shadow = daemon.cli("exec", c, "--", "cat", "/etc/shadow").stdout
        assert shadow != before
        hashed = shadow.split(":")[1]
        assert hashed.startswith("$6$")
        salt = hashed.split("$")[2]
        # the same hash from the same salt proves the password itself arrived
        # (the CLI's exec of a command that exits at once has come back with no output on
        # a loaded machine, once in CI: asked again then, never compared with nothing)
        for _ in range(5):
            check = daemon.cli("exec", c, "--", "sh", "-c",
                               f"printf '%s\\n' '{PASSWORD}' | mkpasswd -m sha512 -S '{salt}'")
            if check.stdout.strip():
                break
        assert check.stdout.strip() == hashed
        # chpasswd's own refusal, in its words
        with pytest.raises(OperationFailed, match="unknown user 'nobody2'") as nouser:
            await b.set_password(r, "nobody2", PASSWORD)
        print(f"[{remote}] {nouser.value}")
        for user, pw in (("root", "a:b"), ("root", "a\nb"), ("ro:ot", "x"), ("", "x"),
                         ("root", "")):
            with pytest.raises(InvalidInput):
                await b.set_password(r, user, pw)
        daemon.cli("stop", "--force", c)
        with pytest.raises(Conflict, match="start it"):
            await b.set_password(r, "root", PASSWORD)
        logs = "\n".join(f"{rec.name} {rec.getMessage()} {rec.args!r}" for rec in caplog.records)
        assert caplog.records, "nothing was logged at all: the check would prove nothing"
        assert PASSWORD not in logs
        assert PASSWORD not in str(nouser.value) and PASSWORD not in repr(nouser.value)
    finally:
        gone(daemon, c)


# 8. NICs ---------------------------------------------------------------------------------


async def test_nics_and_static_addresses(lxd, lab, unique):
    backends, _ = lxd
    local = backends["local"]
    d = lab.lxd1
    bridge = "cbr" + unique()[-6:]
    c, profile = unique(), unique("p")
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    net = next(f"10.{a}.{b}" for a in range(150, 250) for b in range(0, 250, 7)
               if f" 10.{a}.{b}." not in used)
    d.cli("network", "create", bridge, f"ipv4.address={net}.1/24", "ipv6.address=none")
    make(d, c)
    try:
        r = ref("local", c)
        assert await local.list_nics(r) == {}
        await local.add_nic(r, "eth0", network=bridge, ipv4=f"{net}.50")
        shown = d.cli("config", "show", c).stdout
        print("\n" + shown)
        assert f"ipv4.address: {net}.50" in shown and f"network: {bridge}" in shown
        nics = await local.list_nics(r)
        assert nics["eth0"]["ipv4.address"] == f"{net}.50"
        d.cli("start", c)
        assert status(d, c) == "Running"

        with pytest.raises(Conflict, match="already has a device named 'eth0'"):
            await local.add_nic(r, "eth0", network=bridge)
        with pytest.raises(InvalidInput, match="not in"):
            await local.add_nic(r, "eth1", network=bridge, ipv4="192.0.2.200")
        with pytest.raises(InvalidInput, match="no IPv6 subnet"):
            await local.add_nic(r, "eth1", network=bridge, ipv6="fd00::5")
        with pytest.raises(InvalidInput, match="not an IPv4"):
            await local.add_nic(r, "eth1", network=bridge, ipv4=f"{net}.300")
        with pytest.raises(InvalidInput, match="no network 'nonet'"):
            await local.add_nic(r, "eth1", network="nonet")
        with pytest.raises(InvalidInput, match="needs a parent"):
            await local.add_nic(r, "eth1", nictype="bridged")
        with pytest.raises(InvalidInput, match="cannot have a static address"):
            await local.add_nic(r, "eth1", nictype="macvlan", parent="eth0", ipv4="10.0.0.2")

        # a second NIC on the same managed bridge: LXD's refusal, in its words
        with pytest.raises(OperationFailed, match="already used on network") as dup:
            await local.add_nic(r, "eth1", nictype="bridged", parent=bridge)
        print(f"second NIC on {bridge}: {dup.value}")
        assert "eth1" not in json.loads(d.cli("query", f"/1.0/instances/{c}").stdout)["devices"]
        # a routed NIC with address lists
        d.cli("stop", "--force", c)
        await local.add_nic(r, "eth2", nictype="routed", ipv4="192.0.2.10, 192.0.2.11")
        assert d.cli("config", "device", "get", c, "eth2", "ipv4.address").stdout.strip() \
            == "192.0.2.10,192.0.2.11"
        await local.set_nic_addresses(r, "eth0", ipv4=f"{net}.60")
        assert d.cli("config", "device", "get", c, "eth0", "ipv4.address").stdout.strip() \
            == f"{net}.60"
        await local.remove_nic(r, "eth2")
        assert set(await local.list_nics(r)) == {"eth0"}
        with pytest.raises(NotFound):
            await local.remove_nic(r, "eth9")
        with pytest.raises(InvalidInput, match="not a NIC"):
            await local.remove_nic(r, "root")

        # a NIC from a profile is copied into the instance when its address is set
        await local.remove_nic(r, "eth0")
        d.cli("profile", "create", profile)
        d.cli("profile", "device", "add", profile, "net0", "nic", f"network={bridge}")
        d.cli("profile", "add", c, profile)
        with pytest.raises(Conflict, match="comes from its profiles"):
            await local.remove_nic(r, "net0")
        await local.set_nic_addresses(r, "net0", ipv4=f"{net}.70")
        local_devices = json.loads(d.cli("query", f"/1.0/instances/{c}").stdout)["devices"]
        assert local_devices["net0"] == {"type": "nic", "network": bridge,
                                         "ipv4.address": f"{net}.70"}
        assert "ipv4.address" not in d.cli("profile", "show", profile).stdout
        assert f"ipv4.address: {net}.70" in d.cli("config", "show", c).stdout
        d.cli("start", c)
        assert status(d, c) == "Running"
        await local.set_nic_addresses(r, "net0")  # cleared
        assert "ipv4.address" not in d.cli("config", "show", c).stdout
    finally:
        gone(d, c)
        d.cli("profile", "delete", profile, check=False)
        d.cli("network", "delete", bridge, check=False)
