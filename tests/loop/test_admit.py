"""Admission: many runs start in slices that let the event loop run between them (issue 19)."""

from __future__ import annotations

import asyncio
import gc
import math
from collections.abc import Callable, Iterator, Sequence

import pytest

from thinkloop import Agent, ScriptedModel
from thinkloop.loop.admit import FreezeHold, admit
from thinkloop.types import Message, ToolSpec


class Started:
    """A started run as admission sees it: it ends when the test says so."""

    def __init__(self, value: int) -> None:
        self.value = value
        self._callbacks: list[Callable[[], None]] | None = []

    def on_done(self, callback: Callable[[], None]) -> None:
        if self._callbacks is None:
            callback()
        else:
            self._callbacks.append(callback)

    def end(self) -> None:
        callbacks, self._callbacks = self._callbacks or [], None
        for callback in callbacks:
            callback()


@pytest.fixture(autouse=True)
def nothing_frozen() -> Iterator[None]:
    # Every test starts and must end with the permanent generation empty: a hold that is
    # never released would keep cyclic garbage for the rest of the process.
    assert gc.get_freeze_count() == 0
    yield
    assert gc.get_freeze_count() == 0


async def starts_seen_between_slices(
    slice_ms: float, n: int, first: int
) -> tuple[list[int], list[int]]:
    """(what admit returned, how many starts a concurrent task saw each time it ran)."""
    started: list[int] = []
    seen: list[int] = []
    stop = False

    async def ticker() -> None:
        while not stop:
            seen.append(len(started))
            await asyncio.sleep(0)

    def start(i: int) -> Started:
        started.append(i)
        return Started(i * 10)

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0)  # the ticker is running before the first slice
    out = await admit(start, range(n), slice_ms=slice_ms, first_slice=first, freeze=False)
    stop = True
    await tick
    return [s.value for s in out], sorted(set(seen))


async def test_fast_slices_double() -> None:
    out, seen = await starts_seen_between_slices(math.inf, 14, 2)
    assert out == [i * 10 for i in range(14)]
    # Slices of 2, 4 and 8: the loop ran other tasks after each one.
    assert seen == [0, 2, 6, 14]


async def test_slow_slices_halve_down_to_one() -> None:
    out, seen = await starts_seen_between_slices(-1.0, 8, 4)
    assert out == [i * 10 for i in range(8)]
    assert seen == [0, 4, 6, 7, 8]  # slices of 4, 2, 1, 1


async def test_admitted_runs_stay_frozen_until_the_last_one_is_done() -> None:
    runs = await admit(Started, range(40), first_slice=4)
    assert gc.get_freeze_count() > 0  # full collections no longer walk them
    for run in runs[:-1]:
        run.end()
    assert gc.get_freeze_count() > 0
    runs[-1].end()
    assert gc.get_freeze_count() == 0  # what died in a cycle meanwhile is collectable again


async def test_the_last_of_two_admissions_unfreezes() -> None:
    first = await admit(Started, range(3))
    second = await admit(Started, range(3))
    for run in first:
        run.end()
    assert gc.get_freeze_count() > 0  # the second admission still holds
    for run in second:
        run.end()
    assert gc.get_freeze_count() == 0


async def test_runs_started_before_a_failing_start_still_release_the_hold() -> None:
    begun: list[Started] = []

    def start(i: int) -> Started:
        if i == 5:
            raise RuntimeError("no more")
        begun.append(Started(i))
        return begun[-1]

    with pytest.raises(RuntimeError):
        await admit(start, range(10), first_slice=2)
    assert len(begun) == 5 and gc.get_freeze_count() > 0
    for run in begun:
        run.end()
    assert gc.get_freeze_count() == 0


async def test_nothing_is_frozen_when_no_run_was_started_or_the_collector_is_off() -> None:
    assert await admit(Started, []) == []
    assert gc.get_freeze_count() == 0
    gc.disable()
    try:
        runs = await admit(Started, range(3))
        assert gc.get_freeze_count() == 0
    finally:
        gc.enable()
    for run in runs:
        run.end()
    hold = FreezeHold()
    hold.release()  # never held: nothing to give up
    assert gc.get_freeze_count() == 0


def echo_model(n: int) -> ScriptedModel:
    def echo(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        return f"done: {messages[-1].content}"

    return ScriptedModel([echo] * n)


async def test_start_many_starts_a_run_per_task_in_order() -> None:
    tasks = [f"task {i}" for i in range(5)]
    async with Agent(echo_model(5), store="memory", plugins=False) as agent:
        handles = await agent.start_many(tasks, user_id="ada", events=False)
        results = [await h.result() for h in handles]
    assert [h.user_id for h in handles] == ["ada"] * 5
    assert [r.status for r in results] == ["completed"] * 5
    assert [r.text for r in results] == [f"done: task {i}" for i in range(5)]
    assert len({r.run_id for r in results}) == 5
    assert gc.get_freeze_count() == 0  # all done: the admission's hold is released


async def test_a_cancelled_waiter_leaves_the_run_and_the_other_waiter_alone() -> None:
    async with Agent(ScriptedModel(["Hello, Ada."], delay_s=0.05), store="memory",
                     plugins=False) as agent:
        handle = agent.start("hello", events=False)
        consumer = asyncio.create_task(handle.result())
        await asyncio.sleep(0)
        other = asyncio.create_task(handle.result())
        await asyncio.sleep(0)
        other.cancel()
        result = await consumer
    assert other.cancelled()
    assert result.status == "completed" and result.text == "Hello, Ada."
    assert handle.done
