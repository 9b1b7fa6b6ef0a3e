"""``Agent.hand_back``: a run stopped here for another process to resume is stopped only once
its tool calls in flight have finished and their results are durably checkpointed, so that
the resume runs no finished call again (SQLite queues those rows; PostgreSQL writes them)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from thinkloop import Agent, ModelSettings, tool
from thinkloop.models.scripted import call, reply
from thinkloop.store import open_store
from thinkloop.types import Message, ModelResponse, TextDelta, ToolSpec


class _Once:
    """Asks for ``record`` once, then answers."""

    name = "scripted:once"

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec],
                       settings: ModelSettings) -> ModelResponse:
        if any(m.role == "tool" for m in messages):
            return reply("recorded")
        return reply("", call("record", item="a"))

    async def stream(self, messages: Sequence[Message], tools: Sequence[ToolSpec],
                     settings: ModelSettings) -> AsyncIterator[TextDelta | ModelResponse]:
        yield await self.complete(messages, tools, settings)


async def test_a_hand_back_waits_for_the_call_in_flight_and_the_resume_runs_it_not_again(
        store_url: str) -> None:
    done: list[str] = []
    started, release = asyncio.Event(), asyncio.Event()

    @tool
    async def record(item: str) -> str:
        """Record an item (a side effect)."""
        done.append(item)
        started.set()
        await release.wait()
        return "recorded " + item

    here, there = open_store(store_url), open_store(store_url)
    try:
        leaving = Agent(_Once(), tools=[record], store=here, guard=False)
        handle = leaving.start("record a", session="s", events=False)
        await asyncio.wait_for(started.wait(), 10)
        stopped = leaving.hand_back(handle.run_id)
        assert stopped is not None
        await asyncio.sleep(0.05)  # the call is still running: the run is not stopped yet
        assert not stopped.done() and not handle.done
        release.set()
        assert await asyncio.wait_for(stopped, 10) is True
        await asyncio.gather(handle.wait_background(), return_exceptions=True)
        rec = await here.get_run(handle.run_id)
        assert rec is not None and rec.status == "running"  # not recorded as ended
        taker = Agent(_Once(), tools=[record], store=there, guard=False)
        result = await asyncio.wait_for(taker.resume_run(handle.run_id), 30)
        assert result.status == "completed", result.error
        assert done == ["a"]  # its result was checkpointed: not run again
        assert leaving.hand_back(handle.run_id) is None  # not running here any more
    finally:
        await here.aclose()
        await there.aclose()
