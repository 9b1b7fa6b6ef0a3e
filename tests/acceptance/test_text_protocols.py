"""The seeds' own text formats get the same context pipeline as native function calling."""

from __future__ import annotations

import orjson
import pytest

from thinkloop import Agent, tool
from thinkloop.agent import AgentOptions
from thinkloop.testing.openai_server import OpenAIServer

from .conftest import calls, say

TASK = "Look up the stock level of items 0 to 39, one lookup per item, then report the total."
STEPS = 40


@tool
def stock(item: int) -> str:
    """The stock level of one item."""
    return f"item {item}: {item % 7} in stock " + "(warehouse A) " * 40


def _json_call(i: int) -> str:
    return orjson.dumps({"reasoning": f"Next is item {i}.",
                         "tools": [{"name": "stock", "arguments": {"item": i}}],
                         "completed": False}).decode()


def _tags_call(i: int) -> str:
    return f"<<THINK>>Next is item {i}.<</THINK>>\n<<TOOL:stock:{{\"item\": {i}}}>>"


ANSWER = {"json": orjson.dumps({"reasoning": "All counted.", "tools": [], "completed": True,
                                "answer": "The total stock is 117."}).decode(),
          "tags": "The total stock is 117."}


async def _long_run(llm: OpenAIServer, protocol: str) -> tuple[list[list[dict[str, str]]], str]:
    llm.clear()
    if protocol == "native":
        llm.enqueue(*[calls(("stock", {"item": i})) for i in range(STEPS)],
                    say("The total stock is 117."))
    else:
        write = _json_call if protocol == "json" else _tags_call
        llm.enqueue(*[say(write(i)) for i in range(STEPS)], say(ANSWER[protocol]))
    async with Agent(tools=[stock], max_steps=STEPS + 5,
                     options=AgentOptions(protocol=protocol)) as agent:
        result = await agent.run(TASK)
    assert result.status == "completed", result.error
    assert [s.results[0].call.arguments for s in result.steps[:STEPS]] == [
        {"item": i} for i in range(STEPS)]
    return [r["messages"] for r in llm.requests], result.text


@pytest.mark.parametrize("protocol", ["json", "tags"])
async def test_a_forty_step_text_protocol_run_stays_bounded_and_keeps_the_task(
        llm: OpenAIServer, protocol: str) -> None:
    native, _ = await _long_run(llm, "native")
    sent, text = await _long_run(llm, protocol)
    assert text == "The total stock is 117."
    last, native_last = sent[-1], native[-1]
    # Compacted like native: the middle steps became one tally, so the request stopped growing.
    assert len(last) <= len(native_last) + 1, (len(last), len(native_last))
    assert max(len(m) for m in sent) <= max(len(m) for m in native) + 1
    tally = next(m["content"] for m in last if "middle steps compacted" in m["content"])
    assert "... stock x" in tally
    # And the original task is still the user's message the model reads.
    assert [m["content"] for m in last if m["content"] == TASK] == [TASK]
