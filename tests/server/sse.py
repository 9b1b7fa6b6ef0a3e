"""Reading the gateway's SSE stream as a client would, with httpx."""

from __future__ import annotations

import json
from typing import Any

import httpx


def read_events(client: httpx.Client, run_id: str, last_event_id: int | None = None,
                stop_after: int | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(events, end) where end is the closing ``end`` frame ({} when we hung up early)."""
    headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
    with client.stream("GET", f"/v1/runs/{run_id}/events", headers=headers) as r:
        return read_stream(r, stop_after)


def read_stream(r: httpx.Response, stop_after: int | None = None
                ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A streamed response's (events, end), as :func:`read_events` reads them."""
    assert r.status_code == 200, r.read()
    assert r.headers["content-type"].startswith("text/event-stream")
    events: list[dict[str, Any]] = []
    frame: dict[str, str] = {}
    for line in r.iter_lines():
        if line.startswith(":"):
            continue
        if line:
            field, _, value = line.partition(":")
            frame[field] = value.removeprefix(" ")
            continue
        if not frame:
            continue
        if frame.get("event") == "end":
            return events, json.loads(frame["data"])
        event = json.loads(frame["data"])
        assert int(frame["id"]) == event["id"]
        events.append(event)
        frame = {}
        if stop_after is not None and len(events) >= stop_after:
            return events, {}
    raise AssertionError("the stream ended without an end frame")
