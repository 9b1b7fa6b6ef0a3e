"""A run whose workers keep dying under it ends ``failed``, with the reason, and does not
take the fleet down with it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.workers.conftest import Fleet, started_fleet

from thinkloop.testing.openai_server import Reply, completion


@pytest.fixture
def small(tmp_path: Path) -> Iterator[Fleet]:
    with started_fleet(tmp_path, {"THINKLOOP_WORKER_MAX_DEATHS": "2"}, ()) as f:
        yield f


def test_a_run_whose_worker_died_max_deaths_times_ends_failed_with_the_reason(
        small: Fleet) -> None:
    # The model asks for `crash` once; each worker that resumes the run runs the interrupted
    # call again (it has no result) and dies too.
    small.model.enqueue(Reply(body=completion(tool_calls=[("crash", {"reason": "a test"})])))
    run_id = small.start(small.g1, "crasher", "crash, please")
    # No worker yet: the run waits, and `thinkloop runs` shows it so.
    (queued,) = [json.loads(line) for line in small.cli("runs", "--json").splitlines()]
    assert (queued["id"], queued["status"], queued["agent"]) == (run_id, "queued", "crasher")
    assert small.status(small.g1, run_id)["status"] == "queued"
    for name in ("d1", "d2"):
        proc = small.worker(name)
        assert proc.wait(60) == -9, small.logs()  # killed by its own tool
    assert small.executions() == []  # nothing else ran
    survivor = small.worker("d3")
    (view,) = small.wait_done(small.g1, [run_id], timeout=60)
    assert view["status"] == "failed"
    assert view["error"] == "its worker died 2 times"
    assert survivor.poll() is None  # the run was not executed a third time
    (ended,) = [json.loads(line) for line in small.cli("runs", "--json").splitlines()]
    assert (ended["status"], ended["error"]) == ("failed", "its worker died 2 times")
    metrics = httpx.get(small.g1 + "/metrics", timeout=10).text
    assert "thinkloop_fleet_failed_deaths 1.0" in metrics
    assert "thinkloop_fleet_lease_expiries 2.0" in metrics
    deadline = time.monotonic() + 10
    while small.metric("thinkloop_fleet_active_runs") or small.metric("thinkloop_queue_depth"):
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_a_queued_run_aborted_before_any_worker_takes_it_ends_cancelled(small: Fleet) -> None:
    small.model.pause()  # a run that reached the model would wait here
    run_id = small.start(small.g1, "one", "never run")
    (row,) = httpx.get(small.g1 + "/v1/runs", timeout=10).json()["runs"]
    assert (row["id"], row["status"], row["worker"]) == (run_id, "queued", None)
    assert f"abort requested for run {run_id}" in small.cli("runs", "abort", run_id)
    small.worker("late")
    (view,) = small.wait_done(small.g1, [run_id], timeout=60)
    assert (view["status"], view["error"]) == ("cancelled", "aborted while queued")
    assert small.model.held == 0  # it never ran
    (ended,) = [json.loads(line) for line in small.cli("runs", "--json").splitlines()]
    assert (ended["id"], ended["status"]) == (run_id, "cancelled")
    assert small.metric("thinkloop_fleet_active_runs") == 0
    small.model.resume()
