"""Admission: start many runs without stalling the event loop.

Starting a run builds its prompt and schedules its task; the task takes its first step (hooks,
history, the model request) in the next loop iteration. Starting thousands in one go runs all
those first steps back to back, and every other coroutine in the process (a server's requests,
timers, streams) waits seconds for its turn. ``admit`` starts them in slices instead: after
each slice it yields so the slice's runs take their first step, and it sizes the next slice
so that a slice and its first steps together take about ``slice_ms``.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")
H = TypeVar("H")


async def admit(start: Callable[[T], H], items: Iterable[T], *, slice_ms: float = 20.0,
                first_slice: int = 16) -> list[H]:
    """``start(item)`` for every item, yielding to the loop between slices; the results in
    order. Slices double while they take under half of ``slice_ms`` and halve above it."""
    started: list[H] = []
    size = max(1, first_slice)
    pending = iter(items)
    while chunk := list(itertools.islice(pending, size)):
        began = time.perf_counter()
        started.extend(start(item) for item in chunk)
        await asyncio.sleep(0)  # the slice's runs take their first step before the next slice
        took_ms = (time.perf_counter() - began) * 1000
        if took_ms > slice_ms:
            size = max(1, size // 2)
        elif took_ms < slice_ms / 2:
            size *= 2
    return started
