"""Calls made in the same turn of the loop, made as one: a burst of 200 POSTs was 200 of each
of a run's round trips (its slot, its ``queued`` record, its arq job), each with a pool
connection's acquire and release; together they are one of each for the burst."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Together(Generic[T, R]):
    """``await together(item)`` is ``call([item])[0]``, with the items of the calls made
    in the same turn of the loop in one ``call`` (at most ``most`` each), and those made
    while it is out in the next. Each caller gets its own answer, or ``call``'s error; an
    item whose caller has gone (cancelled) before its call is left out."""

    def __init__(self, call: Callable[[list[T]], Awaitable[Sequence[R]]],
                 most: int = 500) -> None:
        self.call = call
        self.most = most
        self._waiting: list[tuple[T, asyncio.Future[R]]] = []
        self._task: asyncio.Task[None] | None = None

    async def __call__(self, item: T) -> R:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[R] = loop.create_future()
        self._waiting.append((item, done))
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run())
        return await done

    async def _run(self) -> None:
        await asyncio.sleep(0)  # the calls made in this turn of the loop go with the first
        while self._waiting:
            batch = [(i, f) for i, f in self._waiting[:self.most] if not f.done()]
            del self._waiting[:self.most]
            if not batch:
                continue
            try:
                got = await self.call([i for i, _ in batch])
            except Exception as exc:
                for _, f in batch:
                    if not f.done():
                        f.set_exception(exc)
                continue
            for (_, f), r in zip(batch, got, strict=True):
                if not f.done():
                    f.set_result(r)
