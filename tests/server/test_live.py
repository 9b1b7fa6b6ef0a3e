"""A gateway run's numbered events, as its subscribers follow them."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from thinkloop.core.events import StepCompleted
from thinkloop.server.live import LiveRun


def live_run() -> LiveRun:
    handle: Any = None  # following never touches the handle
    return LiveRun("r1", "ana", "default", None, handle)


def step(n: int) -> StepCompleted:
    return StepCompleted("r1", n, tool_calls=0)


def test_a_subscriber_busy_writing_when_the_run_ends_still_gets_every_event() -> None:
    async def main() -> list[list[int]]:
        run = live_run()
        run.publish(step(1))
        got: list[list[int]] = []
        async for batch in run.follow_batches():
            got.append([seq for seq, _ in batch])
            if len(got) == 1:  # while this batch is being written, the run goes on and ends
                run.publish(step(2))
                run.publish(step(3))
                run.finish(None, "stopped")
        return got

    assert asyncio.run(main()) == [[1], [2, 3]]


def test_every_subscriber_is_woken_by_each_event_and_by_the_end() -> None:
    async def follow(run: LiveRun, after: int) -> list[int]:
        return [seq async for seq, _ in run.follow(after)]

    async def main() -> tuple[list[int], list[int], list[dict[str, Any]]]:
        run = live_run()
        run.publish(step(1))
        a = asyncio.create_task(follow(run, 0))
        b = asyncio.create_task(follow(run, 1))
        await asyncio.sleep(0)
        for n in (2, 3):
            run.publish(step(n))
            await asyncio.sleep(0)
        run.finish(None, "stopped")
        return await a, await b, [orjson.loads(e) for e in run.events]

    first, second, events = asyncio.run(main())
    assert first == [1, 2, 3] and second == [2, 3]
    assert [(e["id"], e["type"], e["step"]) for e in events] == [
        (1, "step.completed", 1), (2, "step.completed", 2), (3, "step.completed", 3)]


def test_a_subscriber_that_leaves_is_not_kept_waiting() -> None:
    async def main() -> int:
        run = live_run()

        async def first() -> list[tuple[int, bytes]]:
            return await anext(run.follow_batches())

        task = asyncio.create_task(first())
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return len(run._waiters or [])

    assert asyncio.run(main()) == 0



def test_finished_runs_are_forgotten_over_the_count_and_by_age(monkeypatch: Any) -> None:
    from thinkloop.server import live

    now = [1000.0]
    monkeypatch.setattr("thinkloop.server.live.time.time", lambda: now[0])
    runs = live.LiveRuns(per_user=10, total=10, keep_finished_s=60, keep_runs=3)

    def started(run_id: str) -> LiveRun:
        handle: Any = None
        run = LiveRun(run_id, "ana", "default", None, handle)
        runs.add(run)
        return run

    def kept() -> list[str]:
        return [r.id for r in runs.of_user("ana")]

    a, b, c = started("a"), started("b"), started("c")
    b.finish(None, "x")
    started("d")  # one over keep_runs: the oldest finished one goes at once
    assert kept() == ["a", "c", "d"]
    a.finish(None, "x")
    now[0] += 30
    c.finish(None, "x")
    now[0] += 31  # a finished 61 s ago, c 31 s ago
    runs.keep_runs = 10
    started("e")
    assert kept() == ["c", "d", "e"]
