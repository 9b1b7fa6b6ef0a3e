"""The operator endpoints (``thinkloop ui --gateway``): a caller sees their own runs (with
their numbers as they go), sessions, memory and agents, and nobody else's."""

from __future__ import annotations

from tests.server.conftest import Stack, wait_for

from thinkloop.testing.openai_server import Reply, completion


def test_runs_sessions_and_agents_are_the_callers_own(stack: Stack) -> None:
    stack.model.clear()
    stack.model.enqueue(Reply(body=completion(tool_calls=[("calculator",
                                                           {"expression": "6*7"})])),
                        Reply(body=completion("6*7 is 42.")))
    with stack.client(stack.gateway.key("oli")) as oli, \
            stack.client(stack.gateway.key("pat")) as pat:
        run_id = oli.post("/v1/runs", json={"agent": "helper", "task": "6*7?",
                                            "session": "sums"}).json()["id"]
        wait_for(lambda: oli.get(f"/v1/runs/{run_id}").json()["status"] == "completed")
        runs = oli.get("/v1/runs").json()["runs"]
        mine = next(r for r in runs if r["id"] == run_id)
        assert mine["status"] == "completed" and mine["session"] == "sums"
        assert mine["steps"] == 2 and mine["input_tokens"] == 20 and mine["output_tokens"] == 10
        assert mine["ended_at"] >= mine["started_at"] and mine["task"] == "6*7?"
        assert pat.get("/v1/runs").json()["runs"] == []

        sessions = oli.get("/v1/sessions").json()["sessions"]
        assert [s["id"] for s in sessions] == ["sums"] and sessions[0]["messages"] == 4
        assert pat.get("/v1/sessions").json()["sessions"] == []

        agent = oli.get("/v1/agents/helper").json()
        assert agent == {"name": "helper", "model": "openai:fake", "tools": ["calculator"]}
        assert oli.get("/v1/agents/nobody").status_code == 404
        assert oli.get(f"/v1/memory?run={run_id}").json()["owner"] == "user:oli"
        assert pat.get(f"/v1/memory?run={run_id}").status_code == 404
        assert pat.get("/v1/runs?limit=0").status_code == 422
    with stack.client(None) as nobody:
        assert nobody.get("/v1/runs").status_code == 401
