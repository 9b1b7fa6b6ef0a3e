"""Two gateways and two workers as separate processes: runs started on one gateway, followed,
aborted and answered through the other, surviving a worker killed or stopped under them."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import redis
from tests.server.sse import read_events, read_stream
from tests.workers.conftest import REDIS_URL, Fleet
from websockets.asyncio.client import connect

from thinkloop.testing.openai_server import Reply, completion


def calling(call_id: str, name: str, args: dict[str, object]) -> Reply:
    body = completion(tool_calls=[(name, args)])
    body["choices"][0]["message"]["tool_calls"][0]["id"] = call_id
    return Reply(body=body)


def waiting_for(base: str, run_id: str, kind: str) -> dict[str, str]:
    deadline = time.monotonic() + 30
    while True:
        waits = httpx.get(f"{base}/v1/runs/{run_id}", timeout=10).json()["waiting_for"]
        if waits and waits[0]["kind"] == kind:
            return dict(waits[0])
        assert time.monotonic() < deadline, (
            f"the run never waited for a {kind}: "
            + httpx.get(f"{base}/v1/runs/{run_id}", timeout=10).text)
        time.sleep(0.05)


def _exactly_once(fleet: Fleet, ids: list[str], steps: int) -> None:
    """Every run's tool calls (step 1..steps) executed once each, none twice."""
    wanted = set(ids)
    counts = Counter(e for e in fleet.executions() if e[0] in wanted)
    twice = {k: n for k, n in counts.items() if n != 1}
    assert twice == {}, f"executed more than once: {twice}"
    assert sorted(counts) == sorted((r, f"step {i}") for r in ids for i in range(1, steps + 1))


def test_a_run_on_a_worker_streams_from_the_other_gateway_and_resumes_without_a_gap(
        fleet: Fleet) -> None:
    run_id = fleet.start(fleet.g1, "slow")
    with httpx.Client(base_url=fleet.g2, timeout=30) as c2:
        first, end = read_events(c2, run_id, stop_after=5)
        assert end == {} and [e["id"] for e in first] == [1, 2, 3, 4, 5]
        assert first[0]["type"] == "run.started" and first[0]["run_id"] == run_id
        # Reconnect to gateway 1 with the last id seen on gateway 2.
        with httpx.Client(base_url=fleet.g1, timeout=30) as c1:
            rest, end = read_events(c1, run_id, last_event_id=5)
            assert end == {"run_id": run_id, "status": "completed"}
            whole, _ = read_events(c1, run_id)
    ids = [e["id"] for e in first + rest]
    assert ids == list(range(1, len(ids) + 1))  # no gap, no duplicate
    assert first + rest == whole  # the same events under the same ids on both gateways
    assert rest[-1]["type"] == "run.completed"
    view = fleet.status(fleet.g2, run_id)
    assert view["status"] == "completed" and view["events"] == len(whole)
    assert view["worker"] in ("w1", "w2") and view["output"] == "done after 6 steps"


def test_a_run_queued_and_streamed_in_one_request_resumes_on_the_other_gateway(
        fleet: Fleet) -> None:
    """``POST /v1/runs`` with ``Accept: text/event-stream`` queues the run and answers with
    its stream; cut, it resumes on the other gateway with ``Last-Event-ID``, no gap."""
    with httpx.Client(base_url=fleet.g1, timeout=30, headers=fleet.token(fleet.g1)) as c1:
        with c1.stream("POST", "/v1/runs", json={"task": "go", "agent": "slow"},
                       headers={"Accept": "text/event-stream"}) as r:
            run_id = r.headers["location"].removeprefix("/v1/runs/")
            first, end = read_stream(r, stop_after=5)
        assert end == {} and [e["id"] for e in first] == [1, 2, 3, 4, 5]
        assert first[0]["type"] == "run.started" and first[0]["run_id"] == run_id
        r = c1.post("/v1/runs", json={"task": "go", "agent": "nobody"},
                    headers={"Accept": "text/event-stream"})
        assert r.status_code == 404 and r.headers["content-type"] == "application/json"
    with httpx.Client(base_url=fleet.g2, timeout=30) as c2:
        rest, end = read_events(c2, run_id, last_event_id=5)
        assert end == {"run_id": run_id, "status": "completed"}
        whole, _ = read_events(c2, run_id)
    ids = [e["id"] for e in first + rest]
    assert ids == list(range(1, len(ids) + 1)) and first + rest == whole
    assert rest[-1]["type"] == "run.completed"


