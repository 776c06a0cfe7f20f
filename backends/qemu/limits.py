"""Resource limits of QEMU VMs: vCPU hot-add, the balloon target, ``block_resize`` and IO
throttling while a VM runs (see ``docs/protocols.md``, section "QMP"), everything saved to
the definition for the next start."""

from __future__ import annotations

import dataclasses

from ..base import Backend
from ..errors import BackendError, InvalidInput
from ..models import InstanceRef, LimitField
from ..units import is_whole
from ..units import size_or_none as parse_size
from .definition import VMDefinition
from .images import info, qemu_img
from .machines import Machines
from .monitor import IO_KEYS, Monitor

IO_MAX = 1 << 50
"""The largest IO limit accepted (QEMU's own bound is of this order)."""


def _whole(raw: str) -> bool:
    """An ASCII whole number no larger than :data:`IO_MAX`."""
    return is_whole(raw) and int(raw) <= IO_MAX


class Limits(Backend):
    """``get_limits``, ``set_limits``."""

    vms: Machines
    monitor: Monitor

    async def _virtual_size(self, ref: InstanceRef) -> int | None:
        d = self.vms.definition(ref.name)
        if not d.disks:
            return None
        found = await info(str(self.vms.dir(ref.name) / d.disks[0]))
        return int(found.get("virtual-size") or 0) or None

    async def get_limits(self, ref: InstanceRef) -> list[LimitField]:
        """The VM's limits. While it runs, values are what QEMU has now (vCPUs, RAM, IO
        throttling of the first disk); a value saved in the definition that differs (a
        restart-only change, or a definition edited meanwhile) is shown as ``pending``."""
        d = self.vms.definition(ref.name)
        running = self.vms.pid(ref.name) is not None
        live = "live" if running else "restart"
        cpus, ram_mib = d.cpus, d.memory_mib
        io_now: dict[str, int] | None = None
        if running:
            try:
                cpus = len(await self.monitor.execute(ref, "query-cpus-fast"))  # type: ignore
            except BackendError:
                pass
            try:
                summary = await self.monitor.execute(ref, "query-memory-size-summary")
                ram_mib = int(summary["base-memory"]) >> 20  # type: ignore[index]
            except (BackendError, KeyError, TypeError, ValueError):
                pass
            if d.disks:
                io_now = await self._running_io_limits(ref)

        def pending(now: object, saved: object, text: str) -> str:
            return text if running and now != saved else ""

        size = await self._virtual_size(ref)
        fields_ = [
            LimitField("cpus", "vCPUs", str(cpus), live if cpus < d.max_cpus else "restart",
                       f"hot-add up to {d.max_cpus} while running; fewer needs a restart",
                       pending=pending(cpus, d.cpus, str(d.cpus))),
            LimitField("memory", "Memory (balloon)",
                       f"{d.memory_target_mib or d.memory_mib}MiB", live,
                       f"balloon target up to {d.memory_mib}MiB; the guest needs its "
                       f"virtio-balloon driver"),
            LimitField("memory_max", "Memory (max)", f"{ram_mib}MiB", "restart",
                       "the VM's RAM; takes effect at next start",
                       pending=pending(ram_mib, d.memory_mib, f"{d.memory_mib}MiB")),
        ]
        if size is not None:
            fields_.append(LimitField("disk", "Disk size", str(size), live,
                                      "grow only; the guest then grows its partition"))
            for key, label in (("read_bps", "Read bytes/s"), ("write_bps", "Write bytes/s"),
                               ("read_iops", "Read IOPS"), ("write_iops", "Write IOPS")):
                saved = int(d.io_limits.get(key, 0))
                now = saved if io_now is None else io_now.get(key, 0)
                fields_.append(LimitField(
                    key, label, str(now) if now else "", live, "0 or empty: no limit",
                    pending=pending(now, saved, str(saved))))
        else:
            fields_.append(LimitField("disk", "Disk size", "", "unsupported", "no disk"))
        return fields_

    async def _running_io_limits(self, ref: InstanceRef) -> dict[str, int] | None:
        """The IO throttling QEMU applies to the first disk now (None: not found)."""
        try:
            blocks = await self.monitor.execute(ref, "query-block")
        except BackendError:
            return None
        for block in blocks or ():  # type: ignore[union-attr]
            if block.get("device") == "drive0" or block.get("qdev", "").startswith(
                    "/machine/peripheral/vblk0"):
                inserted = block.get("inserted") or {}
                return {key: int(inserted.get(qmp_key) or 0)
                        for key, qmp_key in IO_KEYS.items()}
        return None

    async def set_limits(self, ref: InstanceRef, changes: dict[str, str]) -> dict[str, str]:
        """Apply what QEMU can change live (balloon, vCPU hot-add, block_resize, IO
        throttling) and save everything to the definition; the rest applies at next start.
        Everything is validated before anything is changed."""
        d = self.vms.definition(ref.name)
        running = self.vms.pid(ref.name) is not None
        plan: dict[str, int] = {}
        for key, raw in changes.items():
            raw = raw.strip()
            if key == "cpus":
                if not _whole(raw) or not 1 <= int(raw) <= d.max_cpus:
                    raise InvalidInput(f"vCPUs must be from 1 to {d.max_cpus}.")
                plan[key] = int(raw)
            elif key in ("memory", "memory_max"):
                n = parse_size(raw if raw[-1:].isalpha() else raw + "MiB")
                if n is None or n < 32 << 20:
                    raise InvalidInput(f"Memory '{raw}' is not a size of at least 32MiB.")
                plan[key] = n >> 20
                if key == "memory" and plan[key] > d.memory_mib:
                    raise InvalidInput(f"The balloon can give at most {d.memory_mib}MiB; "
                                       f"raise 'Memory (max)' (needs a restart) first.")
            elif key == "disk":
                n = parse_size(raw)
                size = await self._virtual_size(ref)
                if size is None:
                    raise InvalidInput(f"{ref} has no disk to resize.")
                if n is None or n < size:
                    raise InvalidInput(f"Disks only grow: give a size above {size} bytes.")
                plan[key] = n
            elif key in IO_KEYS:
                if raw and not _whole(raw):
                    raise InvalidInput(f"{key} must be a whole number from 0 to {IO_MAX} "
                                       f"(0 or empty: no limit).")
                if not d.disks:
                    raise InvalidInput(f"{ref} has no disk to throttle.")
                plan[key] = int(raw or 0)
            else:
                raise InvalidInput(f"Unknown resource '{key}'.")
        return await self._apply(ref, d, plan, running)

    async def _apply(self, ref: InstanceRef, d: VMDefinition, plan: dict[str, int],
                     running: bool) -> dict[str, str]:
        """Save the new definition first (written beside the old one: a full disk stops
        everything before QEMU changes), then change QEMU live, then put the new definition
        in place; what was changed live is undone when that last step fails."""
        before = dataclasses.replace(d, io_limits=dict(d.io_limits))
        result: dict[str, str] = {}
        if "cpus" in plan:
            d.cpus = plan["cpus"]
        if "memory_max" in plan:
            d.memory_mib = plan["memory_max"]
            d.memory_target_mib = min(d.memory_target_mib, d.memory_mib)
            result["memory_max"] = "restart"
        if "memory" in plan:
            d.memory_target_mib = plan["memory"]
            result["memory"] = "live" if running else "restart"
        io = {k: v for k, v in plan.items() if k in IO_KEYS}
        d.io_limits.update(io)
        result.update({k: "live" if running else "restart" for k in io})
        pending = d.prepare_save(self.vms.dir(ref.name))
        undo: list[tuple[str, dict]] = []
        try:
            if "cpus" in plan:
                result["cpus"] = await self._set_cpus(ref, plan["cpus"], running)
            if "memory" in plan and running:
                await self.monitor.execute(ref, "balloon", value=plan["memory"] << 20)
                undo.append(("balloon", {"value": (before.memory_target_mib
                                                   or before.memory_mib) << 20}))
            if "disk" in plan:
                if running:
                    await self.monitor.execute(ref, "block_resize", **{"node-name": "disk0",
                                                                   "size": plan["disk"]})
                else:
                    await qemu_img("resize", str(self.vms.dir(ref.name) / d.disks[0]),
                                   str(plan["disk"]))
                result["disk"] = "live" if running else "restart"
            if io and running:
                await self.monitor.apply_io_limits(ref, d)
                undo.append(("io", {}))
            pending.commit()
        except BaseException:
            pending.discard()
            for what, args in reversed(undo):
                try:
                    if what == "balloon":
                        await self.monitor.execute(ref, "balloon", **args)
                    else:
                        await self.monitor.apply_io_limits(ref, before)
                except BackendError:
                    pass
            raise
        return result

    async def _set_cpus(self, ref: InstanceRef, target: int, running: bool) -> str:
        """Hot-add vCPUs up to ``target`` ("live"), or leave it to the next start."""
        if not running:
            return "restart"
        current = len(await self.monitor.execute(ref, "query-cpus-fast"))  # type: ignore
        if target <= current:
            return "restart"
        slots = [s for s in await self.monitor.execute(ref, "query-hotpluggable-cpus")
                 if "qom-path" not in s]  # type: ignore[union-attr]
        for i, slot in enumerate(slots[: target - current]):
            await self.monitor.execute(ref, "device_add", driver=slot["type"],
                                   id=f"cpu-hot{current + i}", **slot["props"])
        return "live"
