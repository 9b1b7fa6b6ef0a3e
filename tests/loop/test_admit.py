"""Admission: many runs start in slices that let the event loop run between them (issue 19)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence

from thinkloop import Agent, ScriptedModel
from thinkloop.loop.admit import admit
from thinkloop.types import Message, ToolSpec


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

    def start(i: int) -> int:
        started.append(i)
        return i * 10

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0)  # the ticker is running before the first slice
    out = await admit(start, range(n), slice_ms=slice_ms, first_slice=first)
    stop = True
    await tick
    return out, sorted(set(seen))


async def test_fast_slices_double() -> None:
    out, seen = await starts_seen_between_slices(math.inf, 14, 2)
    assert out == [i * 10 for i in range(14)]
    # Slices of 2, 4 and 8: the loop ran other tasks after each one.
    assert seen == [0, 2, 6, 14]


async def test_slow_slices_halve_down_to_one() -> None:
    out, seen = await starts_seen_between_slices(-1.0, 8, 4)
    assert out == [i * 10 for i in range(8)]
    assert seen == [0, 4, 6, 7, 8]  # slices of 4, 2, 1, 1


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