def test_abort_through_the_other_gateway_stops_the_run_within_two_seconds(fleet: Fleet) -> None:
    run_id = fleet.start(fleet.g1, "slow")
    with httpx.Client(base_url=fleet.g1, timeout=30) as c1:
        read_events(c1, run_id, stop_after=3)  # it is running on a worker
    asked = time.monotonic()
    r = fleet.post(f"{fleet.g2}/v1/runs/{run_id}/abort", timeout=10)
    assert r.status_code == 202 and r.json()["status"] == "cancelling"
    while (view := fleet.status(fleet.g2, run_id))["finished_at"] is None:
        assert time.monotonic() - asked < 2.0, "the run was not stopped within 2 s"
        time.sleep(0.05)
    assert view["status"] == "cancelled"
    with httpx.Client(base_url=fleet.g2, timeout=30) as c2:
        events, end = read_events(c2, run_id)
    assert end["status"] == "cancelled" and events[-1]["type"] == "run.cancelled"
    again = fleet.post(f"{fleet.g1}/v1/runs/{run_id}/abort", timeout=10)
    assert again.status_code == 409


def test_a_question_and_an_approval_are_answered_through_either_gateway(fleet: Fleet) -> None:
    fleet.model.enqueue(
        calling("q1", "ask_human", {"question": "Which number?"}),
        calling("c1", "calculator", {"expression": "6*7"}),
        Reply(body=completion("It is 42.")))
    run_id = fleet.start(fleet.g1, "asker", "pick a number and multiply it")
    question = waiting_for(fleet.g2, run_id, "question")
    wrong = fleet.post(f"{fleet.g2}/v1/runs/{run_id}/input",
                       json={"id": question["id"], "approved": True}, timeout=10)
    assert wrong.status_code == 400  # a question is answered with 'answer'
    r = fleet.post(f"{fleet.g2}/v1/runs/{run_id}/input",
                   json={"id": question["id"], "answer": "six"}, timeout=10)
    assert r.status_code == 200 and r.json()["kind"] == "question"
    approval = waiting_for(fleet.g1, run_id, "approval")
    assert approval == {"id": "c1", "kind": "approval"}
    r = fleet.post(f"{fleet.g1}/v1/runs/{run_id}/input",
                   json={"id": "c1", "approved": True}, timeout=10)
    assert r.status_code == 200 and r.json()["kind"] == "approval"
    (view,) = fleet.wait_done(fleet.g2, [run_id])
    assert view["status"] == "completed" and view["text"] == "It is 42."
    with httpx.Client(base_url=fleet.g2, timeout=30) as c:
        events, _ = read_events(c, run_id)
    asked = [e["payload"] for e in events if e["type"] == "input.requested"]
    assert asked == [{"id": question["id"], "kind": "question", "question": "Which number?"}]
    results = [e["payload"]["content"] for e in events if e["type"] == "tool.result"]
    assert "The user answered: six" in results[0] and results[1] == "42"
    assert [e["id"] for e in events] == list(range(1, len(events) + 1))


def test_an_approval_answered_twice_at_once_through_two_gateways_is_taken_once(
        fleet: Fleet) -> None:
    fleet.model.enqueue(
        calling("c2", "calculator", {"expression": "6*7"}),
        Reply(body=completion("It is 42.")))
    run_id = fleet.start(fleet.g1, "asker", "multiply")
    waiting_for(fleet.g2, run_id, "approval")
    answers = [(fleet.g1, True), (fleet.g2, False)] * 3

    def answer(given: tuple[str, bool]) -> int:
        base, approved = given
        return fleet.post(f"{base}/v1/runs/{run_id}/input",
                          json={"id": "c2", "approved": approved}, timeout=10).status_code

    with ThreadPoolExecutor(len(answers)) as pool:
        codes = list(pool.map(answer, answers))
    assert sorted(codes) == [200] + [409] * (len(answers) - 1), codes
    approved = answers[codes.index(200)][1]
    (view,) = fleet.wait_done(fleet.g1, [run_id])
    assert view["status"] == "completed"
    with httpx.Client(base_url=fleet.g2, timeout=30) as c:
        events, _ = read_events(c, run_id)
    decided = [e["payload"] for e in events if e["type"] == "tool.result"]
    assert len(decided) == 1 and (decided[0]["content"] == "42") == approved, decided


