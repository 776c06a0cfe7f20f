"""Resource limits of QEMU VMs: vCPU hot-add, the balloon target, ``block_resize`` and IO
throttling while a VM runs (see ``docs/protocols.md``, section "QMP"), everything saved to
the definition for the next start."""

from __future__ import annotations

from ..base import Backend
from ..errors import BackendError, InvalidInput
from ..models import InstanceRef, LimitField
from ..units import size_or_none as parse_size
from .images import info, qemu_img
from .machines import IO_KEYS, Machines


class Limits(Backend):
    """``get_limits``, ``set_limits``."""

    vms: Machines

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
                cpus = len(await self.vms.execute(ref, "query-cpus-fast"))  # type: ignore
            except BackendError:
                pass
            try:
                summary = await self.vms.execute(ref, "query-memory-size-summary")
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
            blocks = await self.vms.execute(ref, "query-block")
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
                if not raw.isdigit() or not 1 <= int(raw) <= d.max_cpus:
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
                if raw and not raw.isdigit():
                    raise InvalidInput(f"{key} must be a whole number (0 or empty: no limit).")
                if not d.disks:
                    raise InvalidInput(f"{ref} has no disk to throttle.")
                plan[key] = int(raw or 0)
            else:
                raise InvalidInput(f"Unknown resource '{key}'.")
        result: dict[str, str] = {}
        if "cpus" in plan:
            target = plan["cpus"]
            if running:
                current = len(await self.vms.execute(ref, "query-cpus-fast"))  # type: ignore
                if target > current:
                    slots = [s for s in await self.vms.execute(ref, "query-hotpluggable-cpus")
                             if "qom-path" not in s]  # type: ignore[union-attr]
                    for i, slot in enumerate(slots[: target - current]):
                        await self.vms.execute(ref, "device_add", driver=slot["type"],
                                               id=f"cpu-hot{current + i}", **slot["props"])
                    result["cpus"] = "live"
                else:
                    result["cpus"] = "restart"
            else:
                result["cpus"] = "restart"
            d.cpus = target
        if "memory_max" in plan:
            d.memory_mib = plan["memory_max"]
            d.memory_target_mib = min(d.memory_target_mib, d.memory_mib)
            result["memory_max"] = "restart"
        if "memory" in plan:
            d.memory_target_mib = plan["memory"]
            if running:
                await self.vms.execute(ref, "balloon", value=plan["memory"] << 20)
            result["memory"] = "live" if running else "restart"
        if "disk" in plan:
            if running:
                await self.vms.execute(ref, "block_resize", **{"node-name": "disk0",
                                                               "size": plan["disk"]})
            else:
                await qemu_img("resize", str(self.vms.dir(ref.name) / d.disks[0]),
                               str(plan["disk"]))
            result["disk"] = "live" if running else "restart"
        io = {k: v for k, v in plan.items() if k in IO_KEYS}
        if io:
            d.io_limits.update(io)
            if running:
                await self.vms.apply_io_limits(ref, d)
            result.update({k: "live" if running else "restart" for k in io})
        d.save(self.vms.dir(ref.name))
        return result
