"""One gateway's reader of the run events its clients follow: the fleet's news (one stream
that every worker writes each run's new events to, beside the run's own stream), read with
one blocking ``XREAD`` and fanned out to each follower.

It read every followed run's stream in one ``XREAD``; that command named each stream and its
position, so with 200 runs followed it cost more than the few events each read brought. The
news names only the runs that have new events, and carries them.

The runs' own streams stay the record: a follower first reads its run's stream from where it
is (``Last-Event-ID``), then takes the news; an event number it would skip (the news trimmed,
or read late) or a run silent for ``resync_s`` makes it read its stream again, so that no
event is missed or given twice, in the same numbers as every other gateway's.

A gateway that queues a run follows it from before the run is queued (:meth:`Tail.expect`),
so its client's stream starts from what the news brought meanwhile, without reading the
run's stream (a round trip per run).

Events pass as ``(number, value)`` pairs, ``value`` as the news holds it: the event's JSON,
or ``b"end:" + status`` for the run's end (:func:`ended`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from thinkloop.workers.retry import RetryPolicy

log = logging.getLogger("thinkloop.workers")
NEWS_RETRY = RetryPolicy(retries=8, base_s=0.1, max_s=1.0)  # the news reader's reconnects
Item = tuple[int, bytes]  # an event's number and its value (the news' form)
END_MARK = b"end:"  # a news value that is a run's end (an event's is its JSON object)
# A run queued here but not followed yet keeps at most this many of its events for its
# client (a client that never follows it costs no more); past that its stream is read.
EXPECT_MAX = 2000


def ended(value: bytes) -> str | None:
    """The run's status if ``value`` is its end, else None."""
    return value[len(END_MARK):].decode() if value.startswith(END_MARK) else None


def cut_end(batch: list[Item], ends: Callable[[str], None] | None
            ) -> tuple[list[Item], bool]:
    """``batch`` (not empty) without the run's end, and whether it held it: the end is the
    last thing a stream holds, and ``ends(status)`` is told of it before the events that
    came with it are handed over. With no ``ends`` the end stays an item."""
    if ends is not None and (status := ended(batch[-1][1])) is not None:
        ends(status)
        return batch[:-1], True
    return batch, False


def stream_item(entry_id: bytes, fields: dict[bytes, bytes]) -> Item:
    """A run stream's entry (``0-N``, ``e`` or ``end``) in the news' form."""
    seq = int(entry_id.split(b"-")[1])
    data = fields.get(b"e")
    return (seq, data) if data is not None else (seq, END_MARK + fields.get(b"end", b""))


@dataclass(eq=False)
class _Follower:
    last: int  # the last event number it has
    items: list[Item | None] = field(default_factory=list)  # None: read the stream again
    error: BaseException | None = None  # the reader's: raised to the follower
    waiter: asyncio.Future[None] | None = None
    heard: float = field(default_factory=time.monotonic)  # when it last got something
    expected: bool = False  # queued here, its client not there yet
    since: float = field(default_factory=time.monotonic)

    def put(self, got: list[Item] | None) -> None:
        if got is None:
            self.items.append(None)
        else:
            self.items += got
        self.heard = time.monotonic()
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def fail(self, exc: BaseException) -> None:
        self.error = exc
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