def test_get_runs_on_any_gateway_lists_the_runs_executing_on_workers(fleet: Fleet) -> None:
    run_id = fleet.start(fleet.g1, "slow", "listed")
    _running(fleet, run_id)
    listed = httpx.get(f"{fleet.g2}/v1/runs", timeout=10).json()["runs"]
    (row,) = [r for r in listed if r["id"] == run_id]
    assert row["status"] == "running" and row["worker"] in ("w1", "w2")
    assert (row["agent"], row["task"], row["ended_at"]) == ("slow", "listed", None)
    fleet.wait_done(fleet.g1, [run_id])
    listed = httpx.get(f"{fleet.g2}/v1/runs", timeout=10).json()["runs"]
    (row,) = [r for r in listed if r["id"] == run_id]
    assert row["status"] == "completed" and row["ended_at"] is not None


def test_chat_completions_run_on_the_workers_streamed_or_not(fleet: Fleet) -> None:
    body = {"model": "steps", "messages": [
        {"role": "user", "content": "earlier turn"},
        {"role": "assistant", "content": "earlier answer"},
        {"role": "user", "content": "go"}]}
    r = fleet.post(f"{fleet.g2}/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["choices"][0]["message"]["content"] == "done after 2 steps"
    assert got["thinkloop"]["status"] == "completed" and got["thinkloop"]["steps"] == 3
    assert got["usage"]["total_tokens"] > 0
    view = fleet.status(fleet.g1, got["thinkloop"]["run_id"])
    assert view["worker"] in ("w1", "w2")  # it ran on a worker, not in the gateway
    chunks = []
    with httpx.stream("POST", f"{fleet.g1}/v1/chat/completions", timeout=60,
                      headers=fleet.token(fleet.g1),
                      json={**body, "stream": True,
                            "stream_options": {"include_usage": True}}) as s:
        for line in s.iter_lines():
            if line.startswith("data: "):
                chunks.append(line.removeprefix("data: "))
    assert chunks[-1] == "[DONE]"
    parsed = [json.loads(c) for c in chunks[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "")
                   for c in parsed if c["choices"])
    assert text.endswith("done after 2 steps")
    assert parsed[-2]["choices"][0]["finish_reason"] == "stop"
    assert parsed[-1]["usage"]["total_tokens"] > 0
    run_id = parsed[0]["id"].removeprefix("chatcmpl-")
    assert fleet.status(fleet.g2, run_id)["worker"] in ("w1", "w2")


def test_per_user_limits_hold_across_two_gateways(fleet: Fleet) -> None:
    g3 = fleet.gateway(THINKLOOP_GATEWAY_PER_USER_RUNS="2")
    g4 = fleet.gateway(THINKLOOP_GATEWAY_PER_USER_RUNS="2")
    fleet.wait_ready()
    fleet.hold(0)
    try:
        ids = [fleet.start(g3, "steps"), fleet.start(g4, "steps")]
        refused = fleet.post(g3 + "/v1/runs", json={"task": "x", "agent": "steps"}, timeout=10)
        assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
        assert "2 runs in progress" in refused.json()["error"]["message"]
        assert fleet.post(g4 + "/v1/runs", json={"task": "x", "agent": "steps"},
                          timeout=10).status_code == 429
    finally:
        fleet.model.resume()
    fleet.wait_done(g3, ids)
    again = fleet.start(g4, "steps")  # slots come back when runs end
    fleet.wait_done(g3, [again])


def test_two_runs_on_one_session_from_two_gateways_serialise(fleet: Fleet) -> None:
    a = fleet.start(fleet.g1, "steps", "first task", session="shared")
    b = fleet.start(fleet.g2, "steps", "second task", session="shared")
    views = fleet.wait_done(fleet.g1, [a, b])
    assert [v["status"] for v in views] == ["completed", "completed"]
    messages = httpx.get(f"{fleet.g2}/v1/sessions/shared", timeout=10).json()["messages"]
    roles = [m["role"] for m in messages]
    # Two whole turns, one after the other: user, (assistant call, tool result) x2, answer;
    # then the second, whose model (steps-2, counting the tool results it is sent) sees the
    # first turn's two results and answers at once. Interleaved, neither would look so.
    turn = ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert roles == [*turn, "user", "assistant"]
    assert {messages[0]["content"], messages[6]["content"]} == {"first task", "second task"}
    first = a if messages[0]["content"] == "first task" else b
    _exactly_once(fleet, [first], 2)


def test_two_hundred_queued_runs_drain_none_lost_none_twice(fleet: Fleet) -> None:
    def submit(i: int) -> str:
        return fleet.start(fleet.g1 if i % 2 else fleet.g2, "one", f"task {i}")

    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(submit, range(200)))
    assert len(set(ids)) == 200
    views = fleet.wait_done(fleet.g1, ids, timeout=90)
    assert Counter(v["status"] for v in views) == {"completed": 200}
    assert {v["worker"] for v in views} == {"w1", "w2"}  # both took a share
    _exactly_once(fleet, ids, 1)
    assert fleet.metric("thinkloop_queue_depth") == 0
    assert fleet.metric("thinkloop_fleet_active_runs") == 0


