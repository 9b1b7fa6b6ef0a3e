"""The gateway's side of the fleet: runs handed to arq, followed and steered through Redis.

``thinkloop serve --queue redis://...`` gives its gateway :func:`fleet_factory`: a run is a
row in Redis and a ``queued`` record in the store, then an arq job (its id is the run's, so
it is queued once); whichever worker takes it streams its events to Redis, where any gateway
reads them with the same numbers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from arq.connections import ArqRedis
from arq.jobs import serialize_job

from thinkloop.api import RunRecord
from thinkloop.core.errors import RunLimitError
from thinkloop.core.settings import Settings
from thinkloop.server.config import GatewayConfig
from thinkloop.server.fleet import Followed
from thinkloop.server.gateway import Backend, FleetFactory, session_key
from thinkloop.server.inputs import Answer
from thinkloop.workers.bus import Bus
from thinkloop.workers.connect import JOB, FleetStore, check_store, redis_pool
from thinkloop.workers.rows import RunRow
from thinkloop.workers.schedules import Schedule, Schedules
from thinkloop.workers.tail import Tail, cut_end
from thinkloop.workers.together import Together

log = logging.getLogger("thinkloop.workers")


@dataclass(eq=False)
class RemoteRun:
    """A run on a worker, as one gateway sees it: a snapshot of its row, its live events."""

    bus: Bus
    row: RunRow
    events: int = 0
    _ended: str | None = field(default=None, repr=False)

    @property
    def id(self) -> str:
        return self.row.id

    @property
    def user(self) -> str:
        return self.row.user

    @property
    def agent(self) -> str:
        return self.row.agent

    @property
    def session(self) -> str | None:
        return self.row.session

    @property
    def created_at(self) -> float:
        return self.row.created_at

    @property
    def done(self) -> bool:
        return self.row.done

    @property
    def status(self) -> str:
        return self.row.status

    async def follow(self, after: int = 0) -> Any:
        async for seq, data, end in self.bus.follow(self.id, after):
            if data is None:
                self._ended = end
                return
            yield seq, data

    def follow_batches(self, after: int = 0) -> AsyncIterator[list[tuple[int, bytes]]]:
        """:meth:`follow`'s events in lists of those ready together (one write each): from
        the process's news reader itself when it has one (a generator fewer for every
        write to pass), which says when the end comes (:meth:`_end`)."""
        if self.bus.tail is not None:
            return self.bus.tail.follow(self.id, after, ends=self._end)
        return self._batches(after)

    def _end(self, status: str) -> None:
        self._ended = status

    async def _batches(self, after: int) -> AsyncIterator[list[tuple[int, bytes]]]:
        async with contextlib.aclosing(self.bus.batches(self.id, after)) as batches:
            async for got in batches:
                batch, done = cut_end(got, self._end)  # told before the last events: see ended
                if batch:
                    yield batch
                if done:
                    return

    @property
    def ended(self) -> str | None:
        """How the run ended, once :meth:`follow_batches` has come to its end: set before
        it hands over the events that came with the end, so that a stream writes them and
        its end frame at once."""
        return self._ended

    async def end_status(self) -> str:
        if self._ended is not None:
            return self._ended
        row = await self.bus.get(self.id)
        return row.status if row is not None else self.status

    def view(self) -> dict[str, Any]:
        r = self.row
        view: dict[str, Any] = {"id": r.id, "agent": r.agent, "session": r.session,
                                "status": r.status, "created_at": r.created_at,
                                "finished_at": r.finished_at, "events": self.events,
                                "worker": r.worker, "priority": r.priority,
                                "children": list(r.children)}
        if r.view:
            view.update(r.view)
        return view


# arq takes due jobs in the order of their score, the time they are due: a run is queued as
# due in the past, a day earlier per step of priority (ahead of every run of the step below
# queued in the last day), never in the future (a run of priority -100 is due now).
PRIORITY_STEP_MS = 86_400_000
MAX_PRIORITY = 100
# How long a run queued here is followed without reading its row again: well under the
# least time Redis keeps a run's keys (60 s), so its stream is still there.
FRESH_S = 30.0
JOB_TTL_MS = 86_400_000  # as arq's own default: a job nobody took in a day is dropped


class QueuedRecords(Together[RunRecord, None]):
    """The ``queued`` records of the runs queued together, written in one statement: a
    burst of 200 POSTs was 200 upserts, each a round trip and a pool connection's
    acquire and release (as :class:`~thinkloop.workers.execute.AbortsAsked` asks)."""

    def __init__(self, store: FleetStore) -> None:
        async def save_runs(records: list[RunRecord]) -> list[None]:
            await store.save_runs(records)
            return [None] * len(records)

        super().__init__(save_runs)
        self.store = store

    async def save(self, record: RunRecord) -> None:
        await self(record)


@dataclass(frozen=True)
class Batched:
    """The round trips of the runs a gateway queues together, one of each for all
    (:class:`~thinkloop.workers.together.Together`): their slots and rows, their arq jobs."""

    create: Callable[[RunRow], Awaitable[int]]
    enqueue: Callable[[tuple[str, bytes, int]], Awaitable[bool]]

    @classmethod
    def of(cls, bus: Bus, limits: tuple[int, int]) -> Batched:
        async def creates(rows: list[RunRow]) -> list[int]:
            return await bus.create_many(rows, *limits)

        async def enqueues(jobs: list[tuple[str, bytes, int]]) -> list[bool]:
            return await bus.enqueue_many(jobs, JOB_TTL_MS)

        return cls(Together(creates), Together(enqueues))


async def queue_run(pool: ArqRedis, bus: Bus, save: Callable[[RunRecord], Awaitable[None]],
                    row: RunRow, limits: tuple[int, int] = (1 << 30, 1 << 30),
                    batched: Batched | None = None) -> int:
    """Queue ``row``'s run: its slot and row in Redis (refused over ``limits``, per user and
    in all: -1 or -2), a ``queued`` record in the store (``save``: ``thinkloop runs`` shows
    it), and the arq job (its id is the run's, so it is queued once), due earlier by its
    priority; through ``batched`` (its limits are its own) if given."""
    taken = await (batched.create(row) if batched else bus.create(row, *limits))
    if taken != 1:
        return taken
    try:
        key = session_key(row.user, row.session) if row.session else None
        record = RunRecord(row.id, row.agent, "", "", "queued", row.created_at, key, row.user,
                           row.task)
        await save(record)
        now_ms = int(time.time() * 1000)
        job = serialize_job(JOB, (row.id,), {}, None, now_ms, serializer=pool.job_serializer)
        due = now_ms - (row.priority + MAX_PRIORITY) * PRIORITY_STEP_MS
        if batched is not None:
            await batched.enqueue((row.id, job, due))
        else:
            await bus.enqueue(row.id, job, due, JOB_TTL_MS)
    except BaseException:
        await bus.release(row.id, row.user)
        raise
    return 1


class RedisFleet:
    """:class:`thinkloop.server.fleet.Fleet` on arq and Redis, for one gateway."""

    def __init__(self, pool: ArqRedis, store: FleetStore, settings: Settings,
                 config: GatewayConfig) -> None:
        self.pool = pool
        self.store = store
        self.bus = Bus(pool, settings.worker.prefix, config.keep_finished_s)
        self.tail = Tail(pool, self.bus.news, self.bus.key("ev", ""), expect_s=FRESH_S)
        self.bus.tail = self.tail
        self.queued = QueuedRecords(store)
        self.batched = Batched.of(self.bus, (config.per_user_runs, config.max_runs))
        # Runs queued here in the last FRESH_S, until their stream is asked for: its row as
        # queued is all the stream needs (its events come from Redis), a round trip less.
        self._fresh: dict[str, tuple[RunRow, float]] = {}
        self.per_user = config.per_user_runs
        self.total = config.max_runs
        self.plans = Schedules(getattr(store, "dsn", ""), getattr(store, "schema", None))

    async def submit(self, user: str, agent: str, task: str, session: str | None,
                     stream: bool, remember: bool = True, priority: int = 0) -> RemoteRun:
        row = RunRow(uuid.uuid4().hex, user, agent, session, "queued", time.time(), task,
                     stream, remember=remember, priority=priority)
        # Its events are kept from before it is queued, for its client's stream to come.
        await self.tail.expect(row.id)
        try:
            taken = await queue_run(self.pool, self.bus, self.queued.save, row,
                                    batched=self.batched)
        except BaseException:
            self.tail.forget(row.id)
            raise
        if taken != 1:
            self.tail.forget(row.id)
        if taken == -1:
            raise RunLimitError(f"you already have {self.per_user} runs in progress")
        if taken == -2:
            raise RunLimitError(f"the fleet is running {self.total} runs, its limit")
        self._keep_fresh(row)
        return RemoteRun(self.bus, row)

    def _keep_fresh(self, row: RunRow) -> None:
        now = time.monotonic()
        self._fresh[row.id] = (row, now)
        while self._fresh:  # the oldest first
            run_id, (_, at) = next(iter(self._fresh.items()))
            if now - at < FRESH_S:
                break
            del self._fresh[run_id]

    async def get(self, run_id: str, user: str, to_follow: bool = False) -> RemoteRun | None:
        if to_follow:  # its client follows it now: the row queued here will do
            fresh = self._fresh.get(run_id)
            if fresh is not None and fresh[0].user == user:
                del self._fresh[run_id]  # a follower that reconnects reads the row
                return RemoteRun(self.bus, fresh[0])
        row, events = await self.bus.counted(run_id)
        if row is None or row.user != user:
            return None
        return RemoteRun(self.bus, row, events)

    async def abort(self, run_id: str) -> bool:
        row = await self.bus.get(run_id)
        if row is None or row.done:
            return False
        # Still queued: it ends here, before any worker takes it.
        if await self.bus.move(run_id, ("queued",), status="cancelling") == "queued":
            await self.bus.finish(row, "cancelled", {"error": "aborted while queued"})
            await self._record_cancelled(row)
            return True
        await self.bus.abort(run_id)  # a worker has it: it stops it within a poll
        return True

    async def _record_cancelled(self, row: RunRow) -> None:
        rec = await self.store.get_run(row.id)
        if rec is not None:
            await self.store.save_run(RunRecord(
                rec.id, rec.agent, rec.model, rec.provider, "cancelled", rec.started_at,
                rec.session_id, rec.user_id, rec.task, error="aborted while queued",
                ended_at=time.time()))

    async def abort_session(self, user: str, session: str) -> list[str]:
        ids = []
        for run_id in await self.bus.active_of(user):
            row = await self.bus.get(run_id)
            if row is not None and row.session == session and await self.abort(run_id):
                ids.append(run_id)
        return ids

    async def active_runs(self, user: str) -> list[Followed]:
        rows = [await self.bus.get(run_id) for run_id in await self.bus.active_of(user)]
        return [RemoteRun(self.bus, r) for r in rows if r is not None]

    async def session_runs(self, user: str, session: str) -> list[Followed]:
        return [r for r in await self.active_runs(user) if r.session == session]

    async def pending(self, run_id: str) -> list[tuple[str, str]]:
        return sorted((await self.bus.waits(run_id)).items())

    async def answer(self, run_id: str, input_id: str, answer: Answer) -> bool:
        return await self.bus.answer(run_id, input_id, {"approved": answer.approved,
                                                 "text": answer.text, "reason": answer.reason})

    async def schedules(self, user: str) -> list[dict[str, Any]]:
        return [schedule_view(s) for s in await self.plans.list() if s.user == user]

    async def add_schedule(self, user: str, cron: str, agent: str, task: str,
                           session: str | None, priority: int = 0,
                           deliver_to: tuple[str, ...] = ()) -> dict[str, Any]:
        return schedule_view(await self.plans.add(cron, agent, task, user, session, priority,
                                                  deliver_to))

    async def remove_schedule(self, user: str, schedule_id: str) -> bool:
        if not any(s.id == schedule_id for s in await self.plans.list() if s.user == user):
            return False
        return await self.plans.remove(schedule_id)

    async def deliveries(self, platforms: Sequence[str],
                         send: Callable[[str, str], Awaitable[None]]) -> None:
        consumer = f"{socket.gethostname()}-{os.getpid()}"
        await asyncio.gather(*(self._deliver(p, consumer, send) for p in platforms))

    async def _deliver(self, platform: str, consumer: str,
                       send: Callable[[str, str], Awaitable[None]]) -> None:
        while True:
            try:
                async for eid, run_id, target, text in self.bus.deliveries(platform, consumer):
                    try:
                        await send(target, text)
                    except Exception:  # one undeliverable message must not stop the rest
                        log.exception("run %s: could not deliver to %s", run_id, target)
                    await self.bus.delivered(platform, eid)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("reading the %s deliveries failed; reading again", platform)
                await asyncio.sleep(1)

    async def health(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        try:
            await self.pool.ping()
            out["queue"], out["workers"] = "ok", await self.bus.live_workers()
        except Exception as exc:  # a health check reports, it never raises
            out["queue"] = f"unreachable: {type(exc).__name__}"
        try:
            await self.store.get_run("-")
            out["store"] = "ok"
        except Exception as exc:
            out["store"] = f"unreachable: {type(exc).__name__}"
        return out

    async def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {
            "thinkloop_queue_depth": float(await self.pool.zcard(self.bus.queue)),
            "thinkloop_fleet_active_runs": float(await self.bus.active())}
        for worker, n in (await self.bus.running()).items():
            out[f'thinkloop_worker_runs{{worker="{worker}"}}'] = float(n)
        stats = await self.bus.stats()
        for name in ("resumes", "lease_expiries", "handbacks", "failed_deaths"):
            out[f"thinkloop_fleet_{name}"] = float(stats.get(name, 0))
        return out

    async def aclose(self) -> None:
        if self.bus.tail is not None:
            await self.bus.tail.aclose()
        await self.plans.aclose()
        await self.pool.aclose()


def schedule_view(s: Schedule) -> dict[str, Any]:
    return {"id": s.id, "cron": s.cron, "agent": s.agent, "task": s.task,
            "session": s.session, "next_at": s.next_at, "fired": s.fired,
            "priority": s.priority, "deliver_to": list(s.deliver_to)}


def fleet_factory(settings: Settings) -> FleetFactory:
    """What ``create_app(fleet=...)`` takes: the gateway's fleet, on ``settings.queue_url``.
    A queue with the SQLite store is refused here, before anything starts."""
    check_store(settings)

    def make(store: Backend, s: Settings, config: GatewayConfig) -> RedisFleet:
        # PostgreSQL (checked above) keeps run records and checkpoints too.
        return RedisFleet(redis_pool(s), cast(FleetStore, store), s, config)

    return make
