"""One writer per store: the writes runs make on their path, committed together.

Every step of a recorded run writes a few rows (its checkpoint, the events and spans it
logged, each tool's result) and waits for them to be committed before it goes on. With a
transaction and a trip to the database thread per write, 200 concurrent runs paid 200 trips
a step, and the thread hand-offs were most of what records cost (issue 38's profile).

Here a write is queued instead, and one writer task per store takes every write queued so
far (all the runs') and commits them in one transaction, then resolves each write's future:
a group commit. A run still waits for the commit that holds its rows, so what it was told is
written is written; what it saves is the trips: one per loop turn for all runs at once.

A write queued without waiting (``write_later``: a step's checkpoint rows around its tool
calls) has no future of its own: all those of one group share one, so a row costs a list
append, not a future, a done-callback and a callback's turn of the loop (issue 38's profile).

A write that fails in a group is tried again on its own, so one bad write fails only its
caller (a queued one is logged). A caller cancelled while its write is still queued takes it
back (wholly out); one cancelled while its write is being committed waits for that commit to
settle and then takes the cancel (wholly in or wholly out, as the stores' other writes), so
no cancel breaks the writer or drops another run's rows.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from thinkloop.store.base import StoreError

W = TypeVar("W")
log = logging.getLogger("thinkloop.store")


@dataclass(slots=True, eq=False)  # one write is itself only (found in the queue by identity)
class _Write(Generic[W]):
    item: W
    done: asyncio.Future[None] | None  # None: queued, its group's future says (write_later)


class GroupCommit(Generic[W]):
    """Queued writes of one store, committed by one writer task (see the module docstring).

    ``commit(items)`` writes the items in order in one transaction, or raises having written
    none of them."""

    def __init__(self, commit: Callable[[Sequence[W]], Awaitable[None]]) -> None:
        self._commit = commit
        # A write waited for is a _Write (its future, found by identity); one queued by
        # write_later is its item alone (an object fewer for each, issue 38).
        self._queue: list[_Write[W] | W] = []
        self._later: asyncio.Future[None] | None = None  # the queued group's, for write_later
        # The group being committed, and (made only when a cancelled caller waits for it)
        # the future that says it is settled.
        self._committing: list[_Write[W] | W] = []
        self._settled: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _submit(self, write: _Write[W] | W) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a store used from a new event loop: a new writer
            self._loop, self._queue, self._later, self._task = loop, [], None, None
        self._queue.append(write)
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._drain())
        return loop

    async def write(self, item: W) -> None:
        """``item`` written, once the commit that holds it is done."""
        done = asyncio.get_running_loop().create_future()
        write = _Write(item, done)
        self._submit(write)
        try:
            await done  # not shielded (a future and two callbacks more a write): see below
        except asyncio.CancelledError:
            # A cancel cancels ``done`` too: where the write is says what to do.
            if write in self._queue:  # not taken yet: wholly out
                self._queue.remove(write)
            elif write in self._committing:  # by identity too; wait for its commit to settle
                if self._settled is None:
                    self._settled = asyncio.get_running_loop().create_future()
                await _settle(self._settled)
            raise

    def write_later(self, item: W) -> asyncio.Future[None]:
        """``item`` queued; the future (its group's) says when the group that holds it is
        settled: committed, or failed, which is logged. Writes are committed in the order
        they were queued, so a later :meth:`write` of the same store that returns means this
        one was committed too (or failed)."""
        loop = self._submit(item)
        if self._later is None:
            self._later = loop.create_future()
        return self._later

    async def drained(self) -> None:
        """Every write queued so far committed (before the store closes)."""
        task = self._task
        if task is not None and self._loop is asyncio.get_running_loop() and not task.done():
            await asyncio.shield(task)

    async def _drain(self) -> None:
        cancelled = False
        while self._queue:
            batch, self._queue = self._queue, []
            later, self._later = self._later, None
            lost: StoreError | None = None
            self._committing = batch
            try:
                await self._commit_batch(batch)
            except asyncio.CancelledError:
                # The event loop is shutting down: this group's outcome is unknown (it may
                # be committed), so it is not written again; the rest still is.
                cancelled = True
                lost = StoreError("the store's writer was cancelled while committing")
                for w in batch:
                    _resolve(w, lost)
            finally:
                self._committing = []
                settled, self._settled = self._settled, None
                if settled is not None and not settled.done():
                    settled.set_result(None)
            if later is not None and not later.done():
                if lost is None:
                    later.set_result(None)
                else:
                    later.set_exception(lost)
        if cancelled:
            raise asyncio.CancelledError

    async def _commit_batch(self, batch: list[_Write[W] | W]) -> None:
        try:
            await self._commit([_item(w) for w in batch])
        except Exception as exc:
            if len(batch) == 1:
                _resolve(batch[0], exc)
                return
            for w in batch:  # one at a time: only the bad one fails
                try:
                    await self._commit([_item(w)])
                except Exception as one:
                    _resolve(w, one)
                else:
                    _resolve(w, None)
            return
        for w in batch:
            _resolve(w, None)


def _item(write: _Write[W] | W) -> W:
    return write.item if isinstance(write, _Write) else write


def _resolve(write: _Write[W] | W, exc: BaseException | None) -> None:
    done = write.done if isinstance(write, _Write) else None
    if done is None:  # queued by write_later: nobody waits for this one alone
        if exc is not None:
            log.error("a queued store write failed", exc_info=exc)
        return
    if done.done():
        return
    if exc is None:
        done.set_result(None)
    else:
        done.set_exception(exc)


async def _settle(done: asyncio.Future[None]) -> None:
    """Wait for ``done`` through any further cancels; its outcome is dropped for the cancel
    the caller raises next."""
    while not done.done():
        try:
            await asyncio.wait((done,))
        except asyncio.CancelledError:
            continue
    if not done.cancelled():
        done.exception()  # seen
