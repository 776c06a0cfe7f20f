"""A call of every optional verb of the contract (``backends.base.CAPABILITY_METHODS``) and
of the core verbs, on a given instance and snapshot: the contract's Unsupported checks and
the read-only guard's test call every verb through these."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from backends.base import Backend
from backends.models import FileEntry, InstanceRef, ResourceKind, Snapshot
from backends.create_models import CreateRequest, CreateSource

Call = Callable[[Backend, InstanceRef, Snapshot, Path], Any]

CORE_CALLS: dict[str, Call] = {
    "start": lambda b, r, s, d: b.start(r),
    "stop": lambda b, r, s, d: b.stop(r, force=True),
    "restart": lambda b, r, s, d: b.restart(r, force=True),
    "freeze": lambda b, r, s, d: b.freeze(r),
    "unfreeze": lambda b, r, s, d: b.unfreeze(r),
    "delete": lambda b, r, s, d: b.delete(r, force=True),
}
"""The core verbs that change an instance."""

CALLS: dict[str, Call] = {
    "watch": lambda b, r, s, d: anext(b.watch()),
    "create_sources": lambda b, r, s, d: b.create_sources(),
    "create_options": lambda b, r, s, d: b.create_options(),
    "create_instance": lambda b, r, s, d: b.create_instance(
        CreateRequest(name=r.name, source=CreateSource("image", "nothing", "nothing"))),
    "get_limits": lambda b, r, s, d: b.get_limits(r),
    "set_limits": lambda b, r, s, d: b.set_limits(r, {"memory": "256MiB"}),
    "list_snapshots": lambda b, r, s, d: b.list_snapshots(r),
    "snapshot_counts": lambda b, r, s, d: b.snapshot_counts([r]),
    "create_snapshot": lambda b, r, s, d: b.create_snapshot(r, "s0"),
    "restore_snapshot": lambda b, r, s, d: b.restore_snapshot(s),
    "delete_snapshot": lambda b, r, s, d: b.delete_snapshot(s),
    "rename_snapshot": lambda b, r, s, d: b.rename_snapshot(s, "s1"),
    "snapshot_settings": lambda b, r, s, d: b.snapshot_settings(r),
    "set_snapshot_settings": lambda b, r, s, d: b.set_snapshot_settings(
        r, {"snapshots.schedule": "@daily"}),
    "open_console": lambda b, r, s, d: b.open_console(r),
    "open_shell": lambda b, r, s, d: b.open_shell(r),
    "spice_viewer_argv": lambda b, r, s, d: b.spice_viewer_argv(r),
    "open_display": lambda b, r, s, d: b.open_display(r),
    "display_viewer_argv": lambda b, r, s, d: b.display_viewer_argv(r),
    "export_instance": lambda b, r, s, d: b.export_instance(r, str(d / "backup.tar.gz")),
    "import_instance": lambda b, r, s, d: b.import_instance(str(d / "none.tar.gz"),
                                                            r.name + "-i"),
    "clone_instance": lambda b, r, s, d: b.clone_instance(r, r.name + "-c"),
    "copy_to": lambda b, r, s, d: b.copy_to(r, b, r.name + "-c"),
    "portable_vm": lambda b, r, s, d: b.portable_vm(r),
    "rename_instance": lambda b, r, s, d: b.rename_instance(r, r.name + "-r"),
    "owned_storage": lambda b, r, s, d: b.owned_storage(r),
    "delete_with_storage": lambda b, r, s, d: b.delete_with_storage(r, [], force=True),
    "set_description": lambda b, r, s, d: b.set_description(r, "contract"),
    "publish_image": lambda b, r, s, d: b.publish_image(r),
    "list_images": lambda b, r, s, d: b.list_images(),
    "delete_image": lambda b, r, s, d: b.delete_image("0" * 64),
    "set_password": lambda b, r, s, d: b.set_password(r, "root", "Contract-pw-1"),
    "list_nics": lambda b, r, s, d: b.list_nics(r),
    "add_nic": lambda b, r, s, d: b.add_nic(r, "eth9", network="contract0"),
    "remove_nic": lambda b, r, s, d: b.remove_nic(r, "eth9"),
    "set_nic_addresses": lambda b, r, s, d: b.set_nic_addresses(r, "eth9", "", ""),
    "list_operations": lambda b, r, s, d: b.list_operations(),
    "cancel_operation": lambda b, r, s, d: b.cancel_operation(
        "00000000-0000-0000-0000-000000000000"),
    # profiles, networks, storage, projects, image aliases, YAML (backends/resources.py)
    "list_profiles": lambda b, r, s, d: b.list_profiles(),
    "get_profile": lambda b, r, s, d: b.get_profile("contract-ghost"),
    "create_profile": lambda b, r, s, d: b.create_profile(r.name + "-p"),
    "rename_profile": lambda b, r, s, d: b.rename_profile("contract-ghost", r.name + "-p"),
    "delete_profile": lambda b, r, s, d: b.delete_profile("contract-ghost"),
    "set_instance_profiles": lambda b, r, s, d: b.set_instance_profiles(r, ["default"]),
    "list_networks": lambda b, r, s, d: b.list_networks(),
    "create_network": lambda b, r, s, d: b.create_network("ctghost0"),
    "delete_network": lambda b, r, s, d: b.delete_network("ctghost0"),
    "network_leases": lambda b, r, s, d: b.network_leases("ctghost0"),
    "list_storage_pools": lambda b, r, s, d: b.list_storage_pools(),
    "list_volumes": lambda b, r, s, d: b.list_volumes("contract-ghost"),
    "create_volume": lambda b, r, s, d: b.create_volume("contract-ghost", r.name + "-v"),
    "resize_volume": lambda b, r, s, d: b.resize_volume("contract-ghost", "v", 2**20),
    "delete_volume": lambda b, r, s, d: b.delete_volume("contract-ghost", "v"),
    "attach_volume": lambda b, r, s, d: b.attach_volume("contract-ghost", "v", r, "/mnt"),
    "detach_volume": lambda b, r, s, d: b.detach_volume("contract-ghost", "v", r),
    "copy_volume": lambda b, r, s, d: b.copy_volume("contract-ghost", "v", b,
                                                    "contract-ghost", "v2"),
    "list_projects": lambda b, r, s, d: b.list_projects(),
    "create_project": lambda b, r, s, d: b.create_project(r.name + "-pj"),
    "delete_project": lambda b, r, s, d: b.delete_project("contract-ghost"),
    "add_image_alias": lambda b, r, s, d: b.add_image_alias("0" * 64, r.name + "-a"),
    "remove_image_alias": lambda b, r, s, d: b.remove_image_alias("contract-ghost"),
    "copy_image": lambda b, r, s, d: b.copy_image("0" * 64, b),
    "refresh_image": lambda b, r, s, d: b.refresh_image("0" * 64),
    "get_yaml": lambda b, r, s, d: b.get_yaml(ResourceKind.INSTANCE, r.name),
    "put_yaml": lambda b, r, s, d: b.put_yaml(ResourceKind.INSTANCE, r.name, "{}", ""),
    "list_files": lambda b, r, s, d: b.list_files(r, "/"),
    "read_file": lambda b, r, s, d: b.read_file(r, FileEntry("/etc/hostname", "file"),
                                                str(d / "pulled")),
    "write_file": lambda b, r, s, d: b.write_file(r, FileEntry("/tmp/contract", "directory")),
    "list_members": lambda b, r, s, d: b.list_members(),
    "placements": lambda b, r, s, d: b.placements(),
    "move_to_member": lambda b, r, s, d: b.move_to_member(r, "m2"),
    "evacuate_member": lambda b, r, s, d: b.evacuate_member("m2"),
    "restore_member": lambda b, r, s, d: b.restore_member("m2"),
    "cluster_instances": lambda b, r, s, d: b.cluster_instances(),
}
