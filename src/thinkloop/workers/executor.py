"""The runs one worker executes (see :mod:`thinkloop.workers.execute` for the parts)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from arq.constants import in_progress_key_prefix
from arq.worker import Retry

from thinkloop.api import Agent, RunHandle, RunRecord, RunResult
from thinkloop.core.errors import RunAccessError
from thinkloop.core.settings import WorkerSettings
from thinkloop.server.agents import AgentRouter
from thinkloop.server.gateway import session_key
from thinkloop.server.inputs import Answer
from thinkloop.workers.bus import Bus
from thinkloop.workers.connect import FleetStore
from thinkloop.workers.execute import (
    FleetHub,
    Outbox,
    Pump,
    Takes,
    aborts_asked,
    answer_text,
    result_view,
)
from thinkloop.workers.rows import RunRow, Taken

log = logging.getLogger("thinkloop.workers")
CHILDREN_POLL_S = 0.25  # how often a run's sub-agents are copied to its row while it runs


@dataclass
class Job:
    """One run this worker holds: its agent, its handle, its event pump."""

    row: RunRow
    agent: Agent
    handle: RunHandle
    pump: Pump
    job_id: str  # its arq job
    children: bytes = b"[]"  # its sub-agents as last written to its row


class Executor:
    """Executes queued runs for one worker process (``ctx["thinkloop"]`` of its arq jobs)."""

    def __init__(self, name: str, bus: Bus, store: FleetStore, settings: WorkerSettings,
                 router: Callable[[FleetHub], AgentRouter]) -> None:
        self.name, self.bus, self.store, self.settings = name, bus, store, settings
        self.pumps: dict[str, Pump] = {}
        self.jobs: dict[str, Job] = {}
        self.hub = FleetHub(bus, self.pumps)
        self.outbox = Outbox(bus, give_up_s=settings.lease_s / 2)
        self.aborts = aborts_asked(store)
        self.takes = Takes(bus, settings.max_deaths, int(settings.lease_s * 1000), name)
        self.router = router(self.hub)
        # The arq jobs whose runs execute here -> their run's id: each one's lease is renewed
        # while it is here.
        self.leases: dict[str, str] = {}
        # Jobs whose fate arq must leave alone (neither finish nor re-queue them): handing
        # back, left with a call running, or taken by another worker (a lost lease).
        self.settling: set[str] = set()
        self.abandoned: list[str] = []  # runs left with a tool call running (SIGTERM)
        # Jobs finished in their run's end script (Bus.finish): arq has nothing left to do.
        self.ended: set[str] = set()
        self._renewed_at = time.monotonic()  # the last renewal Redis took
        # Set when a gateway queues a run (Bus.WAKE): the worker looks for it before its poll.
        self.queued = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._keepers: list[asyncio.Task[None]] = []  # until the last run here has ended

    # --- the worker's life -------------------------------------------------------------------

    async def start(self) -> None:
        await self.bus.alive(self.name)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._listen()), loop.create_task(self._beat())]
        # One task each for every run held here (a lease renewal or a sub-agent look per
        # run and per period was a timer per run: most of an idle run's CPU); they go on
        # while a stopping worker's runs finish (worker.drain_s), until aclose().
        self._keepers = [loop.create_task(self._keep_leases()),
                         loop.create_task(self._watch_children())]

    async def stop(self) -> None:
        """Stop listening (the runs still held hand back or finish after this)."""
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self.bus.gone(self.name)

    async def aclose(self) -> None:
        """Close the agents (their post-turn jobs first)."""
        for t in self._keepers:
            t.cancel()
        await asyncio.gather(*self._keepers, return_exceptions=True)
        await self.router.aclose()
        await self.outbox.aclose()

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.settings.lease_s / 3)
            with contextlib.suppress(Exception):
                await self.bus.alive(self.name)

    async def _listen(self) -> None:
        """Aborts and answers from any gateway, for the runs held here."""
        while True:
            try:
                async with self.bus.redis.pubsub() as ps:
                    await ps.subscribe(self.bus.control)
                    async for msg in ps.listen():
                        if msg.get("type") == "message":
                            self._control(orjson.loads(msg["data"]))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("the control channel failed; listening again")
                await asyncio.sleep(1)

    def _control(self, msg: dict[str, Any]) -> None:
        if "queued" in msg:
            self.queued.set()
        elif "abort" in msg:
            job = self.jobs.get(str(msg["abort"]))
            if job is not None:
                job.agent.registry.abort(job.row.id)
        elif "answer" in msg:
            self.hub.answer(str(msg["answer"]), str(msg.get("id")), Answer(
                msg.get("approved"), msg.get("text"), str(msg.get("reason") or "")))

    # --- one run -----------------------------------------------------------------------------

    async def execute(self, run_id: str, job_id: str, job_try: int) -> None:
        # `thinkloop runs abort` writes to the store: read before the take, which cancels a
        # queued run it names instead of moving it to running.
        asked = await self.aborts(run_id)
        self.leases[job_id] = run_id
        try:
            # The lease is renewed at once (arq took the job for its own week-long timeout),
            # then every lease_s / 3 with every other run's (_keep_leases).
            took = await self.takes.take(run_id, in_progress_key_prefix + job_id, job_try,
                                         asked)
            self._renewed_at = time.monotonic()
            row = took.row
            if took.what == "lost":
                self._lost(job_id, run_id)
            if row is None or took.what in ("gone", "lost"):
                return  # forgotten, ended by an earlier try that died, or taken
            deaths = job_try - 1 - row.handbacks
            if deaths > row.deaths:  # the try before this one died under the run
                await self._dead(row, deaths)
            if took.what == "moved":
                return  # aborted while queued
            if took.what == "dying":
                await self.bus.count_up("failed_deaths")
                await self._end(row, "failed", f"its worker died {deaths} times")
            elif took.what == "abort":
                await self._end(row, "cancelled", "aborted while queued")
            else:
                try:
                    await self._run(row, job_id, took, resumed=row.status == "running")
                finally:
                    if job_id not in self.ended:  # counted off with its end, or now
                        await self.bus.running_on(self.name, -1)
        finally:
            self.leases.pop(job_id, None)

    async def _dead(self, row: RunRow, deaths: int) -> None:
        """The run's last worker died: count it (its lease expired) and forget its slot."""
        await self.bus.redis.hset(self.bus.key("run", row.id), "deaths", str(deaths))
        await self.bus.count_up("lease_expiries")
        if row.worker:
            await self.bus.running_on(row.worker, -1)
        log.warning("run %s: its worker %s died; taking it over", row.id, row.worker)

    async def _keep_leases(self) -> None:
        while True:
            await asyncio.sleep(self.settings.lease_s / 3)
            await self._renew(dict(self.leases))

    async def _renew(self, held: dict[str, str]) -> None:
        """Keep the leases (arq's in-progress keys) of the jobs ``held`` (job -> run), in one
        round trip; a lost lease stops its run here."""
        if not held:  # no lease to lose: the fence below counts from here
            self._renewed_at = time.monotonic()
            return
        ms = int(self.settings.lease_s * 1000)
        try:
            async with self.bus.redis.pipeline(transaction=False) as pipe:
                for job_id in held:
                    pipe.pexpire(in_progress_key_prefix + job_id, ms)
                kept = await pipe.execute()
        except Exception:  # Redis is away: the runs go on until a lease may have expired
            log.exception("the leases of %d runs could not be renewed", len(held))
            if time.monotonic() - self._renewed_at > self.settings.lease_s * 2 / 3:
                for job_id, run_id in held.items():  # another worker may take them soon
                    self._lost(job_id, run_id)
            return
        self._renewed_at = time.monotonic()
        for (job_id, run_id), ok in zip(held.items(), kept, strict=True):
            if ok or job_id not in self.leases:
                continue
            try:  # renewed late (a busy loop) but nobody took it: still ours
                ok = await self.bus.redis.set(in_progress_key_prefix + job_id, b"1", px=ms,
                                              nx=True)
            except Exception:
                log.exception("job %s: the lease could not be renewed", job_id)
                continue
            if not ok:
                self._lost(job_id, run_id)

    def _lost(self, job_id: str, run_id: str) -> None:
        """Another worker may take the run: stop it here once its calls in flight are
        checkpointed (its PostgreSQL lock keeps the other's resume out until then), and
        leave its job to whoever holds it now."""
        if job_id not in self.leases:
            return
        log.error("run %s: lease lost; handing it back", run_id)
        self.leases.pop(job_id, None)
        self.settling.add(job_id)
        job = self.jobs.get(run_id)
        if job is not None:
            try:
                job.agent.hand_back(job.row.id, job.pump.drop)
            except Exception:  # the other leases are still to keep
                log.exception("run %s could not be handed back", job.row.id)

    async def _run(self, row: RunRow, job_id: str, took: Taken, *, resumed: bool) -> None:
        last = took.last
        if took.aborted:
            await self._end(row, "cancelled", "aborted before it started")
            return
        agent = await self.router.get(row.agent)
        pump = Pump(self.outbox, row.id, last)
        pump.agent = agent
        self.pumps[row.id] = pump
        if row.deliver_to:
            self.hub.targets[row.id] = row.deliver_to
        try:
            handle = await self._start(agent, row, resumed)
            if handle is None:
                return
            pump.handle = handle
            self.jobs[row.id] = Job(row, agent, handle, pump, job_id)
            await self._pump(self.jobs[row.id])
        finally:
            self.jobs.pop(row.id, None)
            self.pumps.pop(row.id, None)
            self.hub.targets.pop(row.id, None)
            await pump.close()

    async def _start(self, agent: Agent, row: RunRow, resumed: bool) -> RunHandle | None:
        if resumed:  # another worker had it: it may have ended, or have checkpoints
            rec = await self.store.get_run(row.id)
            if rec is not None and rec.ended_at is not None:
                # It ended under a worker that died before telling Redis: tell it now.
                await self.bus.finish(row, rec.status, {"error": rec.error})
                return None
        if resumed and await self.store.checkpoints(row.id):
            try:
                handle = await agent.start_resume_run(row.id, stream_model=row.stream,
                                                      events=False)
            except RunAccessError as exc:  # still alive somewhere (a stale lease): later
                log.warning("run %s: %s; retrying", row.id, exc)
                await self.bus.bump(row.id, "handbacks")
                raise Retry(defer=self.settings.lease_s) from None
            await self.bus.count_up("resumes")
            return handle
        key = session_key(row.user, row.session) if row.session else None
        return agent.start(row.task, session=key, user_id=row.user if row.remember else None,
                           stream_model=row.stream, run_id=row.id, events=False)

    async def _pump(self, job: Job) -> None:
        handle, pump = job.handle, job.pump
        # Its events reach the pump as they happen (FleetHub.forward, the agent's subscriber),
        # not through the handle's queue (a wake-up of a reading task per event, the events
        # waiting for it). The result is awaited in a task of its own: the job's cancellation
        # (SIGTERM) must not reach the handle, which would cancel the run as ended.
        forwarding = asyncio.get_running_loop().create_task(handle.result())
        try:
            result = await asyncio.shield(forwarding)
        except asyncio.CancelledError:
            if not await self._hand_back(job, forwarding):  # it ended meanwhile
                await self._finish(job, await asyncio.shield(forwarding))
            raise
        except RunAccessError as exc:  # alive on another worker (a stale lease): later
            log.warning("run %s: %s; retrying", job.row.id, exc)
            await self.bus.bump(job.row.id, "handbacks")
            raise Retry(defer=self.settings.lease_s) from None
        if not pump.dropping:  # dropping: the lease was lost, another worker has the run
            await self._finish(job, result, done=True)

    async def _finish(self, job: Job, result: RunResult, *, done: bool = False) -> None:
        """Tell Redis the run ended, in the outbox's write after its last events (one round
        trip for both); ``done``: its job ends with it (not cancelled), so the same round
        trip counts it off this worker and finishes its arq job."""
        view = {**result_view(result, job.row.session), "children": _children(job.handle)}
        if done:
            # Its lease ends in the script: a renewal from here on would bring it back.
            self.leases.pop(job.job_id, None)
            await self.outbox.end(job.row, result.status, view, (self.name, job.job_id))
            self.ended.add(job.job_id)
        else:
            await self.outbox.end(job.row, result.status, view)
        text = answer_text(result)
        for target in job.row.deliver_to:  # a scheduled run's answer, where it says
            if text is not None:
                await self.bus.deliver(job.row.id, target, text)

    async def _watch_children(self) -> None:
        """Each run's sub-agents into its row as they start and end, so ``GET /v1/runs/{id}``
        on any gateway lists them as an in-process run's does."""
        while True:
            await asyncio.sleep(CHILDREN_POLL_S)
            for job in list(self.jobs.values()):
                if job.handle.state.children is None:
                    continue  # none started yet
                now = orjson.dumps(_children(job.handle), default=str)
                if now != job.children:
                    try:
                        await self.bus.children(job.row.id, now)
                        job.children = now
                    except Exception:  # Redis away: the next look tries again
                        log.warning("run %s: its sub-agents could not be written", job.row.id)

    async def _hand_back(self, job: Job, forwarding: asyncio.Task[RunResult]) -> bool:
        """SIGTERM: stop the run without ending it, once its tool calls in flight are
        checkpointed, so that the next worker resumes it and runs no finished call again.
        False: it ended on its own meanwhile. Calls still running after
        ``worker.handback_s``: the run is abandoned (its job left to lease expiry, never
        re-queued while a call may run here) and the worker exits without waiting."""
        self.settling.add(job.job_id)  # arq re-queues it only once it has stopped here
        stopped = job.agent.hand_back(job.row.id, job.pump.drop)
        if stopped is None:  # it had not begun: nothing of it is recorded
            job.pump.drop()
            job.handle.cancel()
        elif not stopped.done():
            log.warning("run %s waits for its tool calls in flight before it is handed back",
                        job.row.id)
            try:
                async with asyncio.timeout(self.settings.handback_s):
                    await asyncio.shield(stopped)
            except TimeoutError:
                log.error("run %s: its tool calls still run after %gs; left to its lease",
                          job.row.id, self.settings.handback_s)
                self.leases.pop(job.job_id, None)
                self.abandoned.append(job.row.id)
                return True
        if stopped is not None and not await stopped:
            self.settling.discard(job.job_id)
            return False
        await asyncio.gather(forwarding, return_exceptions=True)
        await self.bus.bump(job.row.id, "handbacks")
        await self.bus.count_up("handbacks")
        self.settling.discard(job.job_id)
        log.info("run %s handed back", job.row.id)
        return True

    async def _end(self, row: RunRow, status: str, reason: str) -> None:
        """End a run that did not (or could not) execute here, in Redis and in the store."""
        await self.bus.finish(row, status, {"error": reason})
        rec = await self.store.get_run(row.id)
        now = time.time()
        base = rec or RunRecord(row.id, row.agent, "", "", status, row.created_at, None,
                                row.user, row.task)
        await self.store.save_run(RunRecord(
            base.id, base.agent, base.model, base.provider, status, base.started_at,
            base.session_id, base.user_id, base.task, base.steps, base.input_tokens,
            base.output_tokens, base.cost_usd, reason, base.parent_id, now))


def _children(handle: RunHandle) -> list[dict[str, Any]]:
    children = handle.state.children
    return children.view() if children is not None else []
