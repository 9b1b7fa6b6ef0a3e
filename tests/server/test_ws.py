"""The WebSocket ``/v1/ws`` driven by the ``websockets`` client."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.server.conftest import Stack
from tests.server.test_runs import calling
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus

from thinkloop.testing.openai_server import Reply, completion


def ws_url(stack: Stack) -> str:
    return stack.url.replace("http://", "ws://") + "/v1/ws"


async def recv(ws: ClientConnection) -> dict[str, Any]:
    frame: dict[str, Any] = json.loads(await ws.recv())
    return frame


async def until_end(ws: ClientConnection, run_id: str) -> tuple[list[dict[str, Any]], str]:
    events: list[dict[str, Any]] = []
    while True:
        frame = await recv(ws)
        if frame["type"] == "event" and frame["event"]["run_id"] == run_id:
            events.append(frame["event"])
        elif frame["type"] == "run.end" and frame["run_id"] == run_id:
            return events, frame["status"]


async def test_without_a_valid_key_the_handshake_is_refused(stack: Stack) -> None:
    # Refused before the socket opens: no frame, no run, nothing held open.
    for headers in ({}, {"Authorization": "Bearer tlk_0000_not-a-real-key"}):
        with pytest.raises(InvalidStatus) as refused:
            async with connect(ws_url(stack), additional_headers=headers):
                raise AssertionError("the socket opened")
        assert refused.value.response.status_code == 403


async def test_run_stream_answer_an_approval_and_resume(stack: Stack) -> None:
    stack.model.clear()
    stack.model.enqueue(calling("call_x", "calculator", {"expression": "9*9"}),
                        Reply(body=completion("9*9 is 81.")))
    headers = {"Authorization": f"Bearer {stack.gateway.key('ana')}"}
    async with connect(ws_url(stack), additional_headers=headers) as ws:
        await ws.send("not json")
        bad = await recv(ws)
        assert bad["type"] == "error" and bad["status"] == 400
        await ws.send(json.dumps({"type": "run", "agent": "nobody", "task": "x"}))
        assert await recv(ws) == {"type": "error", "status": 404,
                                  "message": "no agent named 'nobody'"}
        await ws.send(json.dumps({"type": "run", "agent": "worker", "task": "9*9?"}))
        accepted = await recv(ws)
        assert accepted["type"] == "run.accepted"
        run_id = accepted["run_id"]
        events: list[dict[str, Any]] = []
        while True:
            frame = await recv(ws)
            if frame["type"] == "event":
                events.append(frame["event"])
                if frame["event"]["type"] == "approval.requested":
                    assert frame["event"]["payload"]["arguments"] == {"expression": "9*9"}
                    await ws.send(json.dumps({"type": "input", "run_id": run_id,
                                              "id": "call_x", "approved": True}))
            elif frame["type"] == "input.accepted":
                assert frame == {"type": "input.accepted", "run_id": run_id, "id": "call_x"}
            elif frame["type"] == "run.end":
                assert frame["status"] == "completed"
                break
        assert events[-1]["type"] == "run.completed"
        assert events[-1]["payload"]["output"] == "9*9 is 81."
        # A second subscription resumes after a given event and gets exactly the rest.
        await ws.send(json.dumps({"type": "subscribe", "run_id": run_id, "after": 4}))
        rest, status = await until_end(ws, run_id)
        assert status == "completed" and rest == events[4:]


async def test_abort_over_the_socket(stack: Stack) -> None:
    stack.model.clear()
    stack.model.enqueue(calling("c9", "calculator", {"expression": "1+2"}))
    headers = {"X-API-Key": stack.gateway.key("ana")}
    async with connect(ws_url(stack), additional_headers=headers) as ws:
        await ws.send(json.dumps({"type": "run", "agent": "worker", "task": "1+2"}))
        run_id = (await recv(ws))["run_id"]
        while (frame := await recv(ws))["type"] != "event" or \
                frame["event"]["type"] != "approval.requested":
            pass
        await ws.send(json.dumps({"type": "abort", "run_id": run_id}))
        events, status = await until_end(ws, run_id)
        assert status == "cancelled" and events[-1]["type"] == "run.cancelled"
        await ws.send(json.dumps({"type": "abort", "run_id": run_id}))
        frame = await recv(ws)
        assert frame["type"] == "error" and frame["status"] == 409
