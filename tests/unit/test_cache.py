"""The inventory cache on disk: what it keeps, what it refuses to read."""

from __future__ import annotations

import json
import os
import stat

import pytest

from backends.models import Instance, InstanceRef, InstanceStatus, InstanceType, Remote
from tui.services.cache import InventoryCache, cache_path

LXD = Remote(name="prod", kind="lxd", address="https://10.0.0.5:8443", project="web")


def inst(name, status=InstanceStatus.RUNNING, **kw):
    return Instance(ref=InstanceRef("prod", name, "web"), type=InstanceType.CONTAINER,
                    status=status, **kw)


def test_round_trip_keeps_rows_and_nothing_secret(tmp_path):
    path = tmp_path / "c" / "inventory.json"
    cache = InventoryCache(path)
    cache.update(LXD, [inst("web1", image="debian 12", location="m2",
                            config={"user.token": "s3cret"}, description="d"),
                       inst("db1", InstanceStatus.STOPPED)])
    cache.write()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert "s3cret" not in path.read_text()
    got = InventoryCache(path).load([LXD])["prod"]
    by_name = {i.name: i for i in got.instances}
    assert by_name["web1"].status is InstanceStatus.RUNNING
    assert by_name["web1"].image == "debian 12" and by_name["web1"].location == "m2"
    assert by_name["web1"].ref == InstanceRef("prod", "web1", "web")
    assert by_name["db1"].status is InstanceStatus.STOPPED
    assert got.saved_at > 0


def test_a_changed_or_removed_remote_is_ignored(tmp_path):
    path = tmp_path / "inventory.json"
    cache = InventoryCache(path)
    cache.update(LXD, [inst("web1")])
    cache.write()
    moved = Remote(name="prod", kind="lxd", address="https://10.0.0.6:8443", project="web")
    other_project = Remote(name="prod", kind="lxd", address=LXD.address, project="default")
    assert InventoryCache(path).load([moved]) == {}
    assert InventoryCache(path).load([other_project]) == {}
    assert InventoryCache(path).load([]) == {}


def test_damaged_foreign_or_odd_files_give_no_rows(tmp_path):
    path = tmp_path / "inventory.json"
    for text in ("{not json", "[]", '{"version": 99, "remotes": {}}', "\x00" * 100):
        path.write_text(text)
        assert InventoryCache(path).load([LXD]) == {}, text
    path.write_text(json.dumps({"version": 1, "remotes": {"prod": {
        "identity": "lxd|https://10.0.0.5:8443|web", "saved_at": 1,
        "instances": [{"name": "ok", "type": "container", "status": "running"},
                      {"name": "bad", "type": "toaster", "status": "running"},
                      {"name": "", "type": "container", "status": "running"},
                      {"name": "x" * 300, "type": "container", "status": "running"},
                      "junk"]}}}))
    loaded = InventoryCache(path).load([LXD])
    assert [i.name for i in loaded["prod"].instances] == ["ok"]  # the rest skipped


@pytest.mark.root  # making another user's file takes chown (tests/tiers.py)
def test_a_cache_file_of_another_user_is_not_read(tmp_path):
    path = tmp_path / "inventory.json"
    path.write_text(json.dumps({"version": 1, "remotes": {"prod": {
        "identity": "lxd|https://10.0.0.5:8443|web", "saved_at": 1,
        "instances": [{"name": "ok", "type": "container", "status": "running"}]}}}))
    assert InventoryCache(path).load([LXD])  # (ours: read)
    os.chown(path, 4242, 4242)  # someone else's file: not read at all
    assert InventoryCache(path).load([LXD]) == {}


def test_one_file_per_configuration(tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    a = cache_path(env, tmp_path / "a.toml")
    b = cache_path(env, tmp_path / "b.toml")
    assert a != b and a.parent == b.parent == tmp_path / "corral"
    assert cache_path({"HOME": str(tmp_path)}, tmp_path / "a.toml").parent == \
        tmp_path / ".cache" / "corral"


def test_a_fifo_or_link_as_the_cache_file_is_refused_without_waiting(tmp_path):
    import threading

    path = tmp_path / "corral" / "inventory.json"
    path.parent.mkdir()
    os.mkfifo(path)  # planted: opening it for reading would wait for a writer forever
    got: list = []
    cache = InventoryCache(path)
    reader = threading.Thread(target=lambda: got.append(cache.load([LXD])), daemon=True)
    reader.start()
    reader.join(5)
    if reader.is_alive():  # (unblock the reader: a writer comes and goes)
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    assert got == [{}], "start-up hung on a FIFO as the inventory cache"
    assert f"{path} is a FIFO, not a regular file" in cache.problem
    assert stat.S_ISFIFO(os.lstat(path).st_mode)  # left as it was
    path.unlink()
    target = tmp_path / "elsewhere.json"
    target.write_text("{}")
    path.symlink_to(target)
    cache = InventoryCache(path)
    assert cache.load([LXD]) == {} and "is a symbolic link" in cache.problem
    cache.update(LXD, [inst("web1")])
    path.parent.chmod(0o777)  # a cache directory others can write: not written in
    cache.write()
    assert "can be changed by other users (mode 0777)" in cache.problem
    assert target.read_text() == "{}" and path.is_symlink()


def test_update_says_whether_the_kept_rows_changed(tmp_path):
    """Usage samples change rows every few seconds without changing what is kept: the app
    writes the file only when ``update`` says the kept rows differ."""
    cache = InventoryCache(tmp_path / "inventory.json")
    assert cache.update(LXD, [inst("web1"), inst("db1", InstanceStatus.STOPPED)])
    assert not cache.update(LXD, [inst("web1", description="other"),
                                  inst("db1", InstanceStatus.STOPPED)])
    assert cache.update(LXD, [inst("web1", InstanceStatus.STOPPED),
                              inst("db1", InstanceStatus.STOPPED)])
    moved = Remote(name="prod", kind="lxd", address="https://10.0.0.6:8443", project="web")
    assert cache.update(moved, [inst("web1", InstanceStatus.STOPPED),
                                inst("db1", InstanceStatus.STOPPED)])
    assert not cache.forget_except(["prod"])
    assert cache.forget_except([])


def test_the_very_same_rows_are_not_made_into_json_again(tmp_path, monkeypatch):
    """A usage sample hands the cache the same instance objects (the inventory replaces an
    instance only when it changes): every 10 s, hundreds of rows on the event loop. Those
    are recognised without building their JSON; the listing's time still moves."""
    import tui.services.cache as cache_module

    cache = InventoryCache(tmp_path / "inventory.json")
    rows = [inst("web1"), inst("db1", InstanceStatus.STOPPED)]
    assert cache.update(LXD, rows)
    made: list[str] = []
    real = cache_module._to_json
    monkeypatch.setattr(cache_module, "_to_json", lambda i: (made.append(i.name), real(i))[1])
    before = cache._entries["prod"]["saved_at"]
    assert not cache.update(LXD, list(rows))
    assert made == [] and cache._entries["prod"]["saved_at"] >= before
    assert not cache.update(LXD, [inst("web1"), inst("db1", InstanceStatus.STOPPED)])
    assert made == ["web1", "db1"]  # equal, but other objects: compared as JSON
