"""Waking whoever waits for the next change, without an ``asyncio.Event`` per wait.

A run's handle and the gateway's live run are each waited on by a few (a subscriber, a caller
of ``result()``) and there may be 100k of them: an ``asyncio.Event`` carries a 600-byte deque
from the start, and one made anew per change (the gateway's per event) costs that each time.
Here the waiters are a list of futures made only when someone waits, woken and dropped at once.
"""

from __future__ import annotations

import asyncio


class Wakeups:
    """``await self._woken()`` returns at the next ``self._wake()``. The subclass sets
    ``_waiters`` to ``None`` when it is made (a list only once someone waits)."""

    __slots__ = ("_waiters",)
    _waiters: list[asyncio.Future[None]] | None

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(None)

    async def _woken(self) -> None:
        """Until the next :meth:`_wake` (the caller checked there was nothing to wait for:
        nothing awaits between that look and this)."""
        waiter = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        try:
            await waiter
        finally:
            if self._waiters is not None and waiter in self._waiters:
                self._waiters.remove(waiter)  # cancelled: not kept until the next wake
