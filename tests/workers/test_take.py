"""A worker takes queued runs past however many runs are in progress ahead of them (arq keeps
a job in its queue while it runs), a few per round trip, and never one another holds."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from arq.connections import ArqRedis
from arq.constants import in_progress_key_prefix
from arq.worker import func
from tests.workers.conftest import REDIS_URL

from thinkloop.workers.worker import FleetWorker

pytestmark = pytest.mark.usefixtures("redis_up")


async def _noop(ctx: object) -> None:
    pass


def test_queued_runs_behind_hundreds_in_progress_are_taken() -> None:
    tag = uuid.uuid4().hex[:8]
    queue = f"tlt-{tag}:queue"
    ids = [f"{tag}-{i:04d}" for i in range(700)]
    held = ids[:650]  # in progress on other workers: first in the queue

    async def main() -> tuple[list[str], int]:
        pool = ArqRedis.from_url(REDIS_URL)
        try:
            await pool.zadd(queue, {job: i + 1 for i, job in enumerate(ids)})
            for job in held:
                await pool.set(in_progress_key_prefix + job, b"1", px=60_000)
            worker = FleetWorker(functions=[func(_noop, name="noop")], queue_name=queue,
                                 redis_pool=pool, max_jobs=12, handle_signals=False)
            started: list[str] = []

            async def run_job(job_id: str, score: int) -> None:
                started.append(job_id)
                await asyncio.Event().wait()  # running: its slot stays taken

            worker.run_job = run_job  # type: ignore[method-assign]
            await worker._take_waiting()
            await asyncio.sleep(0)
            for task in worker.tasks.values():
                task.cancel()
            now_held = sum([await pool.exists(in_progress_key_prefix + j) for j in ids[650:]])
            return started, now_held
        finally:
            await pool.delete(queue, *(in_progress_key_prefix + j for j in ids))
            await pool.aclose()
            await pool.connection_pool.disconnect()

    started, now_held = asyncio.run(main())
    assert started == ids[650:662]  # its 12 free slots, in queue order, none held elsewhere
    assert now_held == 12