def test_a_killed_worker_leaves_its_runs_to_the_other_each_call_executed_once(
        fleet: Fleet) -> None:
    victim = fleet.workers[0]
    ids = fleet.start_in_step(fleet.g1, "slow", 20)
    try:
        on_victim = fleet.runs_on("w1")
        assert on_victim > 0
        before = fleet.metric("thinkloop_fleet_resumes")
        victim.send_signal(signal.SIGKILL)
        victim.wait(5)
    finally:
        fleet.model.resume()
    views = fleet.wait_done(fleet.g2, ids, timeout=60)
    assert Counter(v["status"] for v in views) == {"completed": 20}
    assert {v["worker"] for v in views} == {"w2"}  # w1's runs finished on w2
    _exactly_once(fleet, ids, 6)
    assert fleet.metric("thinkloop_fleet_resumes") == before + on_victim
    assert fleet.metric("thinkloop_fleet_lease_expiries") >= on_victim
    with httpx.Client(base_url=fleet.g1, timeout=30) as c:
        for run_id in ids:  # a taken-over run's events go on under the next ids
            events, end = read_events(c, run_id)
            assert [e["id"] for e in events] == list(range(1, len(events) + 1))
            assert end["status"] == "completed"
    fleet.worker("w3")
    fleet.wait_ready()


def test_a_worker_stopped_with_sigterm_hands_back_its_runs(fleet: Fleet) -> None:
    leaving = fleet.worker("w4", THINKLOOP_WORKER_DRAIN_S="0")
    fleet.wait_ready()
    # The runs start on the leaving worker: the others are paused meanwhile (which worker
    # polls first is chance, and a fast gateway queued all 12 inside one poll of another).
    others = [w for w in fleet.live_workers() if w is not leaving]
    for w in others:
        w.send_signal(signal.SIGSTOP)
    try:
        ids = fleet.start_in_step(fleet.g2, "slow", 12)
    finally:
        for w in others:
            w.send_signal(signal.SIGCONT)
    try:
        on_leaving = fleet.runs_on("w4")
        assert on_leaving == 12
        before = fleet.metric("thinkloop_fleet_handbacks")
        leaving.send_signal(signal.SIGTERM)
        assert leaving.wait(15) == 0, fleet.logs()
    finally:
        fleet.model.resume()
    assert fleet.metric("thinkloop_fleet_handbacks") == before + on_leaving
    views = fleet.wait_done(fleet.g1, ids, timeout=60)
    assert Counter(v["status"] for v in views) == {"completed": 12}, [
        v for v in views if v["status"] != "completed"]
    assert "w4" not in {v["worker"] for v in views}
    _exactly_once(fleet, ids, 6)
    with httpx.Client(base_url=fleet.g1, timeout=30) as c:
        for run_id in ids:  # a handed-back run shows no cancellation, and no gap
            events, _ = read_events(c, run_id)
            assert "run.cancelled" not in {e["type"] for e in events}
            assert [e["id"] for e in events] == list(range(1, len(events) + 1))


