"""A run's end goes to Redis with its last events, in the outbox's write: one script call for
the events and the ends of the runs that end together (each end was a round trip of its
own), each end numbered after its run's events, in its stream and in the news."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from arq import constants as arq
from tests.workers.conftest import runs_in_redis

from thinkloop.workers import scripts
from thinkloop.workers.execute import Outbox

pytestmark = pytest.mark.usefixtures("redis_up")


def test_runs_ending_together_end_with_their_last_events_in_one_call() -> None:
    async def main() -> dict[str, Any]:
        # "a" ran here as arq's job: its end also finishes the job and counts it off.
        async with runs_in_redis("a", "b") as held:
            redis, bus, rows, job = held.redis, held.bus, held.rows, held.job
            await redis.script_load(scripts.WRITE)  # not loaded on the way: one call to count
            calls: list[str] = []
            execute = redis.execute_command

            async def counting(*args: Any, **kw: Any) -> Any:
                calls.append(str(args[0]))
                return await execute(*args, **kw)

            redis.execute_command = counting  # type: ignore[method-assign]
            outbox = Outbox(bus)
            for row in rows:
                outbox.add(row.id, 1, b'{"id":1}')
                outbox.add(row.id, 2, b'{"id":2}')
            await asyncio.gather(
                outbox.end(rows[0], "completed", {"text": "A"}, ("w1", job)),
                outbox.end(rows[1], "failed", {"error": "B"}))
            await outbox.aclose()
            redis.execute_command = execute  # type: ignore[method-assign]
            streams = {r.id: [(e.decode(), f) for e, f in await redis.xrange(bus.key("ev", r.id))]
                       for r in rows}
            news = [f for _, f in await redis.xrange(bus.news)]
            got = {r.id: await bus.get(r.id) for r in rows}
            return {"calls": calls, "streams": streams, "news": news,
                    "status": {k: (v.status, dict(v.view or {})) for k, v in got.items() if v},
                    "active": await bus.active(), "running": await bus.running(),
                    "job": [await redis.exists(arq.job_key_prefix + job,
                                               arq.in_progress_key_prefix + job),
                            await redis.zscore(bus.queue, job)]}

    got = asyncio.run(main())
    assert got["calls"] == ["EVALSHA"]
    for run_id, status in (("a", "completed"), ("b", "failed")):
        assert got["streams"][run_id] == [("0-1", {b"e": b'{"id":1}'}),
                                          ("0-2", {b"e": b'{"id":2}'}),
                                          ("0-3", {b"end": status.encode()})]
    events = [k for f in got["news"] for k in f]
    assert events.index(b"a 3") > events.index(b"a 2")
    assert events.index(b"b 3") > events.index(b"b 2")
    assert got["status"] == {"a": ("completed", {"text": "A"}), "b": ("failed", {"error": "B"})}
    assert got["active"] == 0 and got["running"] == {}
    assert got["job"] == [0, None]


def test_a_run_whose_lease_lapsed_unclaimed_is_still_counted_off_its_worker_at_its_end() -> None:
    # A worker whose loop stalled past a lease nobody else took still ends the run it ran:
    # its count of runs goes down with the end it writes, lease or not.
    async def main() -> tuple[dict[str, int], Any]:
        async with runs_in_redis("c") as held:
            redis, bus, (row,), job = held.redis, held.bus, held.rows, held.job
            await redis.delete(arq.in_progress_key_prefix + job)  # the lease lapsed
            outbox = Outbox(bus)
            await outbox.end(row, "completed", {}, ("w1", job))
            await outbox.aclose()
            return await bus.running(), await redis.hget(bus.key("running"), "w1")

    assert asyncio.run(main()) == ({}, b"0")