class Tail:
    """Followers of runs' streams (keys ``{ev_prefix}{run id}``) through the news stream
    ``news`` in one Redis (``redis`` is shared: the caller closes it)."""

    def __init__(self, redis: Any, news: str, ev_prefix: str, block_ms: int = 1000,
                 count: int = 200, resync_s: float = 2.0, gather_s: float = 0.02,
                 expect_s: float = 30.0, retry: RetryPolicy = NEWS_RETRY) -> None:
        self.redis, self.news, self.ev_prefix = redis, news, ev_prefix
        self.retry = retry  # its retries: reconnections in a row before followers fail
        self._tries = 0
        self.block_ms, self.count, self.resync_s = block_ms, count, resync_s
        self.expect_s = expect_s  # how long a run queued here waits for its follower
        # After a read that brought news, the next waits this long: the workers' writes of
        # that time come in one read, and a run's events in one SSE write (a read per worker
        # write was a round trip and a write to each of its runs' clients every 5 ms).
        # 20 ms, not 10: half the reads and 6% fewer SSE writes, 10% of the gateway's CPU a
        # run, for about 5 ms more at the event latency's p99 (benchmarks/scale.py).
        self.gather_s = gather_s
        self._followers: dict[bytes, set[_Follower]] = {}  # run id -> its followers
        self._expected: dict[str, _Follower] = {}  # runs queued here, not followed yet
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None  # the news read from a known place
        self._conn: Any = None  # the reader's own connection (see _read)

    async def _start(self) -> None:
        """The reader running, and its place in the news taken."""
        if self._task is None or self._task.done():
            loop = asyncio.get_running_loop()
            self._ready = loop.create_future()
            self._task = loop.create_task(self._read(self._ready))
        if self._ready is not None:
            await asyncio.shield(self._ready)

    async def expect(self, run_id: str) -> None:
        """Keep what the news brings of ``run_id`` from now on, for its follower to come
        (call before the run is queued; :meth:`forget` if nobody will follow it)."""
        me = _Follower(0, expected=True)
        self._followers.setdefault(run_id.encode(), set()).add(me)
        self._expected[run_id] = me
        try:
            await self._start()
        except BaseException:
            self.forget(run_id)
            raise

    def forget(self, run_id: str) -> None:
        """Drop what :meth:`expect` kept of ``run_id``."""
        me = self._expected.pop(run_id, None)
        if me is not None:
            self._drop(run_id.encode(), me)

    def _drop(self, run: bytes, me: _Follower) -> None:
        mine = self._followers.get(run)
        if mine is not None:
            mine.discard(me)
            if not mine:
                del self._followers[run]

    async def follow(self, run_id: str, after: int,
                     ends: Callable[[str], None] | None = None) -> AsyncGenerator[list[Item]]:
        """The events of ``run_id`` numbered above ``after``, as they come, a list per read
        (the caller stops reading when it has what it wants: after the end). With ``ends``:
        the run's end is not an item; ``ends(status)`` is called when it comes, before the
        events that came with it are handed over, and then the iteration stops."""
        run = run_id.encode()
        me = self._expected.pop(run_id, None)
        if me is not None and me.error is None and me in self._followers.get(run, ()):
            me.expected = False  # what it kept since the run was queued is all there is
            me.last = max(0, after)
            caught = True
        else:
            me = _Follower(max(0, after))
            self._followers.setdefault(run, set()).add(me)
            caught = False
        try:
            # Whatever the news brings from now on reaches ``me``; what came before is in
            # the stream, read after the news' place was taken.
            await self._start()
            while True:
                if not caught:
                    got = await self._catch_up(run_id, me)
                    if got:
                        got, done = cut_end(got, ends)
                        if got:
                            yield got
                        if done:
                            return
                caught = False
                # The news, in order, until a gap (the numbers only rise) or silence calls
                # for the stream (in this loop: a generator per follower was a layer more
                # for every batch to pass).
                while (news := await self._next(me)) is not None:
                    mine = [e for e in news if e[0] > me.last]
                    if mine and mine[-1][0] != me.last + len(mine):
                        break
                    if mine:
                        me.last = mine[-1][0]
                        mine, done = cut_end(mine, ends)
                        if mine:
                            yield mine
                        if done:
                            return
        finally:
            self._drop(run, me)

    async def _next(self, me: _Follower) -> list[Item] | None:
        """All the follower's news that is there (one write for what piled up while it
        wrote the last), or None when it is to read its stream (after ``resync_s`` of
        silence: the reader says so)."""
        while not me.items:
            if me.error is not None:
                raise me.error
            me.waiter = asyncio.get_running_loop().create_future()
            try:
                await me.waiter
            finally:
                me.waiter = None
        items, me.items = me.items, []
        if None in items:
            return None
        return items  # type: ignore[return-value]

    async def _catch_up(self, run_id: str, me: _Follower) -> list[Item]:
        entries = await self.redis.xrange(self.ev_prefix + run_id, min=f"0-{me.last + 1}")
        got = [stream_item(eid, fields) for eid, fields in entries]
        if got:
            me.last = got[-1][0]
        me.heard = time.monotonic()
        return got

    async def _read(self, ready: asyncio.Future[None]) -> None:
        """Read the news for as long as anyone follows. A connection that fails once the
        reader has run (Redis restarting, a connection cut) is opened again, after 0.1 s,
        then twice as long up to 1 s, ``retry.retries`` times, each follower reading its run's
        stream again from where it is (what the news brought meanwhile is there): a failure
        cut every client's stream. Past that, or before the first read, every follower
        gets the error, as from its own ``XREAD``."""
        self._tries = 0
        while True:
            clean = False
            try:
                pos = await self._place()
                if ready.done():
                    self._resync()
                else:
                    ready.set_result(None)
                await self._follow_news(pos)
                clean = True  # no reply pending on the connection: kept for the next start
                return
            except Exception as exc:
                self._tries += 1
                if not ready.done() or self._tries > self.retry.retries:
                    self._fail_all(exc, ready)
                    return
                pause = self.retry.delay(self._tries)
                log.warning("reading the fleet's news failed (%r); again in %.1fs", exc, pause)
            finally:
                if not clean:
                    await self._close()
            await asyncio.sleep(pause)

    async def _place(self) -> bytes:
        """The news' end, and the reader's connection ready (connected, nothing unread)."""
        last = await self.redis.xrevrange(self.news, count=1)
        pool = self.redis.connection_pool
        if self._conn is None:
            self._conn = pool.make_connection()
        await pool.ensure_connection(self._conn)
        return bytes(last[0][0]) if last else b"0-0"

    async def _follow_news(self, pos: bytes) -> None:
        # A connection of its own, its replies read raw: redis-py's ``xread`` through the
        # pool (taking and giving back a connection, its retry wrapper, the reply made into
        # dictionaries) cost 2.5 times the CPU of the command itself, at every read. It is
        # kept while the reader pauses (nobody to follow) and closed after an error.
        conn = self._conn
        swept = time.monotonic()
        while self._followers:
            await conn.send_command("XREAD", "COUNT", self.count, "BLOCK", self.block_ms,
                                    "STREAMS", self.news, pos)
            got = await conn.read_response()
            self._tries = 0
            by_run: dict[bytes, list[Item]] = {}
            for _, entries in got or ():
                for eid, fields in entries:
                    pos = eid
                    self._gather(fields or (), by_run)
            full = []
            for run, mine in by_run.items():  # one write per run and read, not per entry
                for f in self._followers.get(run, ()):
                    f.put(mine)
                    if f.expected and len(f.items) > EXPECT_MAX:
                        full.append(run.decode())
            for run_id in full:  # its client, if it comes, reads the run's stream
                self.forget(run_id)
            if time.monotonic() - swept >= self.resync_s / 2:
                swept = self._sweep()
            if got and self.gather_s > 0:
                await asyncio.sleep(self.gather_s)

    def _resync(self) -> None:
        """After the news was lost for a while: each follower reads its run's stream again;
        a run queued here whose client has not come yet keeps nothing (its client will read
        the stream)."""
        for run_id in list(self._expected):
            self.forget(run_id)
        for fs in self._followers.values():
            for f in fs:
                f.put(None)

    def _fail_all(self, exc: BaseException, ready: asyncio.Future[None]) -> None:
        if not ready.done():
            ready.set_exception(exc)
            ready.exception()  # retrieved: those waiting get it through their shield
        for fs in self._followers.values():
            for f in fs:
                f.fail(exc)
        self._followers.clear()
        self._expected.clear()

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.disconnect(nowait=True)

    def _sweep(self) -> float:
        """Followers that heard nothing for ``resync_s`` read their streams again (one
        pass here instead of a timer per follower and wait); what :meth:`expect` kept for
        ``expect_s`` without its follower coming is dropped."""
        now = time.monotonic()
        for fs in self._followers.values():
            for f in fs:
                if not f.expected and not f.items and now - f.heard >= self.resync_s:
                    f.put(None)
        for run_id in [r for r, f in self._expected.items() if now - f.since > self.expect_s]:
            self.forget(run_id)
        return now

    def _gather(self, fields: Sequence[bytes], by_run: dict[bytes, list[Item]]) -> None:
        """A news entry's events (its fields as Redis sends them: name, value, ...), added to
        those of the runs followed here."""
        it = iter(fields)
        for name, value in zip(it, it, strict=True):
            run, _, seq = name.rpartition(b" ")
            if run in self._followers:
                by_run.setdefault(run, []).append((int(seq), value))

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._close()
