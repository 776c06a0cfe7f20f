"""Connecting, listing, usage figures and the lifecycle verbs (start, stop, restart, freeze,
unfreeze, delete) of LXC containers."""

from __future__ import annotations

import asyncio
import os
import shutil
import time

from .. import tool_version
from ..base import Backend
from ..errors import Conflict, NotFound, NotResponding, OperationFailed, StopTimedOut, Unreachable
from ..models import Instance, InstanceRef, InstanceState, InstanceStatus, ServerInfo
from . import parse
from .tools import LXCTools, words


class Lifecycle(Backend):
    """The core verbs of :class:`~backends.lxc.backend.LXCBackend`."""

    lxc: LXCTools

    async def connect(self) -> ServerInfo:
        lxc_ls = shutil.which("lxc-ls")
        if lxc_ls is None:
            raise Unreachable("The LXC tools are not installed (no lxc-ls; package 'lxc').")
        if not os.path.isdir(self.lxc.path):
            raise Unreachable(f"The lxcpath {self.lxc.path} does not exist.")
        try:  # (usually asked by the first listing already)
            out = await tool_version.ask_async(lxc_ls, "--version", timeout=self.lxc.timeout * 3)
        except OSError as e:
            raise Unreachable(f"lxc-ls cannot run: {e.strerror or e}.") from None
        except TimeoutError:
            raise NotResponding("lxc-ls --version did not finish in time.") from None
        return ServerInfo(server="lxc", version=out.strip(), auth="local")

    async def close(self) -> None:
        return None

    # Listing ---------------------------------------------------------------------------

    async def list_instances(self) -> list[Instance]:
        if not os.path.isdir(self.lxc.path):
            return []
        _, out, err = await self.lxc.run("lxc-ls", "--fancy", "-F", "NAME,STATE", check=True)
        rows = [(row["NAME"], parse.status_of(row["STATE"]))
                for row in parse.fancy_table(out) if row.get("NAME")]
        # (in one thread: each reads the container's files)
        return await asyncio.to_thread(lambda: [self.lxc.instance(*row) for row in rows])

    async def get_instance(self, ref: InstanceRef) -> Instance:
        self.lxc.require(ref)
        rc, out, err = await self.lxc.run("lxc-info", "-n", ref.name, "-s")
        if rc != 0:
            raise NotFound(words(err) or f"No LXC container '{ref.name}'.")
        state = parse.info(out).get("State", "")
        return await self.lxc.read_instance(ref.name, parse.status_of(state))

    async def get_states(self, refs: list[InstanceRef]) -> dict[InstanceRef, InstanceState]:
        async def one(ref: InstanceRef) -> tuple[InstanceRef, dict[str, str] | None]:
            rc, out, _ = await self.lxc.run("lxc-info", "-n", ref.name, "-H")
            return ref, parse.info(out) if rc == 0 else None

        results = await asyncio.gather(*(one(r) for r in refs), return_exceptions=True)
        now = time.monotonic()
        previous = self.lxc.previous
        states: dict[InstanceRef, InstanceState] = {}
        for item in results:
            if isinstance(item, BaseException):
                continue
            ref, data = item
            if data is None:
                continue
            if parse.status_of(data.get("State", "")) is not InstanceStatus.RUNNING:
                previous.pop(ref, None)
                continue
            cpu = int(data.get("CPU use") or 0)
            prev = previous.get(ref)
            percent = None
            if prev is not None and now > prev.sampled_at and cpu >= prev.cpu_usage_ns:
                percent = (cpu - prev.cpu_usage_ns) / ((now - prev.sampled_at) * 1e9) * 100
            ips = parse.addresses(data.get("IP", ""))
            state = InstanceState(
                cpu_usage_ns=cpu, cpu_percent=percent,
                memory_usage=int(data.get("Memory use") or 0),
                ipv4=tuple(a for a in ips if ":" not in a),
                ipv6=tuple(a for a in ips if ":" in a),
                pid=int(data["PID"]) if data.get("PID", "").isdigit() else None,
                rx_bytes=int(data.get("RX bytes") or 0), tx_bytes=int(data.get("TX bytes") or 0),
                sampled_at=now,
            )
            previous[ref] = state
            states[ref] = state
        return states

    # Lifecycle -------------------------------------------------------------------------

    async def start(self, ref: InstanceRef) -> None:
        self.lxc.require(ref)
        rc, _, err = await self.lxc.run("lxc-start", "-n", ref.name, timeout=60)
        if rc != 0:
            raise OperationFailed(f"{ref} did not start: {words(err) or 'lxc-start failed'}."
                                  " Its log: lxc-start -F -n " + ref.name + " shows why.")

    async def stop(self, ref: InstanceRef, *, force: bool = False, timeout: int = 30) -> None:
        self.lxc.require(ref)
        if force:
            await self.lxc.run("lxc-stop", "-n", ref.name, "-k", timeout=60, check=True)
            return
        rc, _, err = await self.lxc.run("lxc-stop", "-n", ref.name, "--nokill", "-t",
                                        str(timeout), timeout=timeout + 30)
        if rc != 0:
            current = await self.get_instance(ref)
            if current.status in (InstanceStatus.RUNNING, InstanceStatus.FROZEN):
                raise StopTimedOut(
                    f"{ref} did not shut down within {timeout} s. It can be force-stopped.")
            if current.status is not InstanceStatus.STOPPED:
                raise OperationFailed(words(err) or f"lxc-stop failed for {ref}.")

    async def restart(self, ref: InstanceRef, *, force: bool = False, timeout: int = 30) -> None:
        current = await self.get_instance(ref)
        if current.status is not InstanceStatus.STOPPED:
            await self.stop(ref, force=force, timeout=timeout)
        await self.start(ref)

    async def freeze(self, ref: InstanceRef) -> None:
        self.lxc.require(ref)
        await self.lxc.run("lxc-freeze", "-n", ref.name, check=True)

    async def unfreeze(self, ref: InstanceRef) -> None:
        self.lxc.require(ref)
        await self.lxc.run("lxc-unfreeze", "-n", ref.name, check=True)

    async def delete(self, ref: InstanceRef, *, force: bool = False) -> None:
        """Destroy a container (``force``: stop it first). One with linked (overlay) clones
        is refused, naming them: LXC will not destroy it ("has clones")."""
        current = await self.get_instance(ref)
        clones = self.lxc.clones_of(ref.name)
        if clones:
            raise Conflict(f"{ref} is the base of the linked clone(s) {', '.join(clones)}: "
                           f"delete those first.")
        if current.status is not InstanceStatus.STOPPED:
            if not force:
                raise Conflict(f"{ref} is {current.status.value}. Stop it first, or delete it "
                               f"with force.")
            await self.stop(ref, force=True)
        await self.lxc.run("lxc-destroy", "-n", ref.name, "-s", timeout=120, check=True)
        self.lxc.previous.pop(ref, None)
