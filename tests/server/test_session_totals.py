"""GET /v1/sessions/{id} shows what the session's runs used (its totals), as
``thinkloop sessions`` does."""

from __future__ import annotations

from tests.server.conftest import Stack
from tests.server.sse import read_events

from thinkloop.testing.openai_server import Reply, completion


def test_a_session_shows_its_token_totals(stack: Stack) -> None:
    stack.model.clear()
    stack.model.enqueue(Reply(body=completion("one")), Reply(body=completion("two")))
    used = [0, 0]
    with stack.client(stack.gateway.key("tess")) as c:
        for task in ("first", "second"):
            run_id = c.post("/v1/runs", json={"agent": "helper", "task": task,
                                              "session": "totals"}).json()["id"]
            _, end = read_events(c, run_id)
            assert end["status"] == "completed"
            usage = c.get(f"/v1/runs/{run_id}").json()["usage"]
            used[0] += usage["input_tokens"]
            used[1] += usage["output_tokens"]
        session = c.get("/v1/sessions/totals").json()
    assert used[0] > 0
    assert [session["input_tokens"], session["output_tokens"]] == used
    assert session["model"] == "openai:fake" and session["cost_usd"] == 0.0
