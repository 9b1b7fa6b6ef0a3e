"""Runs through the gateway with real HTTP clients: start, stream, reconnect, inputs, abort."""

from __future__ import annotations

import json
import subprocess
import time

from tests.server.conftest import Stack, wait_for
from tests.server.sse import read_events

from thinkloop.testing.openai_server import Reply, completion


def calling(call_id: str, name: str, args: dict[str, object]) -> Reply:
    """A reply asking for one tool call, with an id of its own (the model's, not ours)."""
    body = completion(tool_calls=[(name, args)])
    body["choices"][0]["message"]["tool_calls"][0]["id"] = call_id
    return Reply(body=body)


def test_start_returns_at_once_then_events_stream_and_the_run_is_readable(stack: Stack) -> None:
    stack.model.clear()
    stack.model.enqueue(
        Reply(body=completion(tool_calls=[("calculator", {"expression": "12*7"})])),
        Reply(body=completion("12*7 is 84.")),
    )
    stack.model.pause()  # the model answers only once the run was seen running
    with stack.client(stack.gateway.key("ana")) as c:
        try:
            r = c.post("/v1/runs", json={"agent": "helper", "task": "What is 12*7?",
                                         "session": "math"})
            assert r.status_code == 202, r.text
            run_id = r.json()["id"]
            # It answered before the model did.
            assert r.json()["status"] == "running"
            assert c.get(f"/v1/runs/{run_id}").json()["status"] == "running"
        finally:
            stack.model.resume()
        events, end = read_events(c, run_id)
        assert end == {"run_id": run_id, "status": "completed"}
        types = [e["type"] for e in events]
        assert types[0] == "run.started" and types[-1] == "run.completed"
        assert [e["id"] for e in events] == list(range(1, len(events) + 1))
        call = next(e for e in events if e["type"] == "tool.call")
        assert call["payload"]["name"] == "calculator"
        assert call["payload"]["arguments"] == {"expression": "12*7"}
        result = next(e for e in events if e["type"] == "tool.result")
        assert result["payload"]["content"] == "84" and result["payload"]["is_error"] is False
        assert events[-1]["payload"]["output"] == "12*7 is 84."
        text = "".join(e["payload"]["content"] for e in events
                       if e["type"] == "chunk" and e["payload"]["kind"] == "text")
        assert text == "12*7 is 84."

        run = c.get(f"/v1/runs/{run_id}").json()
        assert run["status"] == "completed" and run["text"] == "12*7 is 84."
        assert run["session"] == "math" and run["agent"] == "helper"
        assert run["steps"][0]["tool_calls"][0]["name"] == "calculator"
        assert run["usage"]["requests"] == 2

        session = c.get("/v1/sessions/math").json()
        assert [m["role"] for m in session["messages"]] == ["user", "assistant", "tool",
                                                             "assistant"]
        assert session["messages"][0]["content"] == "What is 12*7?"
        assert session["runs"] == [{"id": run_id, "status": "completed", "agent": "helper"}]

        # The run's trace, as the store keeps it (tracing.py): one tree under the run's span.
        wait_for(lambda: c.get(f"/v1/runs/{run_id}/trace").status_code == 200
                 and len(c.get(f"/v1/runs/{run_id}/trace").json()["spans"]) >= 4)
        spans = c.get(f"/v1/runs/{run_id}/trace").json()["spans"]
        names = [sp["name"] for sp in spans]
        assert names[0] == "invoke_agent helper"
        assert names.count("chat openai:fake") == 2 and names.count("execute_tool calculator") == 1
        root = spans[0]
        assert root["parent_id"] is None
        assert root["attributes"]["thinkloop.run.id"] == run_id
        assert all(sp["parent_id"] == root["span_id"] for sp in spans[1:])
        tool_span = next(sp for sp in spans if sp["name"] == "execute_tool calculator")
        assert tool_span["attributes"]["gen_ai.tool.call.result"] == "84"
        # Another user may not read it.
        with stack.client(stack.gateway.key("bob")) as other:
            assert other.get(f"/v1/runs/{run_id}/trace").status_code in (403, 404)

        metrics = c.get("/metrics").text
        assert 'thinkloop_runs_total{status="completed"}' in metrics
        assert "thinkloop_step_seconds_count" in metrics
        assert 'thinkloop_tokens_total{kind="input"}' in metrics


