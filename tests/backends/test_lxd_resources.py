"""Profiles, networks, storage, projects, images and YAML editing of the LXD/Incus
backend against the real lab daemons (lxd1 over its unix socket, lxd2 and Incus over
HTTPS), with the ``lxc``/``incus`` CLIs as the judges: what corral lists is what the CLI
lists, and what corral changes the CLI sees."""

from __future__ import annotations

import json
import uuid

import pytest
import yaml

from backends import get_backend
from backends.errors import Conflict, InvalidInput
from backends.models import InstanceRef, ResourceKind
from backends.remotes import discover

@pytest.fixture
def remote(remote_backend):
    """(connected backend, the lab daemon behind it), once for each of the lab's remotes."""
    _name, backend, _info, daemon = remote_backend
    return backend, daemon


def cli_json(daemon, *args):
    return json.loads(daemon.cli(*args, "--format", "json").stdout)


def cli_yaml(daemon, *args):
    return yaml.safe_load(daemon.cli(*args).stdout)


def short(prefix=""):
    return f"{prefix}{uuid.uuid4().hex[:6]}"


# Listings equal the CLI's ---------------------------------------------------------------


async def test_listings_equal_the_cli(remote):
    backend, daemon = remote
    prof = short("lp-")
    daemon.cli("profile", "create", prof)
    vol = short("lv-")
    daemon.cli("storage", "volume", "create", "default", vol)
    try:
        assert {p.name for p in await backend.list_profiles()} == \
            {p["name"] for p in cli_json(daemon, "profile", "list")}
        assert {n.name for n in await backend.list_networks()} == \
            {n["name"] for n in cli_json(daemon, "network", "list")}
        pools = await backend.list_storage_pools()
        assert {p.name for p in pools} == {p["name"] for p in cli_json(daemon, "storage", "list")}
        assert pools[0].get("driver") == "dir" and pools[0].get("total")
        assert {v.name for v in await backend.list_volumes("default")} == \
            {v["name"] for v in cli_json(daemon, "storage", "volume", "list", "default")
             if v["type"] == "custom"}
        assert {p.name for p in await backend.list_projects()} == \
            {p["name"] for p in cli_json(daemon, "project", "list")}
        assert {i.fingerprint for i in await backend.list_images()} == \
            {i["fingerprint"] for i in cli_json(daemon, "image", "list")}
        managed = {n.name: n for n in await backend.list_networks()}
        assert all(n.read_only for n in managed.values() if n.get("managed") == "no")
    finally:
        daemon.cli("profile", "delete", prof)
        daemon.cli("storage", "volume", "delete", "default", vol)


# Profiles ------------------------------------------------------------------------------


async def test_profile_verbs_are_seen_by_the_cli(remote):
    backend, daemon = remote
    src, copy, renamed = short("ps-"), short("pc-"), short("pr-")
    daemon.cli("profile", "create", src)
    daemon.cli("profile", "set", src, "limits.memory=256MiB")
    try:
        full = await backend.get_profile(src)
        made = await backend.create_profile(copy, config=dict(full.config),
                                            devices=dict(full.devices))
        assert made.name == copy
        assert cli_yaml(daemon, "profile", "show", copy)["config"] == {"limits.memory": "256MiB"}
        await backend.rename_profile(copy, renamed)
        names = {p["name"] for p in cli_json(daemon, "profile", "list")}
        assert renamed in names and copy not in names
        await backend.delete_profile(renamed)
        assert renamed not in {p["name"] for p in cli_json(daemon, "profile", "list")}
    finally:
        for name in (src, copy, renamed):
            daemon.cli("profile", "delete", name, check=False)


async def test_deleting_a_used_profile_is_refused_and_changes_nothing(remote, unique):
    backend, daemon = remote
    prof, inst = short("pu-"), unique("u")
    daemon.cli("profile", "create", prof)
    daemon.cli("init", "busybox", inst, "-p", "default", "-p", prof)
    try:
        with pytest.raises(Conflict) as e:
            await backend.delete_profile(prof)
        assert inst in e.value.message and "nothing was changed" in e.value.message
        assert prof in {p["name"] for p in cli_json(daemon, "profile", "list")}
        assert cli_yaml(daemon, "config", "show", inst)["profiles"] == ["default", prof]
    finally:
        daemon.cli("delete", "-f", inst)
        daemon.cli("profile", "delete", prof)


async def test_instance_profiles_are_assigned_in_order(remote, unique):
    backend, daemon = remote
    p1, p2, inst = short("po-"), short("po-"), unique("o")
    daemon.cli("profile", "create", p1)
    daemon.cli("profile", "create", p2)
    daemon.cli("init", "busybox", inst)
    ref = InstanceRef(backend.remote.name, inst, backend.remote.project)
    try:
        await backend.set_instance_profiles(ref, ["default", p2, p1])
        assert cli_yaml(daemon, "config", "show", inst)["profiles"] == ["default", p2, p1]
        await backend.set_instance_profiles(ref, ["default", p1])  # p2 unassigned
        assert cli_yaml(daemon, "config", "show", inst)["profiles"] == ["default", p1]
    finally:
        daemon.cli("delete", "-f", inst)
        daemon.cli("profile", "delete", p1)
        daemon.cli("profile", "delete", p2)


