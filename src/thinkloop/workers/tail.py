"""One gateway's reader of the run events its clients follow: the fleet's news (one stream
that every worker writes each run's new events to, beside the run's own stream), read with
one blocking ``XREAD`` and fanned out to each follower.

It read every followed run's stream in one ``XREAD``; that command named each stream and its
position, so with 200 runs followed it cost more than the few events each read brought. The
news names only the runs that have new events, and carries them.

The runs' own streams stay the record: a follower first reads its run's stream from where it
is (``Last-Event-ID``), then takes the news; an event number it would skip (the news trimmed,
or read late) or a run silent for ``resync_s`` makes it read its stream again, so that no
event is missed or given twice, in the same numbers as every other gateway's."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

Entry = tuple[bytes, dict[bytes, bytes]]
END_MARK = b"end:"  # a news value that is a run's end (an event's is its JSON object)


def seq_of(entry_id: bytes) -> int:
    return int(entry_id.split(b"-")[1])


def news_entry(seq: int, value: bytes) -> Entry:
    """A news field's value as the run's own stream holds it."""
    if value.startswith(END_MARK):
        return b"0-%d" % seq, {b"end": value[len(END_MARK):]}
    return b"0-%d" % seq, {b"e": value}


@dataclass(eq=False)
class _Follower:
    last: int  # the last event number it has
    queue: asyncio.Queue[list[Entry] | BaseException] = field(default_factory=asyncio.Queue)


class Tail:
    """Followers of run streams (keys ``{ev_prefix}{run id}``) through the news stream
    ``news`` in one Redis (``redis`` is shared: the caller closes it)."""

    def __init__(self, redis: Any, news: str, ev_prefix: str, block_ms: int = 1000,
                 count: int = 200, resync_s: float = 2.0, gather_s: float = 0.01) -> None:
        self.redis, self.news, self.ev_prefix = redis, news, ev_prefix
        self.block_ms, self.count, self.resync_s = block_ms, count, resync_s
        # After a read that brought news, the next waits this long: the workers' writes of
        # that time come in one read, and a run's events in one SSE write (a read per worker
        # write was a round trip and a write to each of its runs' clients every 5 ms).
        self.gather_s = gather_s
        self._followers: dict[bytes, set[_Follower]] = {}  # run id -> its followers
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None  # the news read from a known place

    async def follow(self, key: str, after: int) -> AsyncGenerator[list[Entry]]:
        """The entries of stream ``key`` numbered above ``after``, as they come, a list per
        read (the caller stops reading when it has what it wants)."""
        run = key.removeprefix(self.ev_prefix).encode()
        me = _Follower(max(0, after))
        self._followers.setdefault(run, set()).add(me)
        if self._task is None or self._task.done():
            self._ready = asyncio.get_running_loop().create_future()
            self._task = asyncio.get_running_loop().create_task(self._read(self._ready))
        try:
            # Whatever the news brings from now on reaches ``me``; what came before is in
            # the stream, read after the news' place was taken.
            if self._ready is not None:
                await asyncio.shield(self._ready)
            while True:
                caught = await self._catch_up(key, me)
                if caught:
                    yield caught
                got = await self._next(me)
                while got:
                    if isinstance(got, BaseException):
                        raise got
                    mine = [e for e in got if seq_of(e[0]) > me.last]
                    if mine and seq_of(mine[-1][0]) != me.last + len(mine):
                        break  # a gap (numbers only rise): read the stream again
                    if mine:
                        me.last = seq_of(mine[-1][0])
                        yield mine
                    got = await self._next(me)
        finally:
            mine_ = self._followers.get(run)
            if mine_ is not None:
                mine_.discard(me)
                if not mine_:
                    del self._followers[run]

    async def _next(self, me: _Follower) -> list[Entry] | BaseException | None:
        """The follower's next news, all of it that is there (one write for what piled up
        while it wrote the last), or None after ``resync_s`` of silence."""
        if me.queue.empty():
            try:
                async with asyncio.timeout(self.resync_s):
                    got = await me.queue.get()
            except TimeoutError:
                return None
        else:
            got = me.queue.get_nowait()
        while isinstance(got, list) and not me.queue.empty():
            more = me.queue.get_nowait()
            if isinstance(more, BaseException):  # the last thing ever put: given next
                me.queue.put_nowait(more)
                break
            got = got + more
        return got

    async def _catch_up(self, key: str, me: _Follower) -> list[Entry]:
        entries = await self.redis.xrange(key, min=f"0-{me.last + 1}")
        if entries:
            me.last = seq_of(entries[-1][0])
        return list(entries)

    async def _read(self, ready: asyncio.Future[None]) -> None:
        try:
            last = await self.redis.xrevrange(self.news, count=1)
            pos = last[0][0] if last else b"0-0"
            ready.set_result(None)
            while self._followers:
                got = await self.redis.xread({self.news: pos}, count=self.count,
                                             block=self.block_ms)
                by_run: dict[bytes, list[Entry]] = {}
                for _, entries in got or ():
                    for eid, fields in entries:
                        pos = eid
                        self._gather(fields, by_run)
                for run, mine in by_run.items():  # one write per run and read, not per entry
                    for f in self._followers.get(run, ()):
                        f.queue.put_nowait(mine)
                if got and self.gather_s > 0:
                    await asyncio.sleep(self.gather_s)
        except Exception as exc:  # every follower sees it (as its own XREAD raised)
            if not ready.done():
                ready.set_exception(exc)
                ready.exception()  # retrieved: those waiting get it through their shield
            for fs in self._followers.values():
                for f in fs:
                    f.queue.put_nowait(exc)
            self._followers.clear()

    def _gather(self, fields: dict[bytes, bytes], by_run: dict[bytes, list[Entry]]) -> None:
        """A news entry's events, added to those of the runs followed here."""
        for name, value in fields.items():
            run, _, seq = name.rpartition(b" ")
            if run in self._followers:
                by_run.setdefault(run, []).append(news_entry(int(seq), value))

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
