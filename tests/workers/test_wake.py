"""A queued run wakes an idle worker: it does not wait for the worker's next poll (the poll is
the fallback, for runs handed back or left by a dead worker)."""

from __future__ import annotations

from pathlib import Path

from tests.workers.conftest import started_fleet


def test_runs_queued_to_an_idle_worker_start_without_its_next_poll(tmp_path: Path) -> None:
    # An hour between polls: the worker's one poll is at its start, before any run is queued.
    with started_fleet(tmp_path, {"THINKLOOP_WORKER_POLL_S": "3600"}, ("idle",)) as f:
        ids = [f.start(f.g1, "one", f"task {i}") for i in range(3)]
        views = f.wait_done(f.g1, ids, timeout=60)
        assert [(v["status"], v["worker"]) for v in views] == [("completed", "idle")] * 3
        assert sorted(r for r, _ in f.executions()) == sorted(ids)  # each call once
