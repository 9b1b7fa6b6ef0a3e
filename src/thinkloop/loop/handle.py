"""RunHandle: a run in progress. Iterate it for events, await it for the RunResult.

The run executes in its own task and publishes events to a queue; ``agent.run`` is just
"consume the stream, then take the result", so there is one loop for both uses.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any, Literal

from thinkloop.core.events import Event, RunCancelled, usage_payload
from thinkloop.hooks import RunConfig, RunState
from thinkloop.loop.result import RunResult
from thinkloop.loop.run import execute
from thinkloop.wakeups import Wakeups

log = logging.getLogger("thinkloop")

Subscriber = Callable[[Event], Any]
# Wraps the run: loads the session before it, persists the turn after it (session.py).
Scope = Callable[[RunConfig, RunState], AbstractAsyncContextManager[None]]
# Runs after the result is out: the post-turn jobs (session.py).
After = Callable[[RunConfig, RunState], Awaitable[None]]


class _EventChannel:
    """A single-consumer queue: a deque plus one waiter, cheaper than asyncio.Queue per event.
    The deque (600 bytes) is made with the first event: most runs never queue one."""

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: deque[Event | None] | None = None
        self._waiter: asyncio.Future[None] | None = None

    def put(self, item: Event | None) -> None:
        if self._items is None:
            self._items = deque()
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self) -> Event | None:
        while not self._items:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._items.popleft()

    def clear(self) -> None:
        self._items = None


class _Latch(Wakeups):
    """Set once, awaited by a few: an ``asyncio.Event`` without its deque of waiters (600
    bytes) until someone waits. Every run has one, and 100k runs may wait at once."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False
        self._waiters = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        self._wake()

    async def wait(self) -> None:
        if not self._set:
            await self._woken()


class RunHandle:
    def __init__(
        self,
        cfg: RunConfig,
        state: RunState,
        subscribers: Sequence[Subscriber] = (),
        scope: Scope | None = None,
        *,
        buffer_events: bool = True,
        after: After | None = None,
    ) -> None:
        self.cfg = cfg
        self.state = state
        self.run_id = state.run_id
        self._subscribers = tuple(subscribers)
        self._scope = scope
        self._after = after
        self._queue = _EventChannel()
        self._consumed = False
        self._finished = _Latch()
        # Events are queued for whoever iterates the handle; a run nobody iterates and
        # nobody subscribes to builds none at all (the hot path of agent.run()).
        self._buffer = buffer_events
        state.emit_to = self._publish if buffer_events or self._subscribers else None
        self._task = asyncio.get_running_loop().create_task(self._main())
        self._done_callbacks: list[Callable[[], None]] = []
        self._task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        # A task cancelled before its first step never enters _main: end it here instead of
        # leaving its waiters hanging (an abort can land that early).
        if self.state.status is None and task.cancelled():
            self._cancelled_early()
        self._finish()
        # The run and its post-turn jobs are over: nothing emits now. The state's way to this
        # handle (and through it to the subscribers, which hold the state) is a reference
        # cycle; left in place, every recorded run's state, history and trace (about 180
        # objects) outlived it until a full collection found them (issue 38).
        if self.state.emit_to == self._publish:  # not a later handle's, were the state reused
            self.state.emit_to = None

    def _cancelled_early(self) -> None:
        self.state.status = "cancelled"
        self.state.emit(RunCancelled, usage=usage_payload(self.state.usage))

    def _finish(self) -> None:
        if self._finished.is_set():
            return
        self._finished.set()
        self._queue.put(None)
        for callback in self._done_callbacks:
            try:
                callback()
            except Exception:
                log.exception("run %s: a done callback failed", self.run_id)
        self._done_callbacks.clear()

    def on_done(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the result is out (at once if it is already)."""
        if self._finished.is_set():
            callback()
        else:
            self._done_callbacks.append(callback)

    @property
    def session_id(self) -> str | None:
        return self.cfg.session_id

    @property
    def user_id(self) -> str | None:
        return self.cfg.user_id

    @property
    def status(self) -> str:
        """``running`` until the run ends, then its :data:`~thinkloop.types.RunStatus`."""
        return self.state.status or "running"

    def _publish(self, event: Event) -> None:
        for sub in self._subscribers:
            try:
                sub(event)
            except Exception:
                # A broken subscriber must not break the run it observes.
                log.exception("event subscriber failed on %s", event.type)
        if self._buffer:
            self._queue.put(event)

    async def _main(self) -> None:
        try:
            scope = self._scope(self.cfg, self.state) if self._scope else nullcontext()
            async with scope:
                await execute(self.cfg, self.state)
        except asyncio.CancelledError:
            # Aborted outside the loop (queued behind its session, resuming a paused run):
            # it still ends with a result, ``cancelled``, and its terminal event.
            if self.state.status is None:
                self._cancelled_early()
            raise
        finally:
            if self.state.children is not None:  # sub-agents end with their parent
                self.state.children.cancel()
            self._finish()
        if self._after is not None:  # after the answer is out: it never delays the result
            await self._after(self.cfg, self.state)

    def cancel(self, mode: Literal["immediate", "after_step"] = "immediate") -> None:
        """Stop the run now, or once the current step has finished."""
        if mode == "after_step":
            self.state.cancel_after_step = True
        else:
            self._task.cancel()

    @property
    def done(self) -> bool:
        return self._finished.is_set()

    async def wait_background(self) -> None:
        """Wait for post_output jobs too (the result itself never waits for them)."""
        await asyncio.shield(self._task)

    @property
    def background(self) -> asyncio.Task[None]:
        """The task running the run and then its post-turn jobs."""
        return self._task

    async def events(self) -> AsyncIterator[Event]:
        if self._consumed:
            raise RuntimeError("a run's events can be consumed once")
        self._consumed = True
        try:
            while (event := await self._queue.get()) is not None:
                yield event
        finally:
            if not self._finished.is_set():
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self.events()

    async def result(self) -> RunResult:
        if not self._consumed:
            # Nobody iterates the events: wait for the end once instead of waking per event
            # (subscribers still see every event as it happens).
            self._consumed = True
            try:
                await self._finished.wait()
            finally:
                self._queue.clear()
                if not self._finished.is_set():  # our caller was cancelled: so is the run
                    self._task.cancel()
                    await asyncio.gather(self._task, return_exceptions=True)
        await self._finished.wait()
        task = self._task
        if task.done():
            if task.cancelled() and self.state.status is None:
                raise asyncio.CancelledError
            if not task.cancelled() and task.exception() is not None:
                # The run never started (e.g. the session store failed): nothing to return.
                raise task.exception()  # type: ignore[misc]
        return self._build_result()

    def __await__(self) -> Generator[Any, None, RunResult]:
        return self.result().__await__()

    def _build_result(self) -> RunResult:
        s = self.state
        assert s.status is not None
        return RunResult(
            run_id=s.run_id,
            status=s.status,
            output=s.output,
            text=s.text,
            steps=tuple(s.steps),
            usage=s.usage,
            messages=tuple(s.new_messages),
            model=self.cfg.model.name,
            session_id=self.cfg.session_id,
            error=s.error_text,
            silent=s.silent,
            pending=tuple(s.pending) if s.status == "paused" else (),
        )
