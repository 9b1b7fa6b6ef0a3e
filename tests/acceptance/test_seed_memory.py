"""Memory that keeps enough, in the seeds' terms (issue 36): UrchinLoop's 30 messages kept
verbatim after a compaction, reasoning blocks kept out of the history sent back, and a huge
tool result going into history truncated with a way to page through the rest."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from thinkloop import Agent, tool
from thinkloop.testing.openai_server import OpenAIServer

from .conftest import calls, say


@tool
def stock(item: int) -> str:
    """The stock level of one item."""
    return f"item {item}: 3 in stock"


def _sent(llm: OpenAIServer, i: int) -> str:
    """The history of request ``i`` (the system prompt explains the format, THINK included)."""
    return orjson.dumps([m for m in llm.requests[i]["messages"] if m["role"] != "system"]).decode()


@pytest.mark.parametrize("protocol", ["tags", "native"])
async def test_reasoning_blocks_are_absent_from_the_next_request(
        llm: OpenAIServer, protocol: str, tmp_path: Path) -> None:
    if protocol == "tags":  # UrchinLoop's own format
        first = say('<<THINK>>secret plan A<</THINK>>\n<<TOOL:stock:{"item": 1}>>')
    else:
        first = calls(("stock", {"item": 1}), text="<think>secret plan A</think>")
    llm.enqueue(first, say("<<THINK>>secret plan B<</THINK>>Item 1 has 3."), say("Fine."))
    async with Agent(tools=[stock], protocol=protocol,
                     store=str(tmp_path / "t.db")) as agent:
        result = await agent.run("How many of item 1?", session="s")
        assert result.text == "Item 1 has 3."
        await agent.run("Thanks. Anything else?", session="s")
    assert len(llm.requests) == 3
    for i in (1, 2):  # within the run, and in the next run on the session
        assert "secret plan" not in _sent(llm, i)
        assert "THINK" not in _sent(llm, i) and "<think>" not in _sent(llm, i)
    assert "item 1: 3 in stock" in _sent(llm, 2)  # the rest of the history is all there
    if protocol == "tags":  # the tool tag the model wrote stays: it is the history
        assert '<<TOOL:stock:{\\"item\\": 1}>>' in _sent(llm, 1)


async def test_after_an_auto_compaction_the_30_most_recent_messages_stay_verbatim(
        llm: OpenAIServer, tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    async with Agent("compat:steps-0", memory=True, store=db) as agent:
        for i in range(26):  # 52 messages: past the 50 that trigger a compaction
            await agent.run(f"question {i}", session="s")
        await agent.sessions.drain()
        kept = await agent.store.load("s")
        info = await agent.store.session_info("s")  # type: ignore[attr-defined]
    assert info.compactions == 1
    assert len(kept) == 30
    assert [m.content for m in kept[::2]] == [f"question {i}" for i in range(11, 26)]
    assert all(m.content == "done after 0 steps" for m in kept[1::2])
