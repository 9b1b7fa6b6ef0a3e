"""Sub-agents of a run executing on a worker (``thinkloop worker``, separate processes on the
real Redis and PostgreSQL): ``GET /v1/runs/{id}`` on a gateway lists the run's children as
they run, as an in-process run's, and aborting the parent ends its child cancelled."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.workers.conftest import Fleet

from thinkloop.testing.openai_server import OpenAIServer, Reply, completion

BOSS = """
  boss:
    model: openai:fake
    tools: [spawn_agent]
    memory: false
    approve: auto
    guards: false
"""


@pytest.fixture
def boss_fleet(tmp_path: Path) -> Iterator[Fleet]:
    with OpenAIServer() as model:
        f = Fleet(tmp_path, model)
        f.agents.write_text(f.agents.read_text() + BOSS)
        try:
            f.gateway()
            f.worker("w1")
            f.wait_ready()
            yield f
        finally:
            f.stop()


def _children(f: Fleet, run_id: str) -> list[dict[str, Any]]:
    return list(f.status(f.g1, run_id)["children"])


def test_a_fleet_run_lists_its_children_and_aborting_it_cancels_them(
        boss_fleet: Fleet) -> None:
    f = boss_fleet
    f.model.enqueue(
        Reply(body=completion(tool_calls=[("spawn_agent", {"tasks": ["count the stars"]})])),
        Reply(body=completion("still counting"), delay_s=20),  # the child, mid-run
    )
    run_id = f.start(f.g1, "boss", "count the stars", session="sky")
    deadline = time.monotonic() + 60
    while not _children(f, run_id):
        assert time.monotonic() < deadline, f.logs()
        time.sleep(0.1)
    [child] = _children(f, run_id)
    assert (child["agent"], child["task"], child["status"]) == (
        "worker", "count the stars", "running")
    assert child["ended_at"] is None and child["id"] != run_id
    assert f.post(f"{f.g1}/v1/runs/{run_id}/abort", timeout=10).status_code == 202
    [view] = f.wait_done(f.g1, [run_id])
    assert view["status"] == "cancelled", f.logs()
    [child] = view["children"]
    assert child["status"] == "cancelled" and child["ended_at"] is not None


def test_a_fleet_run_without_sub_agents_lists_none(boss_fleet: Fleet) -> None:
    f = boss_fleet
    f.model.enqueue(Reply(body=completion("Nothing to hand out.")))
    run_id = f.start(f.g1, "boss", "just answer")
    [view] = f.wait_done(f.g1, [run_id])
    assert view["status"] == "completed" and view["children"] == []
