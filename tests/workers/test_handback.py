"""A worker stopped (SIGTERM) while one of its runs is inside a tool call hands the run back
only once the call has finished and its result is checkpointed: the next worker resumes it
without running the call again."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.workers.conftest import Fleet, started_fleet

from thinkloop.testing.openai_server import Reply, completion

WAITING = "waits for its tool calls in flight"


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Fleet]:
    with started_fleet(tmp_path, {"THINKLOOP_WORKER_DRAIN_S": "0"}, ("h1", "h2")) as f:
        yield f


def _holder(fleet: Fleet, run_id: str) -> int:
    """The index (in fleet.workers) of the worker whose tool call holds ``run_id``."""
    deadline = time.monotonic() + 60
    while (run_id, "step 1") not in fleet.executions():
        assert time.monotonic() < deadline, "the call never ran\n" + fleet.logs()
        time.sleep(0.02)
    return ["h1", "h2"].index(fleet.status(fleet.g1, run_id)["worker"])


def _log(fleet: Fleet, index: int) -> str:
    # proc-0 is the gateway; the workers follow in the order they started.
    return (fleet.root / f"proc-{index + 1}.log").read_text(errors="replace")


def test_sigterm_during_a_tool_call_hands_back_after_its_result_is_checkpointed(
        pair: Fleet) -> None:
    pair.model.enqueue(Reply(body=completion(tool_calls=[("held", {"text": "step 1"})])))
    run_id = pair.start(pair.g1, "crasher", "hold on")
    i = _holder(pair, run_id)  # its side effect is done; the call has not returned yet
    leaving = pair.workers[i]
    leaving.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 60
    # Fixed: the worker says it waits for the call. Before: the run was handed back at once
    # and the other worker ran the call again.
    while WAITING not in _log(pair, i) and len(pair.executions()) < 2:
        assert leaving.poll() is None, pair.logs()
        assert time.monotonic() < deadline, pair.logs()
        time.sleep(0.02)
    (pair.root / "release").touch()
    assert leaving.wait(30) == 0, pair.logs()
    (view,) = pair.wait_done(pair.g1, [run_id], timeout=60)
    assert view["status"] == "completed", view
    assert view["worker"] == ["h1", "h2"][1 - i]  # resumed by the other worker
    assert pair.executions() == [(run_id, "step 1")], "the call ran again"
    assert pair.metric("thinkloop_fleet_handbacks") == 1
    assert pair.metric("thinkloop_fleet_lease_expiries") == 0  # a hand-back, not a death


def test_a_call_still_running_after_the_grace_is_left_to_the_lease_not_requeued(
        tmp_path: Path) -> None:
    with started_fleet(tmp_path, {"THINKLOOP_WORKER_DRAIN_S": "0"}) as fleet:
        leaving = fleet.worker("h1", THINKLOOP_WORKER_HANDBACK_S="0.2")
        fleet.wait_ready()
        fleet.model.enqueue(Reply(body=completion(tool_calls=[("held", {"text": "step 1"})])))
        run_id = fleet.start(fleet.g1, "crasher", "hold on")
        assert _holder(fleet, run_id) == 0
        fleet.worker("h2")
        fleet.wait_ready()
        leaving.send_signal(signal.SIGTERM)
        # It exits with the call still running (a thread nothing can stop), as a killed
        # worker would: the run is not handed back while the call may go on there.
        assert leaving.wait(30) == 0, fleet.logs()
        assert "left to its lease" in _log(fleet, 0)
        (fleet.root / "release").touch()
        (view,) = fleet.wait_done(fleet.g1, [run_id], timeout=60)
        assert (view["status"], view["worker"]) == ("completed", "h2")
        # The interrupted call had no result: it ran again, after its first worker was gone.
        assert fleet.executions() == [(run_id, "step 1")] * 2
        assert fleet.metric("thinkloop_fleet_handbacks") == 0
        assert fleet.metric("thinkloop_fleet_lease_expiries") == 1


def _waiting_question(fleet: Fleet, run_id: str, seen: str | None = None) -> str:
    deadline = time.monotonic() + 60
    while True:
        waits = fleet.status(fleet.g1, run_id)["waiting_for"]
        if waits and waits[0]["kind"] == "question" and waits[0]["id"] != seen:
            return str(waits[0]["id"])
        assert time.monotonic() < deadline, fleet.logs()
        time.sleep(0.05)


def test_a_run_waiting_for_a_person_is_handed_back_at_once_and_asks_again(
        pair: Fleet) -> None:
    pair.model.enqueue(
        Reply(body=completion(tool_calls=[("ask_human", {"question": "Which number?"})])),
        Reply(body=completion("It is six.")))
    run_id = pair.start(pair.g1, "asker", "pick a number")
    first = _waiting_question(pair, run_id)
    i = ["h1", "h2"].index(pair.status(pair.g1, run_id)["worker"])
    leaving = pair.workers[i]
    leaving.send_signal(signal.SIGTERM)
    assert leaving.wait(60) == 0, pair.logs()
    # Its call waited for a person, not for an effect: no grace, no lease to wait out.
    assert "left to its lease" not in _log(pair, i)
    again = _waiting_question(pair, run_id, first)  # asked again on the other worker
    r = pair.post(f"{pair.g1}/v1/runs/{run_id}/input", json={"id": again, "answer": "six"},
                  timeout=10)
    assert r.status_code == 200, r.text
    (view,) = pair.wait_done(pair.g1, [run_id], timeout=60)
    assert (view["status"], view["text"]) == ("completed", "It is six."), view
    assert pair.metric("thinkloop_fleet_handbacks") == 1
    assert pair.metric("thinkloop_fleet_lease_expiries") == 0
