"""Sub-agents through the gateway: ``GET /v1/runs/{id}`` lists a run's children while they
run, and aborting the parent ends its child cancelled."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.server.conftest import Gateway, Stack, wait_for
from tests.server.sse import read_events

from thinkloop.server import GatewayConfig
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion

AGENTS = """
agents:
  boss:
    model: openai:fake
    tools: [spawn_agent]
    memory: false
    approve: auto
"""


@pytest.fixture
def boss(tmp_path: Path, model_server: OpenAIServer) -> Iterator[Stack]:
    (tmp_path / "agents.yaml").write_text(AGENTS)
    cfg = GatewayConfig(agents_file=tmp_path / "agents.yaml", approval_timeout_s=20)
    with Gateway(cfg, tmp_path / "gateway.db") as gw:
        yield Stack(gw, model_server)


def test_a_run_lists_its_children_and_aborting_it_cancels_them(boss: Stack) -> None:
    boss.model.clear()
    boss.model.enqueue(
        Reply(body=completion(tool_calls=[("spawn_agent", {"tasks": ["count the stars"]})])),
        Reply(body=completion("still counting"), delay_s=20),  # the child, mid-run
    )
    with boss.client(boss.gateway.key("ana")) as c:
        run_id = c.post("/v1/runs", json={"agent": "boss", "task": "count the stars",
                                          "session": "sky"}).json()["id"]
        wait_for(lambda: c.get(f"/v1/runs/{run_id}").json()["children"] != [])
        [child] = c.get(f"/v1/runs/{run_id}").json()["children"]
        assert (child["agent"], child["task"], child["status"]) == (
            "worker", "count the stars", "running")
        assert c.post(f"/v1/runs/{run_id}/abort").status_code == 202
        _, end = read_events(c, run_id)
        assert end["status"] == "cancelled"
        [child] = c.get(f"/v1/runs/{run_id}").json()["children"]
        assert child["status"] == "cancelled" and child["ended_at"] is not None
    boss.model.clear()
