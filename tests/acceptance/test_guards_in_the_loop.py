"""Guards act through the loop: denied tools are neither described nor allowed, a guard's stop
answers through the same sanitizer as the model, and the session keeps the clean answer."""

from __future__ import annotations

from dataclasses import replace

import orjson

from thinkloop import Agent, tool
from thinkloop.agent import AgentOptions
from thinkloop.guard import GuardSettings, ToolPolicy, UsageLimits
from thinkloop.testing.openai_server import OpenAIServer

from .conftest import calls, say


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def wipe_disk(device: str) -> str:
    """Erase a disk."""
    raise AssertionError("a denied tool must never run")


async def test_a_denied_tool_is_not_in_the_json_prompt_nor_its_decode_schema(
        llm: OpenAIServer) -> None:
    guard = replace(GuardSettings(), policy=ToolPolicy(deny=("wipe_disk",)))
    answer = orjson.dumps({"reasoning": "Easy.", "tools": [], "completed": True,
                           "answer": "2 + 3 = 5"}).decode()
    llm.enqueue(say(answer))
    async with Agent(tools=[add, wipe_disk], guard=guard,
                     options=AgentOptions(protocol="json")) as agent:
        result = await agent.run("What is 2 + 3?")
    assert result.text == "2 + 3 = 5"
    request = llm.requests[0]
    assert "wipe_disk" not in request["messages"][0]["content"]
    assert "add" in request["messages"][0]["content"]
    schema = orjson.dumps(request["response_format"]).decode()
    assert '"add"' in schema and "wipe_disk" not in schema


async def test_a_budget_stop_answers_with_the_sanitized_text(llm: OpenAIServer) -> None:
    guard = replace(GuardSettings(), limits=UsageLimits(max_model_calls=2))
    llm.enqueue(calls(("add", {"a": 1, "b": 2}), text="<think>start small</think>Adding 1+2."),
                calls(("add", {"a": 3, "b": 4}), text="<think>next</think>So far 3, now 3+4."))
    async with Agent(tools=[add], guard=guard) as agent:
        result = await agent.run("Add 1+2 and then 3+4 with the tool.")
    assert result.status == "budget_exceeded"
    assert result.text == "So far 3, now 3+4." and result.output == result.text
    assert len(llm.requests) == 2


async def test_the_session_keeps_the_sanitized_answer(llm: OpenAIServer) -> None:
    llm.enqueue(say("<think>The user wants a sum; 2+3 is 5.</think>2 + 3 = 5"))
    async with Agent() as agent:
        result = await agent.run("What is 2 + 3?", session="sums")
        saved = await agent.store.load("sums")
    assert result.text == "2 + 3 = 5"
    assert [(m.role, m.content) for m in saved] == [("user", "What is 2 + 3?"),
                                                    ("assistant", "2 + 3 = 5")]
