"""A worker takes queued runs past however many runs are in progress ahead of them (arq keeps
a job in its queue while it runs), a few per round trip, and never one another holds."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from arq.connections import ArqRedis
from arq.constants import in_progress_key_prefix, job_key_prefix, retry_key_prefix
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

            async def run_taken(job_id: str, score: int, job_try: int,
                                raw: bytes | None) -> None:
                started.append(job_id)
                await asyncio.Event().wait()  # running: its slot stays taken

            worker._run_taken = run_taken  # type: ignore[method-assign]
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


def test_a_take_begins_its_jobs_as_arqs_run_job_would() -> None:
    """The take reads each job's data and counts its try in the same round trip (arq's
    run_job read them with one more per job), and the job runs with them."""
    tag = uuid.uuid4().hex[:8]
    queue = f"tlt-{tag}:queue"
    seen: list[tuple[str, int, tuple[object, ...]]] = []

    async def job(ctx: dict[str, object], *args: object) -> None:
        seen.append((str(ctx["job_id"]), int(str(ctx["job_try"])), args))

    async def main() -> tuple[int, int]:
        pool = ArqRedis.from_url(REDIS_URL)
        try:
            await pool.enqueue_job("job", "a", 2, _job_id=f"{tag}-1", _queue_name=queue)
            await pool.set(retry_key_prefix + f"{tag}-2", b"4")  # tried 4 times already
            await pool.enqueue_job("job", "b", _job_id=f"{tag}-2", _queue_name=queue)
            worker = FleetWorker(functions=[func(job, name="job")], queue_name=queue,
                                 redis_pool=pool, max_jobs=4, handle_signals=False,
                                 keep_result=0)
            await worker._take_waiting()
            await asyncio.gather(*worker.tasks.values())
            left = await pool.zcard(queue)
            return left, await pool.exists(in_progress_key_prefix + f"{tag}-1")
        finally:
            await pool.delete(queue, *(p + f"{tag}-{i}" for i in (1, 2) for p in (
                in_progress_key_prefix, retry_key_prefix, job_key_prefix)))
            await pool.aclose()
            await pool.connection_pool.disconnect()

    left, held = asyncio.run(main())
    assert sorted(seen) == [(f"{tag}-1", 1, ("a", 2)), (f"{tag}-2", 5, ("b",))]
    assert (left, held) == (0, 0)  # finished as arq finishes a job
