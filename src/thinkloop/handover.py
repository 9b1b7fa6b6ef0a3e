"""Handing a run over: stopping it in this process, without recording its end, at a point
from which another process resumes it (from its checkpoints) without running a finished tool
call again.

A run waiting (for its model, an approval, its session) stops at once. A run inside tool
calls is stopped once the calls in flight have finished and their results are checkpointed
(durably: a store that queues its rows commits them first); meanwhile it begins no new call.
Cancelling it inside a call instead lost the call's result (a thread goes on regardless), so
the next process ran the call again (issue 31).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass


async def _parked() -> None:
    """A run being handed over begins no tool call: it waits here for its stop."""
    await asyncio.get_running_loop().create_future()


@dataclass(slots=True, eq=False)
class Handover:
    """One recorded run's tool calls in flight, and a hand-over waiting for them."""

    stop: Callable[[], None]  # stops the run here without recording its end
    calls: int = 0
    idle: int = 0  # of them, waiting for a person (ask_human): nothing to lose by stopping
    asked: asyncio.Future[bool] | None = None
    on_stop: Callable[[], None] | None = None

    def ask(self, on_stop: Callable[[], None] | None) -> asyncio.Future[bool]:
        """The hand-over's future: True once the run is stopped (``on_stop`` runs just
        before), False if it ended on its own first."""
        if self.asked is None:
            self.asked = asyncio.get_running_loop().create_future()
            self.on_stop = on_stop
            if self.calls == self.idle:
                self._now()
        return self.asked

    async def call_begins(self, checkpoint: Callable[[], Awaitable[None]]) -> None:
        """Before a call runs (``checkpoint`` writes its step's calls): from here until its
        result is checkpointed, a hand-over waits for it."""
        if self.asked is not None:
            await _parked()
        await checkpoint()
        if self.asked is not None:
            await _parked()
        self.calls += 1

    async def call_ends(self, checkpoint: Callable[[], Awaitable[None]],
                        durable: Callable[[], Awaitable[None]]) -> None:
        """After a call: its result checkpointed; the run stopped if it was the last call a
        hand-over waited for."""
        try:
            await checkpoint()
            if self.asked is not None and self.calls == 1:
                await durable()
        finally:
            self.calls -= 1
        if self.asked is not None and self.calls == self.idle:
            self._now()

    @contextlib.contextmanager
    def waiting_for_person(self) -> Iterator[None]:
        """A call in flight waits for a person's answer: a hand-over need not wait for it
        (the next process asks again; the question has no other effect)."""
        self.idle += 1
        try:
            if self.asked is not None and self.calls == self.idle:
                self._now()
            yield
        finally:
            self.idle -= 1

    def ended(self) -> None:
        """The run ended (on its own, or stopped)."""
        if self.asked is not None and not self.asked.done():
            self.asked.set_result(False)

    def _now(self) -> None:
        assert self.asked is not None
        if self.asked.done():
            return
        if self.on_stop is not None:
            self.on_stop()
        self.stop()
        self.asked.set_result(True)