def _running(fleet: Fleet, run_id: str) -> None:
    with httpx.Client(base_url=fleet.g1, timeout=30) as c:
        read_events(c, run_id, stop_after=2)


def test_a_session_abort_and_thinkloop_runs_abort_reach_the_workers(fleet: Fleet) -> None:
    on_session = fleet.start(fleet.g1, "slow", "t1", session="to-stop")
    other = fleet.start(fleet.g2, "slow", "t2")
    _running(fleet, on_session)
    _running(fleet, other)
    # Both wait at the model until aborted: a short run could end before the CLI starts.
    fleet.hold(2)
    try:
        seen = httpx.get(f"{fleet.g2}/v1/sessions/to-stop", timeout=10).json()
        assert seen["runs"] == [{"id": on_session, "status": "running", "agent": "slow"}]
        r = fleet.post(f"{fleet.g2}/v1/sessions/to-stop/abort", timeout=10)
        assert r.status_code == 202 and r.json()["aborted"] == [on_session]
        out = fleet.cli("runs", "abort", other)
        assert f"abort requested for run {other}" in out
        views = fleet.wait_done(fleet.g1, [on_session, other], timeout=20)
    finally:
        fleet.model.resume()
    assert [v["status"] for v in views] == ["cancelled", "cancelled"]


async def test_a_run_started_over_the_websocket_runs_on_a_worker(fleet: Fleet) -> None:
    frames: list[dict[str, object]] = []
    async with connect(fleet.g2.replace("http://", "ws://") + "/v1/ws",
                       additional_headers=fleet.token(fleet.g2)) as ws:
        await ws.send(json.dumps({"type": "run", "agent": "steps", "task": "over a socket"}))
        while not frames or frames[-1]["type"] != "run.end":
            frames.append(json.loads(await asyncio.wait_for(ws.recv(), 30)))
    assert frames[0]["type"] == "run.accepted"
    events = [f["event"] for f in frames if f["type"] == "event"]
    assert [e["id"] for e in events] == list(range(1, len(events) + 1))  # type: ignore[index]
    assert frames[-1]["status"] == "completed"
    run_id = str(frames[0]["run_id"])
    assert fleet.status(fleet.g1, run_id)["worker"] in ("w1", "w2", "w3")


def test_a_schedule_fires_once_per_due_time_with_two_workers(fleet: Fleet) -> None:
    assert len(fleet.live_workers()) >= 2  # each looks for due schedules every second
    out = fleet.cli("schedules", "add", "--cron", "* * * * * */3", "--task", "tick",
                    "--agent", "one")
    sid, first = out.split()[0], float(out.split()[-1])
    listed = [json.loads(line) for line in fleet.cli("schedules", "list", "--json").splitlines()]
    assert [(s["id"], s["cron"], s["agent"]) for s in listed] == [(sid, "* * * * * */3", "one")]
    time.sleep(max(0.0, first + 6.5 - time.time()))  # three due times: first, +3 s, +6 s
    before = time.time()
    assert fleet.cli("schedules", "remove", sid).strip() == f"removed {sid}"
    after = time.time()
    runs = [json.loads(line) for line in fleet.cli("runs", "--json", "--limit", "500")
            .splitlines()]
    ticks = [r["id"] for r in runs if r["task"] == "tick"]
    due = [first + 3 * i for i in range(10)]
    # Once per due time: at most one run for each that passed, none missed but (perhaps) the
    # last, due while the removal was on its way.
    assert sum(d <= before for d in due) - 1 <= len(ticks) <= sum(d <= after for d in due)
    assert len(ticks) >= 3 and len(set(ticks)) == len(ticks)
    views = fleet.wait_done(fleet.g1, ticks)
    assert {v["status"] for v in views} == {"completed"}
    _exactly_once(fleet, ticks, 1)


