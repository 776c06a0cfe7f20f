"""Pure parts of the resource views: LXD/Incus JSON (as the lab daemons answered it) into
rows, the YAML checks of an edit, the notes added for a re-edit, the views' filter, the
``:`` names, and the action table's answers."""

from __future__ import annotations

import pytest
import yaml

from backends.errors import InvalidInput
from backends.lxd import resource_convert as rc
from backends.lxd.yamledit import dump, load
from backends.models import Capability, ResourceKind
from tui.flows.yaml_edit import CURRENT, NOTE, annotate
from tui.actions import row_bindings
from tui.offer import row_allowed
from tui.views.rows import from_resource, matches, parse_filter
from tui.views.specs import resolve

PROJECT = {  # GET /1.0/projects?recursion=1 of LXD 5.0.2
    "config": {"features.images": "true", "features.networks": "true",
               "features.profiles": "true", "features.storage.volumes": "true"},
    "description": "Default LXD project", "name": "default",
    "used_by": ["/1.0/profiles/default",
                "/1.0/images/47cb5c407af8941e91e4653dcf2bce06ee989522ac986756030c9fa8cf80cf4f"],
}
NETWORK = {"config": {"ipv4.address": "10.199.78.1/24", "ipv4.nat": "true",
                      "ipv6.address": "none"},
           "description": "", "locations": ["none"], "managed": True, "name": "brx",
           "status": "Created", "type": "bridge", "used_by": None}
HOST = {"config": {}, "description": "", "locations": None, "managed": False, "name": "ifb0",
        "status": "", "type": "unknown", "used_by": None}
POOL = {"config": {"source": "/var/lib/lxd/storage-pools/default"}, "description": "",
        "driver": "dir", "locations": ["none"], "name": "default", "status": "Created",
        "used_by": ["/1.0/profiles/default", "/1.0/instances/web1?project=dev"]}
RESOURCES = {"inodes": {"total": 16777216, "used": 636693},
             "space": {"total": 270553174016, "used": 27202396160}}
VOLUME = {"config": {"size": "20MiB"}, "content_type": "filesystem",
          "created_at": "0001-01-01T00:00:00Z", "description": "", "location": "none",
          "name": "v1", "project": "default", "type": "custom",
          "used_by": ["/1.0/instances/web1"]}


def test_users_are_named_in_words():
    assert rc.user_of("/1.0/instances/web1") == "instance web1"
    assert rc.user_of("/1.0/profiles/default?project=pr1") == "profile default (project pr1)"
    assert rc.user_of("/1.0/storage-pools/default/volumes/custom/v1") == \
        "custom volume default/v1"
    assert rc.user_of("/1.0/instances/c1/snapshots/s0") == "snapshot c1/s0"
    assert rc.user_of(PROJECT["used_by"][1]) == "image 47cb5c407af8"


def test_project_network_pool_volume_rows():
    project = rc.to_project(PROJECT, "lab")
    assert project.get("features") == "images, networks, profiles, storage.volumes"
    assert project.used_by == ("profile default", "image 47cb5c407af8")
    net = rc.to_network(NETWORK, "lab", "default")
    assert (net.get("managed"), net.get("ipv4"), net.get("nat"), net.read_only) == \
        ("yes", "10.199.78.1/24", "v4", False)
    assert net.used_by == ()  # null in the answer
    assert rc.to_network(HOST, "lab", "default").read_only
    pool = rc.to_pool(POOL, RESOURCES, "lab", "default")
    assert (pool.get("driver"), pool.get("used"), pool.get("total")) == \
        ("dir", "25.33GiB", "251.97GiB")
    assert pool.used_by == ("profile default", "instance web1 (project dev)")
    vol = rc.to_volume(VOLUME, "default", "lab", "default")
    assert (vol.parent, vol.get("size"), vol.used_by) == ("default", "20MiB",
                                                           ("instance web1",))
    assert vol.key != rc.to_volume(VOLUME, "other", "lab", "default").key


