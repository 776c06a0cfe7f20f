"""Creating LXD/Incus instances: what can be created (images, an empty VM), the launch
wizard's options, the name check, and the cancellable creation itself (progress from the
operation; whatever was made is removed on failure or cancellation). The pure parts (the
cloud-init check, the ``POST /1.0/instances`` body) are tested without a daemon.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, Callable

from ..base import Backend
from ..errors import BackendError, Conflict, InvalidInput, OperationFailed
from ..models import Instance, InstanceType
from ..create_models import CreateOptions, CreateRequest, CreateSource
from ..units import format_size, human_size
from ..cloudinit import user_data_problem
from ..steps import Steps
from . import convert
from .convert import name_problem
from .known import Known
from .lazy import pylxd_exc
from .ops import Ops
from .rest import Rest

__all__ = ["Create", "check_user_data", "create_body", "image_source", "name_problem"]

_FINGERPRINT = re.compile(r"^[0-9a-f]{12,64}$")


def check_user_data(text: str) -> str:
    """cloud-init user-data as cloud-init accepts it (``backends.cloudinit``). Returns the
    text; raises InvalidInput in words."""
    problem = user_data_problem(text)
    if problem:
        raise InvalidInput(problem)
    return text if text.strip() else ""


def image_source(value: str) -> dict[str, str]:
    value = value.strip()
    if _FINGERPRINT.match(value):
        return {"type": "image", "fingerprint": value}
    return {"type": "image", "alias": value}


def create_body(request: CreateRequest, *, root: tuple[str, dict[str, Any]] | None,
                nic_names: list[str]) -> dict[str, Any]:
    """The ``POST /1.0/instances`` body for ``request``.

    ``root`` is the root disk device the chosen profiles give (name, device), ``nic_names``
    the profiles' NIC device names (a "none" network turns them off).
    """
    src = request.source
    if src.kind == "image":
        if not src.value:
            raise InvalidInput("No image chosen.")
        source = image_source(src.value)
    elif src.kind == "empty-vm":
        source = {"type": "none"}
    else:
        raise InvalidInput(f"LXD cannot create an instance from a '{src.kind}' source.")
    vm = src.type is InstanceType.VM or src.kind == "empty-vm"
    config: dict[str, str] = {}
    if request.cpus is not None:
        if request.cpus < 1:
            raise InvalidInput("CPUs: at least 1.")
        config["limits.cpu"] = str(request.cpus)
    if request.memory is not None:
        if request.memory < 1024 * 1024:
            raise InvalidInput("Memory: at least 1MiB.")
        config["limits.memory"] = format_size(request.memory)
    if request.user_data.strip():
        config["cloud-init.user-data"] = check_user_data(request.user_data)
    devices: dict[str, dict[str, str]] = {}
    if request.storage_pool or request.disk:
        name, dev = root if root is not None else ("root", {})
        pool = request.storage_pool or dev.get("pool", "")
        if not pool:
            raise InvalidInput("No storage pool: choose one (the profiles give no root disk).")
        new = {"type": "disk", "path": "/", "pool": pool}
        if request.disk:
            if request.disk < 1024 * 1024:
                raise InvalidInput("Disk: at least 1MiB.")
            new["size"] = format_size(request.disk)
        elif dev.get("size") and dev.get("pool") == pool:
            new["size"] = dev["size"]
        devices[name] = new
    if request.network == "none":
        for name in nic_names:
            devices[name] = {"type": "none"}
    elif request.network:
        devices["eth0"] = {"type": "nic", "network": request.network, "name": "eth0"}
    body: dict[str, Any] = {
        "name": request.name,
        "type": "virtual-machine" if vm else "container",
        "source": source,
        "config": config,
        "devices": devices,
    }
    if request.profiles:
        body["profiles"] = list(request.profiles)
    description = (request.options or {}).get("description")
    if description:
        body["description"] = description
    return body


class Create(Backend):
    """The creation verbs of :class:`~backends.lxd.backend.LXDBackend`."""

    rest: Rest
    ops: Ops
    known: Known

    async def create_sources(self) -> list[CreateSource]:
        """The remote's own images (one entry per image, its aliases as the label) and an
        empty VM (no disk content: network boot or an ISO attached later)."""
        client = self.rest.client
        items = await self.rest.call(
            lambda: client.api.images.get(params={"recursion": 1}).json()["metadata"] or [])
        sources: list[CreateSource] = []
        for data in items:
            img = convert.to_image(data)
            fp = img.fingerprint
            props = data.get("properties") or {}
            label = ", ".join(img.aliases) or img.description or fp[:12]
            detail = " · ".join(p for p in (
                img.description if img.description != label else "",
                img.architecture or str(props.get("architecture") or ""),
                human_size(img.size) if img.size else "",
                fp[:12]) if p)
            itype = InstanceType.VM if img.type == "virtual-machine" else InstanceType.CONTAINER
            sources.append(CreateSource(kind="image", label=label, value=fp, type=itype,
                                        detail=detail))
        sources.sort(key=lambda s: (s.type is InstanceType.VM, s.label.lower()))
        sources.append(CreateSource(kind="empty-vm", label="Empty VM (network boot / ISO)",
                                    type=InstanceType.VM,
                                    detail="a virtual machine with an empty root disk"))
        return sources

    async def create_options(self) -> CreateOptions:
        client = self.rest.client

        def _names(node: Any) -> list[str]:
            return sorted(convert.url_name(u) for u in node.get().json()["metadata"] or [])

        def _do() -> tuple[list[str], list[str], list[str], int]:
            profiles = _names(client.api.profiles)
            pools = _names(client.api.storage_pools)
            nets = client.api.networks.get(params={"recursion": 1}).json()["metadata"] or []
            networks = sorted(n["name"] for n in nets if n.get("managed")
                              and n.get("type") in ("bridge", "macvlan", "sriov", "ovn",
                                                    "physical"))
            cpus = 0
            try:
                res = client.api.resources.get().json()["metadata"] or {}
                cpus = int((res.get("cpu") or {}).get("total") or 0)
            except (pylxd_exc.LXDAPIException, ValueError, TypeError):
                pass  # restricted (or no resources API): unknown
            return profiles, pools, networks, cpus

        profiles, pools, networks, cpus = await self.rest.call(_do)
        return CreateOptions(
            profiles=tuple(profiles),
            default_profiles=("default",) if "default" in profiles else (),
            storage_pools=tuple(pools),
            networks=tuple(networks),
            max_cpus=cpus,
            user_data=True,
            can_cancel=True,
            defaults={"cpus": "1", "memory": "512MiB", "disk": ""},
        )

    def check_name(self, name: str) -> str | None:
        """Why ``name`` cannot be used (LXD's rules, or taken in the last listing)."""
        problem = name_problem(name)
        if problem:
            return problem
        if name in self.known.names:
            return f"'{name}' is already taken on '{self.remote.name}'."
        return None

    async def _profiles_devices(self, profiles: tuple[str, ...]) -> dict[str, dict[str, Any]]:
        """The devices the chosen profiles give (later profiles override earlier)."""
        client = self.rest.client
        names = profiles or ("default",)

        def _do() -> dict[str, dict[str, Any]]:
            devices: dict[str, dict[str, Any]] = {}
            for p in names:
                try:
                    data = client.api.profiles[p].get().json()["metadata"]
                except pylxd_exc.NotFound:
                    raise InvalidInput(
                        f"There is no profile '{p}' on '{self.remote.name}'.") from None
                devices.update(data.get("devices") or {})
            return devices

        return await self.rest.call(_do)

    async def create_instance(self, request: CreateRequest,
                              progress: Callable[[str], None] | None = None) -> Instance:
        """Create (and with ``request.start`` start) an instance.

        Cancelling the coroutine cancels the daemon's operation where it may be cancelled,
        waits for it otherwise, and deletes whatever was made before re-raising.

        Raises:
            InvalidInput: a bad name, user-data or value (nothing sent).
            Conflict: the name is taken.
            OperationFailed: the daemon refused or failed (nothing left behind); or the
                instance was created but did not start ("created, but could not start").
        """
        report = progress or (lambda text: None)
        name = request.name
        body = await self._create_body(request)
        what = "VM" if body["type"] == "virtual-machine" else "container"
        report(f"creating {what} {name}")
        target = str((request.options or {}).get("target") or "")
        params = {"target": target} if target else None  # a cluster member or @group
        client, loop = self.rest.client, asyncio.get_running_loop()
        post = loop.run_in_executor(self.rest.pool, lambda: convert.operation_id(
            client.api.instances.post(json=body, params=params).json()))
        later: list[asyncio.Future] = []
        async with Steps() as steps:
            # whatever the POST made goes, its operation cancelled or outwaited first
            steps.undo(f"{what} {name}", lambda: self.ops.undo_create(name, post, later))
            op_id = await self._posted(post, what, name)
            meta = await self.ops.follow(op_id, report, timeout=1800)
            if meta.get("status") != "Success":
                error = meta.get("err") or meta.get("status") or "failed"
                raise OperationFailed(f"Creating {what} '{name}' failed: {error}")
            self.known.names.add(name)
            if request.start:
                report(f"starting {name}")
                later.append(loop.run_in_executor(self.rest.pool, self._start_new, name))
                await self._started(later[-1], what, name, steps)
        report("done")
        return await self.get_instance(self.known.ref_of(name))

    async def _create_body(self, request: CreateRequest) -> dict[str, Any]:
        """Step 1 of :meth:`create_instance`: the request checked (nothing sent yet) and
        made into the body of ``POST /1.0/instances``."""
        name = request.name
        problem = name_problem(name)
        if problem:
            raise InvalidInput(f"Instance name '{name}': {problem}")
        if request.user_data:
            check_user_data(request.user_data)
        devices = await self._profiles_devices(tuple(request.profiles))
        root = next(((n, d) for n, d in sorted(devices.items())
                     if d.get("type") == "disk" and d.get("path") == "/"), None)
        nics = sorted(n for n, d in devices.items() if d.get("type") == "nic")
        body = create_body(request, root=root, nic_names=nics)
        if name in await self.known.names_now():
            raise Conflict(f"'{name}' is already taken on '{self.remote.name}'.")
        return body

    async def _posted(self, post: asyncio.Future, what: str, name: str) -> str:
        """Step 2: the daemon took the POST; its operation (errors in words)."""
        try:
            return await asyncio.wait_for(asyncio.shield(post), self.timeout * 2)
        except (asyncio.CancelledError, BackendError):
            raise
        except Exception as e:
            err = self.rest.map_error(e)
            if isinstance(err, Conflict):
                raise err from e
            raise OperationFailed(f"Creating {what} '{name}' was refused: {err}") from e

    def _start_new(self, name: str) -> None:
        """(In a pool thread) start the instance just made."""
        r = self.rest.client.api.instances[name].state.put(
            json={"action": "start", "timeout": 30, "force": False})
        self.ops.wait(r, 60)

    async def _started(self, started: asyncio.Future, what: str, name: str,
                       steps: Steps) -> None:
        """Step 3: the start ended. An instance that was made but does not start stays
        (so its log can be read): nothing is undone then."""
        try:
            try:
                await asyncio.wait_for(asyncio.shield(started), 60 + self.timeout * 2)
            except (BackendError, asyncio.CancelledError):
                raise
            except Exception as e:
                raise self.rest.map_error(e) from e
        except BackendError as e:
            steps.keep()
            raise OperationFailed(
                f"{what.capitalize()} '{name}' was created, but could not start: "
                f"{e.message.rstrip('.')}. It is there, stopped.",
                title="Created, not started") from e