# Networks ------------------------------------------------------------------------------


async def test_bridge_create_leases_delete_seen_by_the_cli(remote):
    backend, daemon = remote
    name = short("cbr")
    net = await backend.create_network(name, ipv4="none", ipv6="none")
    try:
        assert net.get("type") == "bridge" and net.get("managed") == "yes"
        shown = cli_yaml(daemon, "network", "show", name)
        assert shown["type"] == "bridge" and shown["config"]["ipv4.address"] == "none"
        assert await backend.network_leases(name) == []
        with pytest.raises(InvalidInput):
            await backend.create_network(short("cbr"), ipv4="10.300.0.1/24")
    finally:
        await backend.delete_network(name)
    assert name not in {n["name"] for n in cli_json(daemon, "network", "list")}


# Storage -------------------------------------------------------------------------------


async def test_volume_verbs_are_seen_by_the_cli(remote, unique):
    backend, daemon = remote
    vol, inst = short("cv-"), unique("v")
    daemon.cli("init", "busybox", inst)
    ref = InstanceRef(backend.remote.name, inst, backend.remote.project)
    try:
        await backend.create_volume("default", vol, size=16 * 2**20)
        assert cli_yaml(daemon, "storage", "volume", "show", "default", vol)["config"][
            "size"] == "16MiB"
        await backend.resize_volume("default", vol, 32 * 2**20)
        assert cli_yaml(daemon, "storage", "volume", "show", "default", vol)["config"][
            "size"] == "32MiB"
        device = await backend.attach_volume("default", vol, ref, "/mnt/data")
        devices = cli_yaml(daemon, "config", "show", inst)["devices"]
        assert devices[device] == {"type": "disk", "pool": "default", "source": vol,
                                   "path": "/mnt/data"}
        with pytest.raises(Conflict):  # attached: refused, nothing changed
            await backend.delete_volume("default", vol)
        await backend.detach_volume("default", vol, ref)
        assert device not in (cli_yaml(daemon, "config", "show", inst)["devices"] or {})
        await backend.copy_volume("default", vol, backend, "default", vol + "c")
        assert cli_yaml(daemon, "storage", "volume", "show", "default", vol + "c")["config"][
            "size"] == "32MiB"
        await backend.delete_volume("default", vol + "c")
        await backend.delete_volume("default", vol)
        names = {v["name"] for v in cli_json(daemon, "storage", "volume", "list", "default")}
        assert vol not in names and vol + "c" not in names
    finally:
        daemon.cli("delete", "-f", inst)
        for name in (vol, vol + "c"):
            daemon.cli("storage", "volume", "delete", "default", name, check=False)


async def test_volume_copy_to_another_remote(lab, lab_env):
    remotes = {r.name: r for r in discover(lab_env).remotes}
    here, there = (get_backend(remotes[n], timeout=10) for n in ("local", "lab2"))
    await here.connect()
    await there.connect()
    vol = short("xv-")
    lab.lxd1.cli("storage", "volume", "create", "default", vol, "size=8MiB")
    try:
        await here.copy_volume("default", vol, there, "default", vol)
        assert vol in {v["name"] for v in cli_json(lab.lxd2, "storage", "volume", "list",
                                                   "default")}
    finally:
        lab.lxd1.cli("storage", "volume", "delete", "default", vol, check=False)
        lab.lxd2.cli("storage", "volume", "delete", "default", vol, check=False)
        await here.close()
        await there.close()


# Projects ------------------------------------------------------------------------------


async def test_project_create_delete_seen_by_the_cli(remote):
    backend, daemon = remote
    name = short("cp-")
    made = await backend.create_project(name)
    assert "profiles" in made.get("features")
    assert name in {p["name"] for p in cli_json(daemon, "project", "list")}
    await backend.delete_project(name)
    assert name not in {p["name"] for p in cli_json(daemon, "project", "list")}


# Images --------------------------------------------------------------------------------


async def test_image_aliases_seen_by_the_cli(remote):
    backend, daemon = remote
    image = next(i for i in await backend.list_images() if "busybox" in i.aliases)
    alias = short("al-")
    await backend.add_image_alias(image.fingerprint, alias)
    try:
        listed = {i["fingerprint"]: [a["name"] for a in i["aliases"]]
                  for i in cli_json(daemon, "image", "list")}
        assert alias in listed[image.fingerprint]
        with pytest.raises(Conflict):
            await backend.add_image_alias(image.fingerprint, alias)
    finally:
        await backend.remove_image_alias(alias)
    listed = {i["fingerprint"]: [a["name"] for a in i["aliases"]]
              for i in cli_json(daemon, "image", "list")}
    assert alias not in listed[image.fingerprint]


