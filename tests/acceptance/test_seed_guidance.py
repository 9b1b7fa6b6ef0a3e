"""Guidance where the tools are (Stingyclaw's prompt sections): a tool carries how to use it,
and the system prompt says it whenever a run has the tool, for a Python ``Agent`` as for the
CLI and the gateway."""

from __future__ import annotations

from pathlib import Path

from thinkloop import Agent, tool
from thinkloop.testing.openai_server import OpenAIServer
from thinkloop.tools.builtin import Toolbox
from thinkloop.tools.builtin.settings import ToolSettings

from .conftest import say


def _system(llm: OpenAIServer, i: int = 0) -> str:
    return str(llm.requests[i]["messages"][0]["content"])


async def test_a_python_agent_with_ask_human_and_workflows_reads_their_guidance(
        llm: OpenAIServer, tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "tea.md").write_text("# Brewing tea\nUse water at 80 degrees.\n")
    box = Toolbox(ToolSettings(workspace=tmp_path / "ws", skills=skills), browser=False)
    chosen = [t for t in box.tools if t.name in ("ask_human", "search_tools")]
    llm.enqueue(say("Fine."), say("Fine."))
    async with Agent(tools=chosen, store="memory") as agent:
        await agent.run("Make me some tea")
    system = _system(llm)
    assert "call ask_human instead of guessing" in system
    assert "call search_tools to look for a ready-made workflow" in system
    assert "## tea" in system
    # Without the tool, no word of it.
    async with Agent(tools=[t for t in chosen if t.name != "ask_human"],
                     store="memory") as agent:
        await agent.run("Make me some tea")
    assert "ask_human" not in _system(llm, 1)


@tool(guidance="Check the stock with stock_level before promising a delivery date.")
def stock_level(item: str) -> str:
    """How many of an item are in stock."""
    return "3"


async def test_a_users_own_tool_brings_its_guidance(llm: OpenAIServer) -> None:
    llm.enqueue(say("Fine."))
    async with Agent(tools=[stock_level], store="memory") as agent:
        assert "Check the stock with stock_level" in agent.system_prompt()
        await agent.run("When can you deliver?")
    assert "Check the stock with stock_level before promising" in _system(llm)
