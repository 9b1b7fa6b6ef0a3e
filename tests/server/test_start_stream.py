"""``POST /v1/runs`` with ``Accept: text/event-stream``: a run started and streamed in one
request, through a real uvicorn (the fast lane) and through FastAPI's route (a gateway
served under a root path, which the lanes leave to the application)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from tests.server.conftest import Stack, start_stack, wait_for
from tests.server.sse import read_events, read_stream
from tests.server.test_runs import calling

from thinkloop.server.sse import wants_stream
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion

STREAM = {"Accept": "text/event-stream"}


@pytest.fixture(scope="module")
def one_run(tmp_path_factory: pytest.TempPathFactory, model_server: OpenAIServer
            ) -> Iterator[Stack]:
    """A gateway that lets each user one run at a time."""
    yield from start_stack(tmp_path_factory.mktemp("one-run"), model_server, per_user_runs=1)


@pytest.fixture(scope="module")
def mounted(tmp_path_factory: pytest.TempPathFactory, model_server: OpenAIServer
            ) -> Iterator[Stack]:
    """A gateway served under ``/api`` (as behind a proxy): FastAPI's routes answer."""
    yield from start_stack(tmp_path_factory.mktemp("mounted"), model_server,
                           uvicorn={"root_path": "/api"})


def started(c: httpx.Client, body: dict[str, object], stop_after: int | None = None
            ) -> tuple[str, list[dict[str, object]], dict[str, object]]:
    """(run id, events, end) of a run started asking for its stream."""
    with c.stream("POST", "/v1/runs", json=body, headers=STREAM) as r:
        assert r.status_code == 200, r.read()
        location = r.headers["location"]
        assert location.startswith("/v1/runs/")
        events, end = read_stream(r, stop_after)
    return location.removeprefix("/v1/runs/"), events, end


def test_a_run_started_asking_for_its_stream_answers_with_it(stack: Stack) -> None:
    stack.model.clear()
    stack.model.enqueue(calling("c1", "calculator", {"expression": "6*7"}),
                        Reply(body=completion("6*7 is 42.")))
    with stack.client(stack.gateway.key("ana")) as c:
        run_id, events, end = started(c, {"agent": "helper", "task": "6*7?"})
        assert end == {"run_id": run_id, "status": "completed"}
        assert [e["id"] for e in events] == list(range(1, len(events) + 1))
        assert events[0]["type"] == "run.started" and events[-1]["type"] == "run.completed"
        assert {e["run_id"] for e in events} == {run_id}  # every event names the run
        # The same events, with the same ids, as the run's own stream gives.
        again, end_again = read_events(c, run_id)
        assert again == events and end_again == end
        run = c.get(f"/v1/runs/{run_id}").json()
        assert run["status"] == "completed" and run["text"] == "6*7 is 42."


def test_a_cut_stream_resumes_with_last_event_id_on_the_runs_events(stack: Stack) -> None:
    stack.model.clear()
    stack.model.enqueue(
        calling("c1", "calculator", {"expression": "2**10"}),
        Reply(body=calling("c2", "calculator", {"expression": "1024/4"}).body, delay_s=0.5),
        Reply(body=completion("1024, and a quarter of it is 256.")),
    )
    with stack.client(stack.gateway.key("ana")) as c:
        run_id, first, end = started(c, {"agent": "helper", "task": "2**10, then /4"},
                                     stop_after=3)  # the client drops the connection
        assert end == {} and [e["id"] for e in first] == [1, 2, 3]
        rest, end = read_events(c, run_id, last_event_id=3)
        assert end == {"run_id": run_id, "status": "completed"}
        assert [e["id"] for e in rest] == list(range(4, 4 + len(rest)))
        whole, _ = read_events(c, run_id)
        assert whole == first + rest
        results = [e["payload"]["content"] for e in whole if e["type"] == "tool.result"]
        assert results == ["1024", "256"]


def test_a_refused_start_is_the_usual_json_error_not_a_stream(one_run: Stack) -> None:
    one_run.model.clear()
    one_run.model.enqueue(Reply(body=completion("done")))
    one_run.model.pause()  # the first run holds the user's one slot
    with one_run.client(one_run.gateway.key("ana")) as c:
        try:
            held = c.post("/v1/runs", json={"agent": "helper", "task": "hold"})
            assert held.status_code == 202
            r = c.post("/v1/runs", json={"agent": "helper", "task": "more"}, headers=STREAM)
            assert r.status_code == 429 and r.headers["retry-after"] == "1"
            assert r.headers["content-type"] == "application/json"
            assert r.json()["error"] == {"message": "you already have 1 runs in progress",
                                         "type": "rate_limit_error", "code": 429}
            r = c.post("/v1/runs", json={"agent": "nobody", "task": "x"}, headers=STREAM)
            assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
            r = c.post("/v1/runs", json={"agent": "helper"}, headers=STREAM)  # no task
            assert r.status_code == 422 and "task" in r.json()["error"]["message"]
        finally:
            one_run.model.resume()
        run_id = held.json()["id"]
        wait_for(lambda: c.get(f"/v1/runs/{run_id}").json()["status"] == "completed")


def test_the_route_answers_with_the_stream_too(mounted: Stack) -> None:
    """Under a root path the lanes step aside: FastAPI's route starts and streams the run."""
    mounted.model.clear()
    mounted.model.enqueue(Reply(body=completion("hello")))
    with mounted.client(mounted.gateway.key("ana")) as c:
        run_id, events, end = started(c, {"agent": "helper", "task": "say hello"})
        assert end == {"run_id": run_id, "status": "completed"}
        assert events[0]["type"] == "run.started" and events[-1]["type"] == "run.completed"
        again, _ = read_events(c, run_id)
        assert again == events
        r = c.post("/v1/runs", json={"agent": "nobody", "task": "x"}, headers=STREAM)
        assert r.status_code == 404 and r.headers["content-type"] == "application/json"
        # Without the header: 202 and the run's id, as ever.
        mounted.model.enqueue(Reply(body=completion("hi")))
        r = c.post("/v1/runs", json={"agent": "helper", "task": "hi"})
        assert r.status_code == 202 and r.json()["events"].endswith("/events")
        read_events(c, r.json()["id"])
        spec = c.get("/openapi.json").json()["paths"]["/v1/runs"]["post"]["responses"]
        assert "text/event-stream" in spec["200"]["content"] and "202" in spec


@pytest.mark.parametrize(("accept", "streams"), [
    (None, False), ("application/json", False), ("*/*", False),
    ("text/event-stream", True), ("application/json, text/event-stream", True),
    ("Text/Event-Stream; charset=utf-8", True), ("text/event-stream;q=0", False),
    ("text/event-stream; q=0.5", True), ("text/event-stream;q=x", False),
])
def test_which_accept_asks_for_the_stream(accept: str | None, streams: bool) -> None:
    assert wants_stream(accept) is streams
