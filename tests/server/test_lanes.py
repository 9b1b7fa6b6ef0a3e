"""The fast lanes (server/lanes.py): a run's two requests answered past FastAPI's routing, and
everything the lane does not take handed on to the application unchanged."""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import orjson

from thinkloop.core.errors import NotFoundError, RunLimitError
from thinkloop.server.lanes import Lanes


@dataclass
class FakeRun:
    id: str = "r1"
    status: str = "running"
    agent: str = "helper"
    session: str | None = None


@dataclass
class FakeGateway:
    """What a lane asks of the gateway: no auth, ``submit`` and ``run``, recorded."""

    fail: Exception | None = None
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    config: Any = field(default_factory=lambda: SimpleNamespace(no_auth=True))

    async def submit(self, who: Any, agent: str, task: str, session: str | None,
                     stream: bool, priority: int = 0) -> FakeRun:
        self.calls.append(("submit", who.user, agent, task, session, stream, priority))
        if self.fail is not None:
            raise self.fail
        return FakeRun(agent=agent, session=session)

    async def run(self, who: Any, run_id: str, *, to_follow: bool = False) -> FakeRun:
        self.calls.append(("run", who.user, run_id))
        raise NotFoundError(f"no run {run_id}")


def call(gw: FakeGateway, method: str, path: str, body: bytes = b"", query: bytes = b"",
         headers: tuple[tuple[bytes, bytes], ...] = ((b"content-type", b"application/json"),)
         ) -> tuple[list[dict[str, Any]], list[bytes]]:
    """The lane's answer (its messages) and the bodies the application behind it read (an
    application that answers 299 when it is reached)."""
    sent: list[dict[str, Any]] = []
    reached: list[bytes] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append((await receive())["body"])
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    scope = {"type": "http", "method": method, "path": path, "query_string": query,
             "headers": list(headers), "app": SimpleNamespace(state=SimpleNamespace(gateway=gw))}
    asyncio.run(Lanes(app)(scope, receive, send))
    return sent, reached


def test_a_run_request_is_started_by_the_lane_with_the_routes_answer() -> None:
    gw = FakeGateway()
    body = orjson.dumps({"agent": "helper", "task": "hi", "session": "s", "priority": 3})
    sent, reached = call(gw, "POST", "/v1/runs", body)
    assert reached == []  # the application never saw it
    assert gw.calls == [("submit", "local", "helper", "hi", "s", True, 3)]
    assert sent[0]["status"] == 202
    assert dict(sent[0]["headers"])[b"content-type"] == b"application/json"
    assert orjson.loads(sent[1]["body"]) == {
        "id": "r1", "status": "running", "agent": "helper", "session": "s", "priority": 3,
        "events": "/v1/runs/r1/events"}


def test_what_the_lane_does_not_take_reaches_the_application_with_its_body() -> None:
    gw = FakeGateway()
    for body, headers in [
        (b'{"agent": "helper"}', ((b"content-type", b"application/json"),)),  # no task
        (b'{"task": "hi", "colour": 1}', ()),  # a field the request does not have
        (b"not json", ()),
        (b'{"task": "hi"}', ((b"content-type", b"text/plain"),)),
    ]:
        sent, reached = call(gw, "POST", "/v1/runs", body, headers=headers)
        assert reached == [body] and sent[0]["status"] == 299
    for query in (b"after=x", b"after=1&x=2", b"other=1"):
        sent, reached = call(gw, "GET", "/v1/runs/r1/events", query=query)
        assert reached == [b""] and sent[0]["status"] == 299
    assert gw.calls == []


def test_the_lanes_answer_errors_as_the_routes_do() -> None:
    gw = FakeGateway(fail=RunLimitError("you already have 1 runs in progress"))
    sent, reached = call(gw, "POST", "/v1/runs", b'{"task": "hi"}')
    assert reached == [] and sent[0]["status"] == 429
    assert dict(sent[0]["headers"])[b"retry-after"] == b"1"
    assert orjson.loads(sent[1]["body"]) == {"error": {
        "message": "you already have 1 runs in progress", "type": "rate_limit_error",
        "code": 429}}
    sent, reached = call(FakeGateway(), "GET", "/v1/runs/nope/events", query=b"after=2")
    assert reached == [] and sent[0]["status"] == 404
    assert orjson.loads(sent[1]["body"])["error"]["type"] == "not_found_error"