async def test_refreshing_an_imported_image_is_refused_in_words(remote):
    backend, daemon = remote
    image = next(i for i in await backend.list_images() if "busybox" in i.aliases)
    with pytest.raises(InvalidInput, match="nothing to refresh it from"):
        await backend.refresh_image(image.fingerprint)
    assert image.fingerprint in {i["fingerprint"] for i in cli_json(daemon, "image", "list")}


async def test_image_copy_to_another_lxd_remote_with_progress(lab, lab_env):
    remotes = {r.name: r for r in discover(lab_env).remotes}
    here, there = (get_backend(remotes[n], timeout=10) for n in ("local", "lab2"))
    await here.connect()
    await there.connect()
    inst = short("pub-")
    lab.lxd1.cli("init", "busybox", inst)
    alias = short("cpy-")
    try:
        fp = await here.publish_image(InstanceRef("local", inst), alias=alias)
        seen: list[str] = []
        await here.copy_image(fp, there, aliases=(alias,), progress=seen.append)
        listed = {i["fingerprint"]: [a["name"] for a in i["aliases"]]
                  for i in cli_json(lab.lxd2, "image", "list")}
        assert alias in listed[fp]
        assert seen and seen[-1] == "done"
    finally:
        lab.lxd1.cli("delete", "-f", inst)
        lab.lxd1.cli("image", "delete", alias, check=False)
        lab.lxd2.cli("image", "delete", alias, check=False)
        await here.close()
        await there.close()


# YAML with the ETag --------------------------------------------------------------------


async def test_yaml_edit_changes_exactly_the_key_and_refuses_a_concurrent_change(remote):
    backend, daemon = remote
    prof = short("py-")
    daemon.cli("profile", "create", prof)
    daemon.cli("profile", "set", prof, "limits.cpu=1")
    try:
        before = cli_yaml(daemon, "profile", "show", prof)
        text, etag = await backend.get_yaml(ResourceKind.PROFILE, prof)
        data = yaml.safe_load(text)
        data["config"]["user.corral"] = "edited"
        await backend.put_yaml(ResourceKind.PROFILE, prof, yaml.safe_dump(data), etag)
        after = cli_yaml(daemon, "profile", "show", prof)
        assert after["config"] == {**before["config"], "user.corral": "edited"}
        assert {k: v for k, v in after.items() if k != "config"} == \
            {k: v for k, v in before.items() if k != "config"}

        # someone else changes it between open and save: refused, their change stays
        text, etag = await backend.get_yaml(ResourceKind.PROFILE, prof)
        daemon.cli("profile", "set", prof, "user.other=1")
        with pytest.raises(Conflict):
            await backend.put_yaml(ResourceKind.PROFILE, prof,
                                   text.replace("edited", "mine"), etag)
        now = cli_yaml(daemon, "profile", "show", prof)["config"]
        assert now["user.corral"] == "edited" and now["user.other"] == "1"

        # invalid YAML: refused with the line, nothing sent
        _, etag = await backend.get_yaml(ResourceKind.PROFILE, prof)
        with pytest.raises(InvalidInput) as e:
            await backend.put_yaml(ResourceKind.PROFILE, prof, "config:\n  a: [1\n", etag)
        assert "line" in e.value.message
        # a value the daemon refuses: in its words, nothing changed
        with pytest.raises(InvalidInput):
            await backend.put_yaml(ResourceKind.PROFILE, prof,
                                   "config:\n  limits.cpu: lots\n", etag)
        assert cli_yaml(daemon, "profile", "show", prof)["config"] == now
    finally:
        daemon.cli("profile", "delete", prof)


async def test_yaml_edit_of_an_instance_and_a_volume(remote, unique):
    backend, daemon = remote
    inst, vol = unique("y"), short("yv-")
    daemon.cli("init", "busybox", inst)
    daemon.cli("storage", "volume", "create", "default", vol)
    try:
        text, etag = await backend.get_yaml(ResourceKind.INSTANCE, inst)
        data = yaml.safe_load(text)
        data["config"]["user.note"] = "hello"
        await backend.put_yaml(ResourceKind.INSTANCE, inst, yaml.safe_dump(data), etag)
        assert cli_yaml(daemon, "config", "show", inst)["config"]["user.note"] == "hello"
        text, etag = await backend.get_yaml(ResourceKind.VOLUME, vol, "default")
        data = yaml.safe_load(text)
        data["description"] = "edited volume"
        await backend.put_yaml(ResourceKind.VOLUME, vol, yaml.safe_dump(data), etag, "default")
        assert cli_yaml(daemon, "storage", "volume", "show", "default", vol)[
            "description"] == "edited volume"
    finally:
        daemon.cli("delete", "-f", inst)
        daemon.cli("storage", "volume", "delete", "default", vol)
