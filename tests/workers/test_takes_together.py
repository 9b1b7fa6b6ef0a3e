"""The runs a worker takes together (the jobs of one take, their abort answers in) are taken
in one script call, and each gets its own answer: taken, cancelled, or gone."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from arq.constants import in_progress_key_prefix
from redis.asyncio import Redis
from tests.workers.conftest import REDIS_URL

from thinkloop.workers.bus import Bus
from thinkloop.workers.execute import Takes
from thinkloop.workers.rows import RunRow, Taken

pytestmark = pytest.mark.usefixtures("redis_up")


class Counted(Bus):
    calls: list[int]

    async def take(self, runs: Sequence[tuple[str, str, int, bool]], max_deaths: int,
                   lease_ms: int, worker: str) -> list[Taken]:
        self.calls.append(len(runs))
        return await super().take(runs, max_deaths, lease_ms, worker)


def test_runs_starting_together_are_taken_in_one_call() -> None:
    prefix = f"tlt-{uuid.uuid4().hex[:8]}"

    async def main() -> tuple[list[Any], list[int], list[str | None], dict[str, int]]:
        redis = Redis.from_url(REDIS_URL)
        calls: list[int] = []
        bus = Counted(redis, prefix)
        bus.calls = calls
        try:
            for run_id in ("a", "b"):
                await bus.create(RunRow(run_id, "u", "steps", None, "queued", time.time()))
            takes = Takes(bus, max_deaths=3, lease_ms=60_000, worker="w1")
            jobs = [("a", False), ("b", True), ("gone", False)]
            got = await asyncio.gather(*(
                takes.take(run_id, f"{in_progress_key_prefix}{prefix}-{run_id}", 1, asked)
                for run_id, asked in jobs))
            statuses = [(await bus.get(r)).status if r != "gone" else None  # type: ignore[union-attr]
                        for r, _ in jobs]
            return [(t.what, t.row.id if t.row else None) for t in got], calls, \
                statuses, await bus.running()
        finally:
            keys = [k async for k in redis.scan_iter(f"{prefix}*")]
            keys += [f"{in_progress_key_prefix}{prefix}-{r}" for r in ("a", "b", "gone")]
            await redis.delete(*keys)
            await redis.aclose()

    taken, calls, statuses, running = asyncio.run(main())
    assert taken == [("take", "a"), ("abort", "b"), ("gone", None)]
    assert calls == [3]
    assert statuses == ["running", "cancelling", None]
    assert running == {"w1": 1}
