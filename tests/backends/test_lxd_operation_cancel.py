"""A successful cancel of a running operation, on each of the lab's LXD/Incus remotes.

A backup, the long operation corral starts most, says ``may_cancel: false`` on LXD 5.0.2
(tests/backends/test_lxd_lifecycle_ops.py pins the refusal during an export). A trust token is an operation the daemon keeps running
until the token is used, and cancelling it is how the token is revoked (what
``lxc config trust revoke-token`` does): the operation corral cancels here. The effect is
checked in the daemon's own words: the operation event says it was cancelled, and the CLI
no longer lists the token."""

from __future__ import annotations

import asyncio
import json
import time

from backend_checks import watching

from backends.models import EventKind


def tokens(daemon) -> str:
    """The pending trust tokens, as the CLI lists them (its JSON names each token's client:
    ``client_name`` on Incus, inside the request on LXD 5.0.2)."""
    out = daemon.cli("config", "trust", "list-tokens", "--format", "json").stdout
    json.loads(out)  # the CLI answered with its list
    return out


def operation_text(daemon, op_id: str) -> str:
    """What `lxc query /1.0/operations/<id>` answers ("" once it is gone)."""
    return daemon.cli("query", f"/1.0/operations/{op_id}", check=False).stdout


async def test_a_running_operation_is_cancelled(remote_backend, unique):
    name, backend, info, daemon = remote_backend
    client = unique()
    before = {op.id for op in await backend.list_operations()}
    async with watching(backend) as events:
        first = await asyncio.wait_for(events.get(), 10)
        assert (first.kind, first.action) == (EventKind.CONNECTION, "connected")
        await asyncio.to_thread(daemon.trust_token, client)
        assert client in tokens(daemon)
        # the daemon's own background tasks may run meanwhile: the token's operation is the
        # new one whose request names the client
        new = [op for op in await backend.list_operations()
               if op.id not in before and client in operation_text(daemon, op.id)]
        assert len(new) == 1, new
        op = new[0]
        print(f"\n[{name}] running: {op}")
        assert op.status == "Running" and op.may_cancel and not op.done
        assert op.remote == name and not op.interactive

        await backend.cancel_operation(op.id)

        deadline = time.monotonic() + 15
        while True:
            ev = await asyncio.wait_for(events.get(), max(0.1, deadline - time.monotonic()))
            if ev.kind is EventKind.OPERATION and ev.operation and ev.operation.id == op.id \
                    and ev.operation.done:
                break
        print(f"[{name}] ended: {ev.operation}")
        assert ev.operation.status == "Cancelled"
    assert client not in tokens(daemon)
