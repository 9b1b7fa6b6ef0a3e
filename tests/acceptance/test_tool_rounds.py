"""After each round of tool calls (CortexPrism): follow-up instructions that grow firmer by
the round, and the quartermaster's hint naming the tool that usually comes next, with every
default on against the loopback OpenAI server."""

from __future__ import annotations

from typing import Any

from tests.acceptance.conftest import calls, say

from thinkloop import Agent
from thinkloop.store import open_store
from thinkloop.store.sqlmanaged import ToolFollows
from thinkloop.testing.openai_server import OpenAIServer


def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: what to look up
    """
    return f"value of {key}"


def fetch(key: str) -> str:
    """Fetch a record.

    Args:
        key: which record
    """
    return f"record {key}"


def last_user_lines(request: dict[str, Any]) -> list[str]:
    """The engine's words after the last tool result of one request."""
    msgs = request["messages"]
    tail = []
    for m in reversed(msgs):
        if m["role"] != "user":
            break
        tail.append(str(m["content"]))
    return tail[::-1]


async def test_follow_ups_escalate_round_by_round_and_never_enter_history(
        llm: OpenAIServer) -> None:
    llm.enqueue(*[calls(("lookup", {"key": f"k{i}"})) for i in range(6)],
                say("All six keys are looked up."))
    agent = Agent(tools=[lookup], max_steps=10)
    handle = agent.start("Look up k0 to k5 one at a time.")
    events = [e async for e in handle.events()]
    result = await handle.result()
    assert result.text == "All six keys are looked up."
    said = [last_user_lines(r) for r in llm.requests]
    assert said[1] == [] and said[2] == []  # rounds 1 and 2: the results alone
    assert said[3][0].startswith("[Round 3] Check the tool results above")
    assert said[4][0].startswith("[Round 4] Check the tool results above")
    assert said[5][0].startswith("[Round 5] You have called tools in 5 rounds")
    assert said[6][0].startswith("[Round 6] You have called tools in 6 rounds")
    follow = [(e.payload["level"], e.payload["rounds"]) for e in events
              if e.type == "nudge" and e.payload["kind"] == "follow_up"]
    assert follow == [(1, 3), (1, 4), (2, 5), (2, 6)]
    assert not any("[Round" in m.content for m in result.messages)


async def test_the_quartermaster_hints_the_tool_that_usually_comes_next(
        llm: OpenAIServer) -> None:
    agent = Agent(tools=[lookup, fetch], max_steps=10)
    for i in range(3):
        llm.enqueue(calls(("lookup", {"key": f"a{i}"})), calls(("fetch", {"key": f"a{i}"})),
                    say(f"done {i}"))
        handle = agent.start(f"Find record a{i}.")
        await handle.result()
        await handle.wait_background()  # the quartermaster learns after the run
        assert not any("[Quartermaster]" in line for r in llm.requests
                       for line in last_user_lines(r))
    llm.clear()
    llm.enqueue(calls(("lookup", {"key": "b"})), say("found b"))
    handle = agent.start("Find record b.")
    events = [e async for e in handle.events()]
    assert (await handle.result()).text == "found b"
    assert last_user_lines(llm.requests[1]) == [
        "[Quartermaster] After lookup, runs of this agent called fetch next in 100% of 3 runs. "
        "Consider fetch if it fits this task."]
    hints = [e.payload for e in events if e.type == "nudge"
             and e.payload["kind"] == "quartermaster"]
    assert hints == [{"kind": "quartermaster", "after": "lookup", "next": "fetch",
                      "confidence": 1.0}]


async def test_the_quartermaster_remembers_across_a_restart_in_the_store(
        llm: OpenAIServer, durable_url: str) -> None:
    first = Agent(tools=[lookup, fetch], max_steps=10, store=durable_url, name="clerk")
    for i in range(3):
        llm.enqueue(calls(("lookup", {"key": f"a{i}"})), calls(("fetch", {"key": f"a{i}"})),
                    say(f"done {i}"))
        handle = first.start(f"Find record a{i}.")
        await handle.result()
        await handle.wait_background()
    await first.aclose()
    # What it learned is in the store, per agent: another agent learned nothing.
    store = open_store(durable_url)
    try:
        assert isinstance(store, ToolFollows)
        assert await store.tool_follows("clerk", "lookup") == {"fetch": 3}
        assert await store.tool_follows("other", "lookup") == {}
    finally:
        await store.aclose()
    # A new process (a new agent on its own connection) hints from the first one's runs.
    llm.clear()
    again = Agent(tools=[lookup, fetch], max_steps=10, store=durable_url, name="clerk")
    stranger = Agent(tools=[lookup, fetch], max_steps=10, store=durable_url, name="other")
    try:
        llm.enqueue(calls(("lookup", {"key": "b"})), say("found b"))
        assert (await again.run("Find record b.")).text == "found b"
        assert last_user_lines(llm.requests[1]) == [
            "[Quartermaster] After lookup, runs of this agent called fetch next in 100% of 3 "
            "runs. Consider fetch if it fits this task."]
        llm.clear()
        llm.enqueue(calls(("lookup", {"key": "c"})), say("found c"))
        assert (await stranger.run("Find record c.")).text == "found c"
        assert last_user_lines(llm.requests[1]) == []
    finally:
        await again.aclose()
        await stranger.aclose()