def test_reconnecting_with_last_event_id_misses_nothing(stack: Stack) -> None:
    stack.model.clear()
    stack.model.enqueue(
        calling("c1", "calculator", {"expression": "2**10"}),
        Reply(body=calling("c2", "calculator", {"expression": "1024/4"}).body, delay_s=0.5),
        Reply(body=completion("2**10 is 1024 and a quarter of it is 256.")),
    )
    with stack.client(stack.gateway.key("ana")) as c:
        run_id = c.post("/v1/runs", json={"agent": "helper", "task": "2**10, then /4"}).json()[
            "id"]
        first, end = read_events(c, run_id, stop_after=3)  # the client drops the connection
        assert end == {} and [e["id"] for e in first] == [1, 2, 3]
        rest, end = read_events(c, run_id, last_event_id=3)
        assert end["status"] == "completed"
        assert [e["id"] for e in rest] == list(range(4, 4 + len(rest)))
        whole, _ = read_events(c, run_id)  # a finished run replays from the start
        assert whole == first + rest
        results = [e["payload"]["content"] for e in whole if e["type"] == "tool.result"]
        assert results == ["1024", "256"]
        # A finished run's events are all ready at once: the wire still carries one
        # standard frame per event (id, event, data), whatever the writes that carried them.
        r = c.get(f"/v1/runs/{run_id}/events", headers={"Last-Event-ID": "3"})
        frames = r.content.split(b"\r\n\r\n")
        assert frames[:len(rest)] == [
            b"id: %d\r\nevent: event\r\ndata: %s" % (e["id"], json.dumps(
                e, separators=(",", ":"), ensure_ascii=False).encode()) for e in rest]
        assert frames[len(rest)].startswith(b"event: end\r\ndata: ")


def test_an_approval_is_answered_through_the_api(stack: Stack) -> None:
    stack.model.clear()
    stack.model.enqueue(
        calling("call_a", "calculator", {"expression": "6*7"}),
        calling("call_b", "calculator", {"expression": "6*8"}),
        Reply(body=completion("6*7 is 42; I was not allowed to compute 6*8.")),
    )
    with stack.client(stack.gateway.key("ana")) as c:
        run_id = c.post("/v1/runs", json={"agent": "worker", "task": "6*7 and 6*8"}).json()["id"]
        asked, _ = read_events(c, run_id, stop_after=1)
        wait_for(lambda: c.get(f"/v1/runs/{run_id}").json()["waiting_for"] != [])
        (waiting,) = c.get(f"/v1/runs/{run_id}").json()["waiting_for"]
        assert waiting == {"id": "call_a", "kind": "approval"}
        r = c.post(f"/v1/runs/{run_id}/input", json={"id": waiting["id"], "approved": True})
        assert r.status_code == 200 and r.json()["kind"] == "approval"
        # The same input cannot be answered twice.
        again = c.post(f"/v1/runs/{run_id}/input", json={"id": waiting["id"], "approved": True})
        assert again.status_code == 409
        wait_for(lambda: len(c.get(f"/v1/runs/{run_id}").json()["waiting_for"]) == 1
                 and c.get(f"/v1/runs/{run_id}").json()["waiting_for"][0]["id"] != waiting["id"])
        (second,) = c.get(f"/v1/runs/{run_id}").json()["waiting_for"]
        assert second == {"id": "call_b", "kind": "approval"}
        c.post(f"/v1/runs/{run_id}/input", json={"id": second["id"], "approved": False,
                                                 "reason": "not today"})
        events, end = read_events(c, run_id)
        assert end["status"] == "completed"
        requested = [e["payload"] for e in events if e["type"] == "approval.requested"]
        assert [p["arguments"] for p in requested] == [{"expression": "6*7"},
                                                        {"expression": "6*8"}]
        decided = [(p["approved"], p["reason"]) for p in
                   (e["payload"] for e in events if e["type"] == "approval.decided")]
        assert decided == [(True, "answered through the gateway"), (False, "not today")]
        results = [e["payload"] for e in events if e["type"] == "tool.result"]
        assert results[0]["content"] == "42" and results[1]["is_error"] is True
        assert "not today" in results[1]["content"]
        assert asked[0]["type"] == "run.started"


def test_abort_mid_tool_kills_the_command_and_keeps_the_session(stack: Stack) -> None:
    stack.model.clear()
    marker = "31.4159"
    stack.model.enqueue(
        Reply(body=completion(tool_calls=[("shell", {"command": f"sleep {marker}"})])),
        Reply(body=completion("never reached")),
    )
    with stack.client(stack.gateway.key("ana")) as c:
        run_id = c.post("/v1/runs", json={"agent": "worker", "task": "wait a while",
                                          "session": "slow"}).json()["id"]

        def sleeping() -> bool:
            state = c.get(f"/v1/runs/{run_id}").json()
            for w in state["waiting_for"]:  # if shell asks for approval, grant it
                c.post(f"/v1/runs/{run_id}/input", json={"id": w["id"], "approved": True})
            return subprocess.run(["pgrep", "-f", f"sleep {marker}"],
                                  capture_output=True).returncode == 0

        wait_for(sleeping)
        t0 = time.perf_counter()
        r = c.post(f"/v1/runs/{run_id}/abort")
        assert r.status_code == 202 and r.json() == {"id": run_id, "status": "cancelling"}
        events, end = read_events(c, run_id)
        assert end["status"] == "cancelled" and time.perf_counter() - t0 < 5
        assert events[-1]["type"] == "run.cancelled"
        wait_for(lambda: subprocess.run(["pgrep", "-f", f"sleep {marker}"],
                                        capture_output=True).returncode != 0)
        assert c.post(f"/v1/runs/{run_id}/abort").status_code == 409  # it has ended
        # A cancelled run leaves its session as it was: nothing saved.
        assert c.get("/v1/sessions/slow").json()["messages"] == []


