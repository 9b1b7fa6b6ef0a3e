"""``thinkloop worker``: an arq worker that executes the runs gateways queue.

It serves the same agents as ``thinkloop serve`` (``--agents agents.yaml``, agents in the
store), built by the gateway's recipe, with approvals and questions answered through any
gateway. SIGTERM stops taking runs, lets those in progress finish for ``worker.drain_s``,
then hands the rest back (each resumes on another worker from its last checkpoint), each
once its tool calls in flight are checkpointed (worker.handback_s).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from arq.connections import ArqRedis
from arq.constants import in_progress_key_prefix
from arq.utils import timestamp_ms
from arq.worker import Worker, func

from thinkloop.api import Agent, tune_gc
from thinkloop.build import AgentSpec
from thinkloop.core.settings import Settings
from thinkloop.server.agents import AgentRouter, Definitions, Wiring, build_agent
from thinkloop.workers.bus import WAKE_EVERY_MS, Bus
from thinkloop.workers.connect import JOB, FleetStore, check_store, redis_pool
from thinkloop.workers.execute import FleetHub
from thinkloop.workers.executor import Executor
from thinkloop.workers.fleet import queue_run
from thinkloop.workers.rows import RunRow
from thinkloop.workers.schedules import Schedule, Schedules, heartbeat

log = logging.getLogger("thinkloop.workers")
# After a wake-up, how long runs queued meanwhile join its take. It must be more than the
# gateways' WAKE_EVERY_MS: the runs queued within that after a wake-up announce nothing, and
# only this take finds them before the poll (twice: the margin for the timers). Short and
# few at a time (TAKE_BATCH): the runs of one take start at once, and their first steps'
# CPU delays every other run's events (docs/performance.md, "The fleet": 6 ms and 4 against
# 20 ms and 8).
WAKE_GATHER_S = 0.006
assert WAKE_GATHER_S * 1000 > 2 * WAKE_EVERY_MS
JOB_TIMEOUT_S = 7 * 24 * 3600  # a run's own limits end it; arq's timeout is only a backstop


def agent_router(settings: Settings, store: FleetStore, hub: FleetHub,
                 agents_file: Path | None) -> AgentRouter:
    """The worker's agents: the gateway's definitions and its one recipe (the only place a
    worker builds an agent)."""
    wiring = Wiring(settings, store, hub.approver, hub.channel(),
                    settings.gateway.approval_timeout_s)

    def build(name: str, spec: AgentSpec) -> Agent:
        agent = build_agent(name, spec, wiring)
        agent.subscribe(hub.forward)  # its runs' events, to their pumps
        return agent

    return AgentRouter(Definitions(store, agents_file), build, settings.gateway.agent_ttl_s)


async def run_job(ctx: dict[str, Any], run_id: str) -> None:
    """The arq job: execute one queued run (``ctx["thinkloop"]`` is the worker's executor)."""
    executor: Executor = ctx["thinkloop"]
    await executor.execute(run_id, str(ctx["job_id"]), int(ctx["job_try"]))


# Take up to ARGV[3] queued jobs (score <= ARGV[1]) that no worker holds, as arq's
# start_jobs takes each (its in-progress key set, for ARGV[5] ms): one round trip for them
# all, where arq checks and takes each job with four (WATCH, EXISTS, ZSCORE, MULTI/EXEC).
# The queue is read ARGV[2] at a time to its end if need be: arq keeps a job queued while
# it runs, so the runs in progress all over the fleet come first. KEYS the queue; ARGV now
# ms, how many to read at a time, how many to take, arq's in-progress key prefix,
# in-progress ms. Returns the jobs taken and their scores: id, score, ...
_TAKE_JOBS = """
local chunk, want, out, offset = tonumber(ARGV[2]), 2 * tonumber(ARGV[3]), {}, 0
while true do
  local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT',
                         offset, chunk)
  for i = 1, #ids, 2 do
    local key = ARGV[4] .. ids[i]
    if redis.call('EXISTS', key) == 0 then
      redis.call('SET', key, '1', 'PX', ARGV[5])
      out[#out + 1] = ids[i]
      out[#out + 1] = ids[i + 1]
      if #out >= want then return out end
    end
  end
  if #ids < 2 * chunk then return out end
  offset = offset + chunk
end
"""
# Jobs one take holds at most: the next take is a round trip later, so that other workers
# taking at the same moment (all are woken together) get a share of a burst, and the runs
# that start together are few (their first steps' CPU delays every other run's events).
TAKE_BATCH = 4
SCAN_CHUNK = 500  # queued jobs a take reads at a time


class FleetWorker(Worker):
    """arq's worker, looking past the runs other workers hold.

    arq keeps a job in its queue until it ends and checks each job it reads before taking it;
    with many runs in progress each poll of each worker rechecked them all, which was most of
    a fleet's CPU. A script in Redis takes the jobs nobody holds, a few at a time (so that
    other workers taking meanwhile get theirs), in one round trip each; arq's own read of
    the queue only asks whether anything is due (``queue_read_limit`` 1).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, queue_read_limit=1, **kwargs)
        # The poll and the wake-ups take in turn: each counts the free slots it fills.
        self._taking = asyncio.Lock()
        self._take_jobs: Any = None

    async def main(self) -> None:
        """arq's loop, which polls every ``poll_delay``, and beside it one that takes runs as
        soon as gateways queue them (their wake-ups, merged while it takes)."""
        waker = self.loop.create_task(self._take_when_woken())
        try:
            await super().main()
        finally:
            waker.cancel()
            await asyncio.gather(waker, return_exceptions=True)

    async def _take_when_woken(self) -> None:
        queued: asyncio.Event = self.ctx["thinkloop"].queued
        while True:
            await queued.wait()
            # Cleared before the gathering: a wake-up from here on means another take (the
            # gateways' wake-ups are one per WAKE_EVERY_MS, the runs queued in between
            # announced by none, so they must be queued before this take reads the queue).
            queued.clear()
            # Runs queued together (a burst of POSTs) join one take rather than each waking
            # the worker for a script call of its own, as the outbox gathers events.
            await asyncio.sleep(WAKE_GATHER_S)
            if not self.allow_pick_jobs:  # stopping (SIGTERM): it takes nothing more
                continue
            try:
                await self._take_waiting()
            except Exception:  # Redis failed: the poll takes the run
                log.exception("taking a queued run failed; the poll will")

    async def start_jobs(self, job_ids: list[bytes]) -> None:
        if job_ids:
            await self._take_waiting()

    async def _take_waiting(self) -> None:
        async with self._taking:
            while (free := min(self.max_jobs - self.job_counter, TAKE_BATCH)) > 0:
                if self._take_jobs is None:
                    self._take_jobs = self.pool.register_script(_TAKE_JOBS)
                got = await self._take_jobs(keys=[self.queue_name], args=[
                    timestamp_ms(), SCAN_CHUNK, free, in_progress_key_prefix,
                    int(self.in_progress_timeout_s * 1000)])
                for job_id_b, score in zip(got[::2], got[1::2], strict=True):
                    await self.sem.acquire()  # free: never waits (only this takes slots)
                    self.job_counter += 1
                    job_id = job_id_b.decode()
                    task = self.loop.create_task(self.run_job(job_id, int(float(score))))
                    task.add_done_callback(lambda _: self._release_sem_dec_counter_on_complete())
                    self.tasks[job_id] = task
                if len(got) < 2 * free:  # nothing more is waiting
                    return

    async def finish_job(self, job_id: str, *args: Any, **kwargs: Any) -> None:
        executor: Executor = self.ctx["thinkloop"]
        if job_id in executor.ended:  # its run's end script did what arq would do here
            executor.ended.discard(job_id)
            return
        if job_id in executor.settling:
            # Its run left here for another worker (a lost lease) or for its lease's expiry
            # (a call still running): re-queueing or finishing it here would free a lease
            # that is not this worker's to free.
            executor.settling.discard(job_id)
            return
        await super().finish_job(job_id, *args, **kwargs)


def scheduled(pool: ArqRedis, bus: Bus, store: FleetStore) -> Callable[[Schedule], Any]:
    """Queue a due schedule's run (unless it is queued already), counted among the fleet's
    runs in progress but never refused: a schedule's time does not wait for a slot."""

    async def queue(s: Schedule) -> None:
        row = RunRow(s.run_id(), s.user, s.agent, s.session, "queued", time.time(), s.task,
                     False, priority=s.priority, deliver_to=s.deliver_to)
        if await bus.get(row.id) is not None:
            return
        await queue_run(pool, bus, store.save_run, row)

    return queue


def _exit_now(runs: list[str]) -> None:
    """Runs were left with a tool call still running here (SIGTERM, past
    ``worker.handback_s``): nothing stops a call in a thread, and it must not go on beside
    the run's next worker, which takes it when its lease expires. Exit at once, as a killed
    worker would (waiting for the agents to close would wait for those calls)."""
    log.error("exiting with the tool calls of %d runs still running: %s", len(runs),
              ", ".join(runs))
    logging.shutdown()
    os._exit(0)


def worker_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


async def serve_worker(settings: Settings, agents_file: Path | None = None,
                       name: str | None = None) -> None:
    """Execute queued runs until SIGTERM or SIGINT."""
    from thinkloop.api import open_store

    check_store(settings)
    ws = settings.worker
    pool = redis_pool(settings)
    store: Any = open_store(settings.store_location, settings=settings)
    bus = Bus(pool, ws.prefix, settings.gateway.keep_finished_s)
    executor = Executor(name or worker_name(), bus, store, ws,
                        lambda hub: agent_router(settings, store, hub, agents_file))
    worker = FleetWorker(
        functions=[func(run_job, name=JOB, max_tries=1000)], queue_name=bus.queue,
        redis_pool=pool, max_jobs=ws.concurrency, job_timeout=JOB_TIMEOUT_S, keep_result=0,
        poll_delay=ws.poll_s, max_tries=1000, job_completion_wait=int(ws.drain_s),
        ctx={"thinkloop": executor}, retry_jobs=True, log_results=False,
        health_check_interval=60, job_serializer=pool.job_serializer,
        job_deserializer=pool.job_deserializer)
    plans = Schedules(store.dsn, store.schema)
    beat = asyncio.get_running_loop().create_task(heartbeat(plans, scheduled(pool, bus, store)))
    try:
        await pool.ping()
        await executor.start()
        # As the gateway does (thinkloop.tuning): without it, full collections of
        # 75,000-110,000 objects held the worker's loop 160-230 ms under load, every event
        # of 200 runs waiting (most of the event p99); now two of 22,000 per 200 runs.
        tune_gc()
        with contextlib.suppress(asyncio.CancelledError):
            await worker.async_run()
    finally:
        beat.cancel()
        await asyncio.gather(beat, return_exceptions=True)
        await plans.aclose()
        # Runs in progress hand back (or finish) inside close(), which needs Redis: the
        # control channel stops first, the pool closes last.
        await executor.stop()
        await worker.close()
        if executor.abandoned:
            _exit_now(executor.abandoned)
        await executor.aclose()
        await store.aclose()
