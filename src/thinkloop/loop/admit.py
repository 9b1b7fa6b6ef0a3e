"""Admission: start many runs without stalling the event loop.

Starting a run builds its prompt and schedules its task; the task takes its first step (hooks,
history, the model request) in the next loop iteration. Starting thousands in one go runs all
those first steps back to back, and every other coroutine in the process (a server's requests,
timers, streams) waits seconds for its turn. ``admit`` starts them in slices instead: after
each slice it yields so the slice's runs take their first step, and it sizes the next slice
so that a slice and its first steps together take about ``slice_ms``.

Slicing alone is not enough on CPython: each full collection of the cyclic garbage collector
walks every object alive, and 10,000 waiting runs hold about 570,000 tracked objects (a
200 ms pass on 2 cores; 100,000 runs, seconds). Admission creates exactly the kind of
long-lived objects that trigger full passes (a pass whenever they have grown by a quarter),
so it would stall the loop about eight times while 10k runs start. :class:`FreezeHold` keeps
admitted runs out of full passes (``gc.freeze()`` after each slice) until every admitted run
is done; then ``gc.unfreeze()`` hands whatever is left back to the collector, so nothing that
died in a reference cycle while frozen stays unreclaimed.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from typing import ClassVar, Protocol, TypeVar


class Ends(Protocol):
    """What admission needs of a started run: to hear when it is done."""

    def on_done(self, callback: Callable[[], None]) -> None: ...


T = TypeVar("T")
H = TypeVar("H", bound=Ends)


class FreezeHold:
    """Keeps the objects alive at each :meth:`freeze` out of full collections until
    :meth:`release`.

    ``gc.freeze()`` moves every tracked object to the permanent generation (O(1)), which
    collections skip; objects there are still freed by reference counting the moment they
    are no longer used (a finished run's objects, measured: all of them), but one that dies
    in a reference cycle waits for ``gc.unfreeze()``. What a hold can keep is therefore at
    most what existed at its last freeze (cyclic garbage not yet collected then included),
    and only until it is released. The permanent
    generation is process-wide and ``gc.unfreeze()`` thaws all of it (the start-up objects
    :func:`thinkloop.tuning.tune_gc` froze too: a cost in speed, never in memory), so the
    holds are counted process-wide too: the last one released unfreezes.

    With the collector disabled (``gc.disable()``) there are no full passes to avoid, and a
    hold does nothing.
    """

    _held: ClassVar[int] = 0  # holds not yet released, in this process

    def __init__(self) -> None:
        self._holding = False

    def freeze(self) -> None:
        if not self._holding:
            if not gc.isenabled():
                return
            self._holding = True
            FreezeHold._held += 1
        gc.freeze()

    def release(self) -> None:
        """Give the hold up (idempotent); the last one unfreezes."""
        if not self._holding:
            return
        self._holding = False
        FreezeHold._held -= 1
        if FreezeHold._held == 0:
            gc.unfreeze()

    def release_when_done(self, started: Sequence[Ends]) -> None:
        """:meth:`release` once every run in ``started`` is done."""
        left = len(started)

        def one_done() -> None:
            nonlocal left
            left -= 1
            if left == 0:
                self.release()

        if not left:
            self.release()
        for run in started:
            run.on_done(one_done)


async def admit(start: Callable[[T], H], items: Iterable[T], *, slice_ms: float = 8.0,
                first_slice: int = 16, freeze: bool = True) -> list[H]:
    """``start(item)`` for every item, yielding to the loop between slices; the results in
    order. Slices double while they take under half of ``slice_ms`` and halve above it.
    ``freeze``: keep the admitted runs out of full collections until they are all done
    (:class:`FreezeHold`)."""
    started: list[H] = []
    hold = FreezeHold()
    size = max(1, first_slice)
    pending = iter(items)
    try:
        while chunk := list(itertools.islice(pending, size)):
            began = time.perf_counter()
            started.extend(start(item) for item in chunk)
            await asyncio.sleep(0)  # the slice's runs take their first step before the next
            if freeze:
                hold.freeze()
            took_ms = (time.perf_counter() - began) * 1000
            if took_ms > slice_ms:
                size = max(1, size // 2)
            elif took_ms < slice_ms / 2:
                size *= 2
    finally:
        hold.release_when_done(started)  # also when start() raised or admission was cancelled
    return started