def test_abort_a_whole_session(stack: Stack) -> None:
    stack.model.clear()
    stack.model.enqueue(calling("c1", "calculator", {"expression": "1+1"}))
    with stack.client(stack.gateway.key("ben")) as c:
        # The first run waits for an approval; the second waits for the session.
        ids = [c.post("/v1/runs", json={"agent": "worker", "task": f"t{i}",
                                        "session": "chat"}).json()["id"] for i in range(2)]
        wait_for(lambda: c.get(f"/v1/runs/{ids[0]}").json()["waiting_for"] != [])
        assert c.get(f"/v1/runs/{ids[1]}").json()["status"] == "running"
        r = c.post("/v1/sessions/chat/abort")
        assert r.status_code == 202 and r.json()["aborted"] == ids
        for run_id in ids:
            _, end = read_events(c, run_id)
            assert end["status"] == "cancelled"


def test_aborting_a_run_queued_behind_its_session_ends_it_cancelled(stack: Stack) -> None:
    stack.model.clear()
    stack.model.enqueue(calling("c1", "calculator", {"expression": "2+2"}))
    with stack.client(stack.gateway.key("dee")) as c:
        first, queued = (c.post("/v1/runs", json={"agent": "worker", "task": f"t{i}",
                                                  "session": "line"}).json()["id"]
                         for i in range(2))
        wait_for(lambda: c.get(f"/v1/runs/{first}").json()["waiting_for"] != [])
        assert c.post(f"/v1/runs/{queued}/abort").status_code == 202
        events, end = read_events(c, queued)
        # A result like any aborted run's, and the same last event.
        assert end == {"run_id": queued, "status": "cancelled"}
        assert [e["type"] for e in events] == ["run.cancelled"]
        run = c.get(f"/v1/runs/{queued}").json()
        assert run["status"] == "cancelled" and run["steps"] == [] and run["error"] is None
        assert c.get(f"/v1/runs/{first}").json()["status"] == "running"  # untouched
        assert c.post(f"/v1/runs/{first}/abort").status_code == 202
        assert read_events(c, first)[1]["status"] == "cancelled"


def test_ask_human_and_send_message_reach_the_client(stack: Stack) -> None:
    stack.model.clear()
    stack.model.enqueue(
        calling("m1", "send_message", {"text": "Looking into your request."}),
        calling("q1", "ask_human", {"question": "Which colour do you want?"}),
        Reply(body=completion("Blue it is.")),
    )
    with stack.client(stack.gateway.key("ana")) as c:
        run_id = c.post("/v1/runs", json={"agent": "asker", "task": "paint the fence"}
                        ).json()["id"]
        wait_for(lambda: any(w["kind"] == "question" for w in
                             c.get(f"/v1/runs/{run_id}").json()["waiting_for"]))
        (waiting,) = c.get(f"/v1/runs/{run_id}").json()["waiting_for"]
        r = c.post(f"/v1/runs/{run_id}/input", json={"id": waiting["id"], "approved": True})
        assert r.status_code == 400
        assert r.json()["error"]["message"] == (
            f"input {waiting['id']!r} is a question: answer it with 'answer'")
        r = c.post(f"/v1/runs/{run_id}/input", json={"id": waiting["id"], "answer": "blue"})
        assert r.status_code == 200 and r.json()["kind"] == "question", r.text
        events, end = read_events(c, run_id)
        assert end["status"] == "completed"
        said = [e["payload"] for e in events if e["type"] == "message"]
        assert said == [{"text": "Looking into your request.", "recipient": None}]
        (asked,) = [e for e in events if e["type"] == "input.requested"]
        assert asked["payload"] == {"id": waiting["id"], "kind": "question",
                                    "question": "Which colour do you want?"}
        results = [e["payload"]["content"] for e in events if e["type"] == "tool.result"]
        # The answer comes back to the model as the tool's result (marked as outside text).
        assert "The user answered: blue" in results[1]
        # Numbering stays one sequence across the loop's events and the gateway's own.
        assert [e["id"] for e in events] == list(range(1, len(events) + 1))
