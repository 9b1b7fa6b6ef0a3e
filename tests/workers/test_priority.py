"""Queued runs start by priority: one worker that executes one run at a time takes a
high-priority run submitted after twenty low ones before any of them that waits; the API and
`thinkloop runs` show each run's priority and status (queued, running, done)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.workers.conftest import Fleet

from thinkloop.testing.openai_server import OpenAIServer


@pytest.fixture
def one_at_a_time(tmp_path: Path) -> Iterator[Fleet]:
    with OpenAIServer(record=False) as model:
        f = Fleet(tmp_path, model)
        f.env["THINKLOOP_WORKER_CONCURRENCY"] = "1"
        try:
            f.gateway()
            f.worker("solo")
            f.wait_ready()
            yield f
        finally:
            f.stop()


def test_a_high_priority_run_submitted_after_twenty_low_ones_starts_before_them(
        one_at_a_time: Fleet) -> None:
    f = one_at_a_time
    f.hold(0)  # the first run to start waits at the model; the others wait in the queue
    low = [f.start(f.g1, "one", f"low {i}", priority=-1) for i in range(20)]
    f.hold(1)
    high = f.start(f.g1, "one", "urgent", priority=5)
    listed = {r["id"]: r for r in httpx.get(f.g1 + "/v1/runs", params={"limit": 100},
                                            timeout=10).json()["runs"]}
    assert (listed[high]["status"], listed[high]["priority"]) == ("queued", 5)
    assert {listed[i]["priority"] for i in low} == {-1}
    assert sorted(listed[i]["status"] for i in low) == ["queued"] * 19 + ["running"]
    cli = {r["id"]: r for r in map(json.loads, f.cli("runs", "--json", "--limit", "100")
                                   .splitlines())}
    assert (cli[high]["status"], cli[high]["priority"]) == ("queued", 5)
    assert sorted(cli[i]["status"] for i in low) == ["queued"] * 19 + ["running"]
    assert {cli[i]["worker"] for i in low if cli[i]["status"] == "running"} == {"solo"}
    f.model.resume()
    views = f.wait_done(f.g1, [*low, high], timeout=120)
    assert {v["status"] for v in views} == {"completed"}
    # Each run calls the recording tool once: the order they executed in.
    order = [run_id for run_id, _ in f.executions()]
    assert sorted(order) == sorted([*low, high])
    first = next(i for i in low if cli[i]["status"] == "running")
    assert order[:2] == [first, high], order
    done = {r["id"]: r for r in map(json.loads, f.cli("runs", "--json", "--limit", "100")
                                    .splitlines())}
    assert {done[i]["status"] for i in [*low, high]} == {"completed"}


def test_a_priority_out_of_range_is_one_clear_error(one_at_a_time: Fleet) -> None:
    r = httpx.post(one_at_a_time.g1 + "/v1/runs", timeout=10,
                   json={"task": "x", "agent": "one", "priority": 1000})
    assert r.status_code == 422 and "priority" in r.text
