"""One gateway's reader of the run event streams its clients follow: a single ``XREAD`` over
all of them, fanned out to each follower, where one blocking ``XREAD`` per follower held a
Redis connection and a round trip per batch of events each."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

Entry = tuple[bytes, dict[bytes, bytes]]


def seq_of(entry_id: bytes) -> int:
    return int(entry_id.split(b"-")[1])


@dataclass(eq=False)
class _Follower:
    last: int  # the last event number it has
    queue: asyncio.Queue[list[Entry] | BaseException] = field(default_factory=asyncio.Queue)


class Tail:
    """Followers of streams in one Redis (``redis`` is shared: the caller closes it). A new
    follower joins the next read, at most ``block_ms`` later.

    After a read that brought entries the next one waits ``gap_s``: with many runs writing,
    each read came back with a few events of a few runs, and its command (every followed
    stream's key and position) cost more than the events; events that arrive in the gap come
    together in the next read."""

    def __init__(self, redis: Any, block_ms: int = 50, count: int = 500,
                 gap_s: float = 0.01) -> None:
        self.redis = redis
        self.block_ms, self.count, self.gap_s = block_ms, count, gap_s
        self._followers: dict[str, set[_Follower]] = {}
        self._task: asyncio.Task[None] | None = None

    async def follow(self, key: str, after: int) -> AsyncGenerator[list[Entry]]:
        """The entries of stream ``key`` numbered above ``after``, as they come, a list per
        read (the caller stops reading when it has what it wants)."""
        me = _Follower(max(0, after))
        self._followers.setdefault(key, set()).add(me)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._read())
        try:
            while True:
                got = await me.queue.get()
                if isinstance(got, BaseException):
                    raise got
                yield got
        finally:
            mine = self._followers.get(key)
            if mine is not None:
                mine.discard(me)
                if not mine:
                    del self._followers[key]

    async def _read(self) -> None:
        while self._followers:
            streams = {k: f"0-{min(f.last for f in fs)}" for k, fs in self._followers.items()}
            try:
                got = await self.redis.xread(streams, count=self.count, block=self.block_ms)
            except Exception as exc:  # every follower sees it (as its own XREAD raised)
                for fs in self._followers.values():
                    for f in fs:
                        f.queue.put_nowait(exc)
                self._followers.clear()
                return
            for key, entries in got or ():
                for f in self._followers.get(key.decode(), ()):
                    mine = [e for e in entries if seq_of(e[0]) > f.last]
                    if mine:
                        f.last = seq_of(mine[-1][0])
                        f.queue.put_nowait(mine)
            if got and self.gap_s > 0:
                await asyncio.sleep(self.gap_s)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
