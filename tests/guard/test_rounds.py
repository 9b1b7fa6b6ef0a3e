"""The quartermaster (guard/rounds.py) against a durable store: what it learns from its own
runs it keeps, instead of reading the store again before the next request."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.acceptance.test_tool_rounds import fetch, lookup

from thinkloop import Agent
from thinkloop.models.scripted import ScriptedModel, call, reply
from thinkloop.store import open_store
from thinkloop.store.sqlmanaged import ToolFollows
from thinkloop.types import Message, ModelResponse, ToolSpec


def hints(model: ScriptedModel) -> list[str]:
    return [m.content for c in model.calls for m in c.messages
            if m.content.startswith("[Quartermaster]")]


async def test_own_runs_count_at_once_without_reading_the_store_again(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "runs.db"))
    assert isinstance(store, ToolFollows)
    reads: list[str] = []
    read = store.tool_follows

    async def counted(agent: str, prev: str) -> dict[str, int]:
        reads.append(prev)
        return await read(agent, prev)

    store.tool_follows = counted  # type: ignore[method-assign]
    script: list[Any] = []
    for i in range(4):
        script += [reply("", call("lookup", key=f"a{i}")), reply("", call("fetch", key=f"a{i}")),
                   f"done {i}"]
    model = ScriptedModel(script)
    agent = Agent(model, tools=[lookup, fetch], max_steps=10, store=store, name="clerk",
                  plugins=False)
    try:
        for i in range(4):
            handle = agent.start(f"Find record a{i}.")
            assert (await handle.result()).text == f"done {i}"
            await handle.wait_background()  # the quartermaster learns after the run
    finally:
        await agent.aclose()
        await store.aclose()
    # The fourth run is hinted from the three before it, as soon as they ended...
    assert hints(model) == [
        "[Quartermaster] After lookup, runs of this agent called fetch next in 100% of 3 runs. "
        "Consider fetch if it fits this task."]
    # ...but the store was read once per tool, not again after each run that learned.
    assert sorted(reads) == ["fetch", "lookup"]


async def test_runs_at_once_share_one_read_of_the_store(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "runs.db"))
    assert isinstance(store, ToolFollows)
    await store.add_tool_follows("clerk", [("lookup", "fetch")])
    reads: list[str] = []
    read = store.tool_follows

    async def counted(agent: str, prev: str) -> dict[str, int]:
        reads.append(prev)
        await asyncio.sleep(0.01)  # a trip to the database takes a while
        return await read(agent, prev)

    store.tool_follows = counted  # type: ignore[method-assign]

    def step(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        if any(m.role == "tool" for m in messages):
            return reply("found")
        return reply("", call("lookup", key="k"))

    model = ScriptedModel([step] * 20)
    agent = Agent(model, tools=[lookup, fetch], max_steps=10, store=store, name="clerk",
                  plugins=False)
    try:
        results = await asyncio.gather(*(agent.run(f"Find record {i}.") for i in range(10)))
    finally:
        await agent.aclose()
        await store.aclose()
    assert [r.text for r in results] == ["found"] * 10
    # Ten runs asked before the first read came back: one read answered them all.
    assert reads == ["lookup"]


async def test_a_follow_up_is_one_message_for_every_request_that_carries_it() -> None:
    def step(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        done = sum(m.role == "tool" for m in messages)
        return reply("found") if done >= 4 else reply("", call("lookup", key=f"k{done}"))

    model = ScriptedModel([step] * 10)
    agent = Agent(model, tools=[lookup], max_steps=10, store="memory", plugins=False)
    for i in range(2):
        assert (await agent.run(f"Find record {i}.")).text == "found"
    notices = [[m for m in c.messages if m.content.startswith("[Round")] for c in model.calls]
    first, second = notices[:5], notices[5:]
    assert [[m.content[:9] for m in n] for n in first] == [[], [], [], ["[Round 3]"],
                                                           ["[Round 4]"]]
    # The second run's requests carry the very messages the first run's did, so what is
    # worked out per message (its wire encoding, its token count) is worked out once.
    assert all(a is b for x, y in zip(first, second, strict=True)
               for a, b in zip(x, y, strict=True))
    assert [len(n) for n in second] == [0, 0, 0, 1, 1]
