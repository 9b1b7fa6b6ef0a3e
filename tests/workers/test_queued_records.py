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
    assert store.calls == [["r0", "r1"]]
