"""A daemon that sends what LXD never does: malformed instance entries and events, and an
endless answer. Served for real on a unix socket (HTTP and the events websocket, by the
websockets server), read by the real LXD backend through pylxd and websockets: the bad
parts are skipped with a logged warning, the rest of the remote keeps working, and
memory stays bounded."""

from __future__ import annotations

import asyncio
import json
import logging

from websockets.asyncio.server import unix_serve
from websockets.datastructures import Headers
from websockets.http11 import Response

from backends import get_backend
from backends.errors import OperationFailed
from backends.lxd.caps import MAX_RESPONSE
from backends.models import EventKind, Remote

GOOD = {"name": "good", "status": "Running", "type": "container", "config": {},
        "project": "default"}
INSTANCES = [
    {"name": 5}, "junk", None, {"name": "bad\x1b[2J"}, {"status": "Running"},
    {"name": "wrong-shapes", "status": "Stopped", "config": "not a map",
     "profiles": [1, "default"], "description": ["x"], "snapshots": 3},
    GOOD,
]
HOST = {"api_version": "1.0", "auth": "trusted", "api_extensions": [],
        "environment": {"server": "lxd", "server_version": "5.0.2", "server_name": "stub"}}
EVENTS = [
    "not json", "[1, 2]", json.dumps({"type": "lifecycle", "metadata": "oops"}),
    json.dumps({"type": "lifecycle", "metadata": {"action": "instance-started",
                                                   "name": ["x"]}}),
    json.dumps({"type": "operation", "metadata": {"id": 7, "status": None,
                                                   "resources": "r"}}),
    json.dumps({"type": "lifecycle", "timestamp": "2026-12-01T00:00:00Z",
                "metadata": {"action": "instance-started", "source": "/1.0/instances/good",
                             "project": "default"}}),
]


def respond(payload: object, status: int = 200) -> Response:
    body = json.dumps({"type": "sync", "status": "Success", "status_code": status,
                       "metadata": payload}).encode()
    return Response(status, "OK", Headers([("Content-Type", "application/json"),
                                           ("Content-Length", str(len(body)))]), body)


async def stub(path: str, huge: bool = False):
    def process_request(connection, request):
        if request.path.startswith("/1.0/events"):
            return None  # the websocket handshake
        if request.path.startswith("/1.0/instances"):
            if huge:
                body = b" " * (MAX_RESPONSE + 1024)
                return Response(200, "OK", Headers([("Content-Type", "application/json"),
                                                    ("Content-Length", str(len(body)))]), body)
            return respond(INSTANCES)
        return respond(HOST)

    async def handler(ws):
        for frame in EVENTS:
            await ws.send(frame)
        await ws.wait_closed()

    return await unix_serve(handler, path, process_request=process_request,
                            max_size=None)


async def test_malformed_entries_and_events_are_skipped_and_logged(tmp_path, caplog):
    sock = str(tmp_path / "unix.socket")
    server = await stub(sock)
    backend = get_backend(Remote("stub", "lxd", f"unix://{sock}"), timeout=5)
    caplog.set_level(logging.WARNING)
    try:
        await backend.connect()
        listed = await backend.list_instances()
        assert [i.name for i in listed] == ["wrong-shapes", "good"]
        assert listed[0].config == {} and listed[0].profiles == ("default",)
        skipped = [r for r in caplog.records if "malformed instance entry" in r.getMessage()]
        assert len(skipped) == 5
        stream = backend.watch()
        seen = []
        async with asyncio.timeout(10):
            async for ev in stream:
                seen.append(ev)
                if ev.kind is EventKind.LIFECYCLE and ev.ref and ev.ref.name == "good":
                    break
        await stream.aclose()
        assert seen[0].action == "connected" and seen[-1].action == "instance-started"
        assert not any(e.action == "disconnected" for e in seen)  # the stream lived on
        assert any("malformed event" in r.getMessage() for r in caplog.records)
        assert (await backend.list_instances())[-1].name == "good"  # still working
    finally:
        await backend.close()
        server.close()


async def test_an_endless_answer_is_refused_not_read_into_memory(tmp_path):
    sock = str(tmp_path / "unix.socket")
    server = await stub(sock, huge=True)
    backend = get_backend(Remote("stub", "lxd", f"unix://{sock}"), timeout=10)
    try:
        await backend.connect()
        try:
            await backend.list_instances()
        except OperationFailed as e:
            assert "over corral's limit" in e.message
        else:
            raise AssertionError("a 64 MiB answer was accepted")
    finally:
        await backend.close()
        server.close()
