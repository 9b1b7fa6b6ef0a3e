"""The fleet's shared state in Redis: run rows, numbered event streams, limits, control.

Everything a gateway and a worker say to each other goes through here, under one key prefix
(``worker.prefix``) so fleets sharing a Redis stay apart:

* ``{p}:run:{id}``     a hash per run: owner, agent, session, status, worker, its view when done
* ``{p}:ev:{id}``      the run's events, a stream whose entry ids are ``0-N`` for event N, so
                      every gateway numbers them alike and ``Last-Event-ID: N`` resumes at
                      ``0-N``; an explicit id also refuses a second writer's duplicates; the
                      last entry (``end``) closes it
* ``{p}:news``         every run's new events again, a field ``"{id} {N}"`` each, an entry
                      per write: a gateway reads this one stream for all the runs it follows
* ``{p}:active`` and ``{p}:active:{user}``  sets of runs in progress (the fleet's limits)
* ``{p}:ctl``          pub/sub: aborts and answers for the run's worker; wake-ups (``{p}:woke``)
* ``{p}:wait:{id}``    what a run waits on (input id -> approval | question)
* ``{p}:stat``         counters (resumes, lease expiries, hand-backs)
* ``{p}:out:{platform}``  messages scheduled runs deliver to people, a stream that the
                      gateways serving that chat platform read as one consumer group
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import Any

import orjson
from arq import constants as arq
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from thinkloop.workers import scripts
from thinkloop.workers.rows import End, RunRow, Taken
from thinkloop.workers.tail import Item, Tail, ended, stream_item

# Entries (one per outbox write) the news keeps: a gateway more than this far behind reads
# what it missed from the runs' own streams (Tail's resync).
NEWS_LEN = 10_000
# Published on the control channel with a run queued, at most once per WAKE_EVERY_MS (200
# POSTs were 200 messages to every worker): idle workers look for it at once.
WAKE, WAKE_EVERY_MS = b'{"queued":1}', 2


class Bus:
    """One fleet's keys in one Redis (``redis`` is shared: the caller closes it)."""

    def __init__(self, redis: Redis, prefix: str, keep_s: float = 3600.0) -> None:
        # Any: redis-py types its async commands as "Awaitable[T] | T" for both clients.
        self.redis: Any = redis
        self.p = prefix
        self.keep_s = int(max(60, keep_s))
        self.tail: Tail | None = None  # a gateway's one reader of the streams it follows
        self._reserve = redis.register_script(scripts.RESERVE)
        self._move = redis.register_script(scripts.MOVE)
        self._answer = redis.register_script(scripts.ANSWER)
        self._create = redis.register_script(scripts.CREATE)
        self._enqueue = redis.register_script(scripts.ENQUEUE)
        self._create_many = redis.register_script(scripts.CREATE_MANY)
        self._enqueue_many = redis.register_script(scripts.ENQUEUE_MANY)
        self._finish = redis.register_script(scripts.FINISH)
        self._append = redis.register_script(scripts.APPEND)
        self._take = redis.register_script(scripts.TAKE)
        self._write = redis.register_script(scripts.WRITE)

    def key(self, *parts: str) -> str:
        return ":".join((self.p, *parts))

    @property
    def queue(self) -> str:
        """arq's queue (a sorted set of job ids)."""
        return self.key("queue")

    @property
    def news(self) -> str:
        """The fleet's news: every run's new events, in the order written (see
        :class:`~thinkloop.workers.tail.Tail`)."""
        return self.key("news")

    @property
    def control(self) -> str:
        return self.key("ctl")

    # --- runs ------------------------------------------------------------------------------

    async def create(self, row: RunRow, per_user: int = 1 << 30, total: int = 1 << 30) -> int:
        """Take a slot for ``row`` and write it, at once: 1 done; -1 over the user's limit,
        -2 over the fleet's (nothing written)."""
        args: list[str | int] = [row.id, per_user, total, self.keep_s * 24]
        for k, v in row.fields().items():
            args += [k, v]
        return int(await self._create(
            keys=[self.key("active"), self.key("active", row.user), self.key("run", row.id)],
            args=args))

    async def enqueue(self, job_id: str, job: bytes, score: int, ttl_ms: int) -> bool:
        """arq's job ``job_id`` due at ``score`` (ms); False if it is queued already."""
        return bool(await self._enqueue(
            keys=[arq.job_key_prefix + job_id, arq.result_key_prefix + job_id, self.queue,
                  self.key("woke")],
            args=[job, ttl_ms, score, job_id, self.control, WAKE, WAKE_EVERY_MS]))

    async def create_many(self, rows: Sequence[RunRow], per_user: int = 1 << 30,
                          total: int = 1 << 30) -> list[int]:
        """:meth:`create` for each of ``rows`` in order, in one round trip."""
        keys = [self.key("active")]
        args: list[str | int] = [per_user, total, self.keep_s * 24]
        for row in rows:
            keys += [self.key("active", row.user), self.key("run", row.id)]
            fields = row.fields()
            args += [row.id, 2 * len(fields)]
            for k, v in fields.items():
                args += [k, v]
        return [int(x) for x in await self._create_many(keys=keys, args=args)]

    async def enqueue_many(self, jobs: Sequence[tuple[str, bytes, int]], ttl_ms: int
                           ) -> list[bool]:
        """:meth:`enqueue` for each ``(job id, job, score)``, in one round trip."""
        keys = [self.queue, self.key("woke")]
        args: list[str | int | bytes] = [ttl_ms, self.control, WAKE, WAKE_EVERY_MS]
        for job_id, job, score in jobs:
            keys += [arq.job_key_prefix + job_id, arq.result_key_prefix + job_id]
            args += [job, score, job_id]
        return [bool(x) for x in await self._enqueue_many(keys=keys, args=args)]

    async def get(self, run_id: str) -> RunRow | None:
        h = await self.redis.hgetall(self.key("run", run_id))
        return RunRow.of(run_id, h) if h else None

    async def move(self, run_id: str, expect: tuple[str, ...], **fields: str) -> str | None:
        """Set ``fields`` if the run's status is one of ``expect``; the status it had, or
        None (unknown run, or in another status)."""
        args: list[str] = [",".join(expect)]
        for k, v in fields.items():
            args += [k, v]
        old = await self._move(keys=[self.key("run", run_id)], args=args)
        return old.decode() if isinstance(old, bytes) else None

    async def now(self, run_ids: list[str]) -> dict[str, dict[str, Any]]:
        """What Redis has now of the runs still in it: status (``waiting`` while a running
        run waits for an answer), priority, worker; one round trip."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for run_id in run_ids:
                pipe.hmget(self.key("run", run_id), "status", "priority", "worker")
                pipe.hlen(self.key("wait", run_id))
            got = await pipe.execute()
        out: dict[str, dict[str, Any]] = {}
        for run_id, (status, priority, worker), waits in zip(
                run_ids, got[::2], got[1::2], strict=True):
            if status is None:
                continue
            st = status.decode()
            out[run_id] = {"status": "waiting" if st == "running" and waits else st,
                           "priority": int(priority or 0),
                           "worker": worker.decode() if worker else None}
        return out

    async def bump(self, run_id: str, field: str) -> int:
        return int(await self.redis.hincrby(self.key("run", run_id), field, 1))

    async def children(self, run_id: str, view: bytes) -> None:
        """The run's sub-agents as its worker sees them (a JSON list), for every gateway."""
        await self.redis.hset(self.key("run", run_id), "children", view)

    async def finish(self, row: RunRow, status: str, view: Mapping[str, Any],
                     ran: tuple[str, str] | None = None) -> None:
        """The run's end: its row, the stream's ``end`` entry, its slot freed (one round
        trip); ``ran`` (worker, arq job id): ended where it ran, which counts it off the
        worker and finishes its arq job in the same round trip."""
        keys, args = self._end(End(row, status, view, ran))
        await self._finish(keys=keys, args=args)

    def _end(self, end: End) -> tuple[list[str], list[str | int | bytes]]:
        """The keys and arguments of a run's end (``finish`` in
        :data:`~thinkloop.workers.scripts.FINISH`)."""
        row = end.row
        keys = [self.key("run", row.id), self.key("ev", row.id), self.key("active"),
                self.key("active", row.user), self.key("wait", row.id),
                self.key("abort", row.id), self.news]
        args: list[str | int | bytes] = [end.status, repr(time.time()),
                                         orjson.dumps(end.view, default=str), self.keep_s,
                                         row.id, NEWS_LEN]
        if end.ran is not None:
            worker, job_id = end.ran
            keys += [self.key("running"), arq.in_progress_key_prefix + job_id,
                     arq.retry_key_prefix + job_id, arq.job_key_prefix + job_id, self.queue,
                     arq.abort_jobs_ss]
            args += [worker, job_id]
        return keys, args

    async def take(self, runs: Sequence[tuple[str, str, int, bool]], max_deaths: int,
                   lease_ms: int, worker: str) -> list[Taken]:
        """A worker takes the runs of arq jobs, each ``(run id, its job's lease key, the
        job's try, whether the store holds an abort request)``, in one round trip (see
        :data:`~thinkloop.workers.scripts.TAKE` for what it does and returns)."""
        keys, args = [self.key("running")], list[str | int]([max_deaths, lease_ms, worker])
        for run_id, job_key, job_try, abort_asked in runs:
            keys += [self.key("run", run_id), self.key("ev", run_id), self.key("abort", run_id),
                     job_key]
            args += [job_try, "1" if abort_asked else "0"]
        got = await self._take(keys=keys, args=args)
        return [Taken.of(run[0], one) for run, one in zip(runs, got, strict=True)]

    # --- limits ----------------------------------------------------------------------------

    async def reserve(self, run_id: str, user: str, per_user: int, total: int) -> int:
        """1 taken; -1 the user's limit; -2 the fleet's."""
        return int(await self._reserve(
            keys=[self.key("active"), self.key("active", user)],
            args=[run_id, per_user, total]))

    async def release(self, run_id: str, user: str) -> None:
        await self.redis.srem(self.key("active"), run_id)
        await self.redis.srem(self.key("active", user), run_id)

    async def active(self) -> int:
        return int(await self.redis.scard(self.key("active")))

    async def active_of(self, user: str) -> list[str]:
        return sorted(m.decode() for m in await self.redis.smembers(self.key("active", user)))

    # --- workers ---------------------------------------------------------------------------

    async def alive(self, worker: str) -> None:
        await self.redis.zadd(self.key("workers"), {worker: time.time()})

    async def gone(self, worker: str) -> None:
        await self.redis.zrem(self.key("workers"), worker)
        await self.redis.hdel(self.key("running"), worker)

    async def live_workers(self, within_s: float = 30.0) -> int:
        return int(await self.redis.zcount(self.key("workers"), time.time() - within_s, "+inf"))

    async def running_on(self, worker: str, by: int) -> None:
        await self.redis.hincrby(self.key("running"), worker, by)

    async def running(self) -> dict[str, int]:
        h = await self.redis.hgetall(self.key("running"))
        return {k.decode(): int(v) for k, v in h.items() if int(v) > 0}

    # --- events ----------------------------------------------------------------------------

    async def append_batches(self, batches: Mapping[str, tuple[int, list[bytes]]]) -> None:
        """Events of many runs (run -> first number, events) in one round trip, into their
        runs' streams and the fleet's news; a number taken already (a second writer) is
        refused by Redis and left out of both."""
        keys, args = self._events(batches)
        await self._append(keys=[self.news, *keys], args=[NEWS_LEN, *args])

    def _events(self, batches: Mapping[str, tuple[int, list[bytes]]]
                ) -> tuple[list[str], list[str | int | bytes]]:
        """The runs' streams and the arguments of their events (``append`` in
        :mod:`~thinkloop.workers.scripts`): per run its id, first number, events by line."""
        keys: list[str] = []
        args: list[str | int | bytes] = []
        for run_id, (first, items) in batches.items():
            keys.append(self.key("ev", run_id))
            args += [run_id, first, b"\n".join(items)]
        return keys, args

    async def write(self, batches: Mapping[str, tuple[int, list[bytes]]],
                    ends: Sequence[End]) -> None:
        """:meth:`append_batches` and then :meth:`finish` for each of ``ends`` (each after
        its run's events), in one round trip."""
        run_keys, run_args = self._events(batches)
        keys = [self.news, *run_keys]
        args: list[str | int | bytes] = [NEWS_LEN, len(batches), *run_args]
        for end in ends:
            end_keys, end_args = self._end(end)
            keys += end_keys
            args += [len(end_keys), *end_args]
        await self._write(keys=keys, args=args)

    async def follow(self, run_id: str, after: int = 0,
                     block_ms: int = 1000) -> AsyncIterator[tuple[int, bytes | None, str]]:
        """``(seq, event JSON, "")`` for each event above ``after``, then ``(seq, None,
        status)`` for the end; waits for more while the run goes on (through the process's
        one :class:`~thinkloop.workers.tail.Tail` when it has one)."""
        async with contextlib.aclosing(self.batches(run_id, after, block_ms)) as batches:
            async for batch in batches:
                for seq, value in batch:
                    status = ended(value)
                    if status is not None:
                        yield seq, None, status
                        return
                    yield seq, value, ""

    def batches(self, run_id: str, after: int = 0, block_ms: int = 1000
                ) -> AsyncGenerator[list[Item]]:
        """The run's events above ``after`` as ``(seq, value)``, in lists of those that
        arrived together (one SSE write each, not one per event); ``value`` is the event's
        JSON, or its end (:func:`~thinkloop.workers.tail.ended`: the last item there is).
        The caller stops reading at the end."""
        if self.tail is not None:
            return self.tail.follow(run_id, after)
        return self._read_stream(self.key("ev", run_id), after, block_ms)

    async def _read_stream(self, key: str, after: int, block_ms: int
                           ) -> AsyncGenerator[list[Item]]:
        last = f"0-{max(0, after)}"
        while True:
            got = await self.redis.xread({key: last}, count=500, block=block_ms)
            for _, entries in got or ():
                if entries:
                    last = entries[-1][0].decode()
                    yield [stream_item(eid, fields) for eid, fields in entries]

    async def count(self, run_id: str) -> int:
        """How many events the run has (its end entry not counted)."""
        return (await self.counted(run_id))[1]

    async def counted(self, run_id: str) -> tuple[RunRow | None, int]:
        """The run's row and how many events it has (its end not counted), one round trip."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.key("run", run_id))
            pipe.xlen(self.key("ev", run_id))
            h, n = await pipe.execute()
        row = RunRow.of(run_id, h) if h else None
        n = int(n)
        return row, n - 1 if row is not None and row.done and n else n

    # --- control: aborts, answers, what runs wait on -----------------------------------------

    async def abort(self, run_id: str) -> None:
        await self.redis.set(self.key("abort", run_id), b"1", ex=self.keep_s)
        await self.redis.publish(self.control, orjson.dumps({"abort": run_id}))

    async def answer(self, run_id: str, input_id: str, answer: Mapping[str, Any]) -> bool:
        """Deliver the answer if the run still waits for it; False if it was answered."""
        msg = orjson.dumps({"answer": run_id, "id": input_id, **answer})
        return bool(await self._answer(keys=[self.key("wait", run_id)],
                                       args=[input_id, self.control, msg]))

    async def waiting(self, run_id: str, input_id: str, kind: str | None) -> None:
        key = self.key("wait", run_id)
        if kind is None:
            await self.redis.hdel(key, input_id)
        else:
            await self.redis.hset(key, input_id, kind)
            await self.redis.expire(key, self.keep_s)

    async def waits(self, run_id: str) -> dict[str, str]:
        h = await self.redis.hgetall(self.key("wait", run_id))
        return {k.decode(): v.decode() for k, v in h.items()}

    # --- deliveries: what scheduled runs send to people, through the gateways' channels ----

    async def deliver(self, run_id: str, target: str, text: str) -> None:
        """Queue ``text`` for ``target`` (``platform:chat``); a gateway serving the platform
        sends it."""
        platform = target.split(":", 1)[0]
        await self.redis.xadd(self.key("out", platform), {"run": run_id, "to": target,
                                                          "text": text},
                              maxlen=10_000, approximate=True)

    async def deliveries(self, platform: str, consumer: str,
                         block_ms: int = 1000) -> AsyncIterator[tuple[bytes, str, str, str]]:
        """``(entry id, run, target, text)`` for the messages queued for ``platform``, each
        to one consumer of the group (acknowledge it with :meth:`delivered`)."""
        key, group = self.key("out", platform), "gateways"
        try:
            await self.redis.xgroup_create(key, group, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        while True:
            got = await self.redis.xreadgroup(group, consumer, {key: ">"}, count=50,
                                              block=block_ms)
            for _, entries in got or ():
                for eid, f in entries:
                    yield (eid, f.get(b"run", b"").decode(), f.get(b"to", b"").decode(),
                           f.get(b"text", b"").decode())

    async def delivered(self, platform: str, entry_id: bytes) -> None:
        await self.redis.xack(self.key("out", platform), "gateways", entry_id)

    # --- counters --------------------------------------------------------------------------

    async def count_up(self, name: str, by: int = 1) -> None:
        await self.redis.hincrby(self.key("stat"), name, by)

    async def stats(self) -> dict[str, int]:
        h = await self.redis.hgetall(self.key("stat"))
        return {k.decode(): int(v) for k, v in h.items()}