def test_schedules_through_the_api_of_any_gateway(fleet: Fleet) -> None:
    r = fleet.post(fleet.g2 + "/v1/schedules", timeout=10,
                   json={"cron": "0 9 * * 1-5", "task": "standup notes", "agent": "one"})
    assert r.status_code == 201, r.text
    made = r.json()
    assert (made["cron"], made["agent"], made["fired"]) == ("0 9 * * 1-5", "one", 0)
    assert made["next_at"] > time.time()
    listed = httpx.get(fleet.g1 + "/v1/schedules", timeout=10).json()["schedules"]
    assert made in listed
    bad = fleet.post(fleet.g1 + "/v1/schedules", timeout=10,
                     json={"cron": "every monday", "task": "x", "agent": "one"})
    assert bad.status_code in (400, 422) and "cron" in bad.text
    unknown = fleet.post(fleet.g1 + "/v1/schedules", timeout=10,
                         json={"cron": "0 9 * * *", "task": "x", "agent": "nobody"})
    assert unknown.status_code == 404
    gone = fleet.delete(f"{fleet.g1}/v1/schedules/{made['id']}", timeout=10)
    assert gone.status_code == 200 and gone.json() == {"id": made["id"], "deleted": True}
    assert fleet.delete(f"{fleet.g2}/v1/schedules/{made['id']}", timeout=10).status_code == 404


def test_a_follower_misses_nothing_when_the_fleet_news_loses_entries(fleet: Fleet) -> None:
    """A gateway reads every run's events from one fleet-wide news stream; entries it never
    sees there (trimmed while it was stopped) come from the run's own stream, in order,
    once, the run's end included."""
    gateway = fleet.gateways[1][0]
    run_id = fleet.start(fleet.g1, "slow")
    with ThreadPoolExecutor(1) as pool, httpx.Client(base_url=fleet.g2, timeout=30) as c2:
        following = pool.submit(read_events, c2, run_id)
        time.sleep(0.3)
        r = redis.Redis.from_url(REDIS_URL)
        gateway.send_signal(signal.SIGSTOP)
        try:  # the news this gateway would read next is gone when it wakes
            for _ in range(100):
                r.delete(f"{fleet.prefix}:news")
                time.sleep(0.02)
        finally:
            gateway.send_signal(signal.SIGCONT)
            r.close()
        got, end = following.result()
    assert end == {"run_id": run_id, "status": "completed"}
    with httpx.Client(base_url=fleet.g1, timeout=30) as c1:
        whole, _ = read_events(c1, run_id)
    assert [e["id"] for e in got] == list(range(1, len(whole) + 1))
    assert got == whole and whole[-1]["type"] == "run.completed"


def test_runs_go_on_whole_when_every_redis_connection_is_cut_under_them(fleet: Fleet) -> None:
    """Redis drops every client (as when it restarts, or a network between machines cuts the
    connections) twice while runs execute and are followed: every run completes, each
    follower gets its run's whole stream, in order, once, and no call runs twice."""
    ids = [fleet.start(fleet.g1, "slow", f"task {i}") for i in range(6)]
    with ThreadPoolExecutor(6) as pool, httpx.Client(base_url=fleet.g2, timeout=60) as c2:
        following = [pool.submit(read_events, c2, run_id) for run_id in ids]
        r = redis.Redis.from_url(REDIS_URL)
        try:
            for _ in range(2):
                time.sleep(0.5)
                assert r.execute_command("CLIENT KILL TYPE normal SKIPME yes") > 0
        finally:
            r.close()
        streams = [f.result(timeout=60) for f in following]
    views = fleet.wait_done(fleet.g1, ids, timeout=60)
    assert [v["status"] for v in views] == ["completed"] * 6
    with httpx.Client(base_url=fleet.g1, timeout=30) as c1:
        for run_id, (got, end) in zip(ids, streams, strict=True):
            whole, _ = read_events(c1, run_id)
            assert end == {"run_id": run_id, "status": "completed"}
            assert [e["id"] for e in got] == list(range(1, len(whole) + 1))
            assert got == whole and whole[-1]["type"] == "run.completed"
    _exactly_once(fleet, ids, 6)
