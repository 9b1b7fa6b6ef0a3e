"""A gateway writes the ``queued`` records of the runs queued together in one store call,
each POST getting its own answer (or the store's error)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from thinkloop.api import RunRecord
from thinkloop.workers.fleet import QueuedRecords


def queued(i: int, session: str | None = None) -> RunRecord:
    return RunRecord(f"r{i}", "bench", "", "", "queued", 1000.0 + i, session, "u", f"task {i}")


class Runs:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls: list[list[str]] = []

    async def save_runs(self, runs: Sequence[RunRecord]) -> None:
        self.calls.append([r.id for r in runs])
        await asyncio.sleep(0.01)
        if self.fail:
            raise OSError("the store is away")


def test_runs_queued_together_are_recorded_in_one_call_and_later_ones_in_the_next() -> None:
    store = Runs()

    async def main() -> None:
        records = QueuedRecords(store)  # type: ignore[arg-type]
        first = asyncio.gather(*(records.save(queued(i)) for i in range(5)))
        await asyncio.sleep(0.005)  # the first write is out
        await asyncio.gather(first, records.save(queued(5)), records.save(queued(6)))

    asyncio.run(main())
    assert store.calls == [[f"r{i}" for i in range(5)], ["r5", "r6"]]


def test_a_failed_write_fails_each_of_its_posts_and_a_cancelled_post_is_skipped() -> None:
    store = Runs(fail=True)

    async def main() -> None:
        records = QueuedRecords(store)  # type: ignore[arg-type]
        gone = asyncio.ensure_future(records.save(queued(0)))
        waiting = asyncio.ensure_future(records.save(queued(1)))
        await asyncio.sleep(0)
        gone.cancel()
        with pytest.raises(OSError, match="away"):
            await waiting
        assert gone.cancelled()

    asyncio.run(main())
    assert store.calls == [["r1"]]  # the cancelled POST's run is not queued: no record


def test_runs_queued_together_take_their_slots_and_jobs_in_one_round_trip_each(
        redis_up: None) -> None:
    """The gateway's batched steps: slots (in order, within the limits) and arq jobs of the
    runs queued in one turn of the loop, one script call each for all of them."""
    import uuid

    from arq.connections import ArqRedis
    from tests.workers.conftest import REDIS_URL

    from thinkloop.workers.bus import Bus
    from thinkloop.workers.fleet import Batched, queue_run
    from thinkloop.workers.rows import RunRow

    prefix = "tlt-" + uuid.uuid4().hex[:12]

    async def main() -> list[object]:
        redis = ArqRedis.from_url(REDIS_URL)
        bus = Bus(redis, prefix)
        calls: list[str] = []
        for name in ("_create_many", "_enqueue_many", "_create", "_enqueue"):
            script = getattr(bus, name)

            async def counted(*a: object, _s: object = script, _n: str = name,
                              **kw: object) -> object:
                calls.append(_n)
                return await _s(*a, **kw)  # type: ignore[operator]

            setattr(bus, name, counted)
        rows = [RunRow(f"{prefix}-r{i}", "u" if i < 4 else "v", "a", None, "queued",
                       1000.0 + i, f"task {i}") for i in range(6)]
        saved: list[str] = []

        async def save(record: RunRecord) -> None:
            saved.append(record.id)

        batched = Batched.of(bus, (3, 4))  # 3 a user, 4 in all
        try:
            got = await asyncio.gather(*(queue_run(redis, bus, save, r, batched=batched)
                                         for r in rows))
            queued = [m.decode() for m in await redis.zrange(bus.queue, 0, -1)]
            return [got, calls, sorted(saved), sorted(queued)]
        finally:
            keys = [k async for k in redis.scan_iter(match=f"{prefix}:*")]
            keys += [k async for k in redis.scan_iter(match=f"arq:*{prefix}*")]
            if keys:
                await redis.delete(*keys)
            await redis.aclose()

    got, calls, saved, queued = asyncio.run(main())
    ids = [f"r{i}" for i in (0, 1, 2, 4)]
    assert got == [1, 1, 1, -1, 1, -2]
    assert calls == ["_create_many", "_enqueue_many"]
    assert [s.rsplit("-", 1)[1] for s in saved] == ids
    assert [q.rsplit("-", 1)[1] for q in queued] == ids