def test_yaml_of_an_edit_is_checked_before_anything_is_sent():
    text = dump({"config": {"a": "1"}, "description": "d", "devices": None, "name": "p",
                 "used_by": []}, ResourceKind.PROFILE)
    assert yaml.safe_load(text) == {"config": {"a": "1"}, "description": "d", "devices": {}}
    with pytest.raises(InvalidInput, match="line 2"):
        load("config:\n  a: b: c\n", ResourceKind.PROFILE)
    with pytest.raises(InvalidInput, match="Unknown key"):
        load("name: other\n", ResourceKind.PROFILE)
    with pytest.raises(InvalidInput, match="mapping"):
        load("- a\n", ResourceKind.PROFILE)
    assert load("config:\n  limits.cpu: 2\n  boot.autostart: true\n",
                ResourceKind.PROFILE)["config"] == {"limits.cpu": "2", "boot.autostart": "true"}


def test_re_edit_notes_are_comments_and_do_not_pile_up():
    once = annotate("config: {}\n", ["changed meanwhile"], current="config:\n  x: '1'\n")
    assert once.startswith(NOTE + "changed meanwhile\n") and CURRENT in once
    assert yaml.safe_load(once) == {"config": {}}
    twice = annotate(once, ["not saved: bad"])
    assert twice.count(NOTE) == 1 and CURRENT not in twice
    assert yaml.safe_load(twice) == {"config": {}}


def test_view_filter_and_names():
    row = from_resource(rc.to_network(NETWORK, "lab2", "default"))
    columns = {"name": "Name", "remote": "Remote", "type": "Type", "managed": "Managed"}
    assert matches(parse_filter("brx"), row, columns)
    assert matches(parse_filter("type=bridge remote=lab2"), row, columns)
    assert matches(parse_filter("managed=yes"), row, columns)
    assert not matches(parse_filter("!brx"), row, columns)
    assert not matches(parse_filter("type=physical"), row, columns)
    assert resolve(":profiles").name == "profiles"
    assert resolve("net").name == "networks"
    assert resolve("st").name == "storage"
    assert resolve("ct").name == "instances"
    assert resolve("pr").name == "profiles" and resolve("pro") is None  # ambiguous prefix
    assert resolve("nothing") is None


def test_the_views_action_table_follows_capabilities():
    caps = frozenset({Capability.PROFILES, Capability.NETWORKS})

    def allowed(view: str, verb: str, caps, **kw):
        return row_allowed(view, "verb_" + verb.replace("-", "_"), caps, **kw)

    assert allowed("profiles", "delete", caps, has_row=True, read_only=False)
    assert allowed("profiles", "new", caps, has_row=False, read_only=False)
    assert allowed("profiles", "rename", caps, has_row=False, read_only=False) is None
    assert allowed("profiles", "edit", caps, has_row=True, read_only=False) is False
    # LXC: networks listed, never changed
    assert allowed("networks", "delete", caps, has_row=True, read_only=True) is False
    full = caps | {Capability.NETWORK_MANAGE}
    assert allowed("networks", "delete", full, has_row=True, read_only=True) is None
    assert allowed("images", "leases", full, has_row=True, read_only=False) is False
    keys = [b.key for b in row_bindings()]
    assert len(keys) == len(set(keys))


def test_only_views_a_remote_can_fill_are_offered():
    from backends.fake import FakeBackend
    from backends.lxc import LXCBackend
    from backends.models import ConnectionState, Remote
    from tui.services.inventory import Inventory
    from tui.views.specs import BY_NAME, offered, remotes_for

    remotes = [Remote("lxc", "lxc", "/tmp/nothing"), Remote("fake", "fake", "fake://")]
    inv = Inventory(remotes, on_change=lambda *args: None)
    inv.backends.update(lxc=LXCBackend(remotes[0]), fake=FakeBackend(remotes[1]))
    for status in inv.statuses.values():
        status.state = ConnectionState.CONNECTED
    names = {v.name for v in offered(inv)}
    assert names == {"instances", "networks", "operations", "remotes"}  # LXC: host bridges
    assert remotes_for(inv, BY_NAME["networks"]) == ["lxc"]
    del inv.backends["lxc"]
    assert {v.name for v in offered(inv)} == {"instances", "operations", "remotes"}
