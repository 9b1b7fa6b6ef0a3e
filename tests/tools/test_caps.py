"""Caps between a hostile model or tool and the run (issue 30): a tool's output, however it
was made (a function, an MCP server), is cut before it reaches the model; a reply's parallel
calls past the cap are refused with a message the model acts on."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tests.tools.helpers import approving

from thinkloop.agent import Agent, AgentOptions
from thinkloop.models.scripted import ScriptedModel, call, reply
from thinkloop.settings import MAX_PARALLEL_CALLS, TOOL_OUTPUT_CHARS
from thinkloop.subagents import AgentSpec, SubAgents
from thinkloop.tools.base import tool
from thinkloop.tools.mcp import MCPServer, MCPServerConfig
from thinkloop.tools.subagents import MAX_SUBAGENT_DEPTH, MAX_SUBAGENT_TASKS
from thinkloop.types import ModelResponse

TEN_MB = 10 * 1024 * 1024
ANSWER = "The tool returned its output; here is the summary of what it said."


@tool
def dump() -> str:
    """Returns a lot."""
    return "x" * TEN_MB


def _tool_messages(model: ScriptedModel, request: int) -> list[str]:
    return [m.content for m in model.calls[request].messages if m.role == "tool"]


def _assert_cut(text: str, size: int = TEN_MB) -> None:
    assert len(text) < TOOL_OUTPUT_CHARS + 1000
    # Outside content (an MCP tool's) reaches the model datamarked: its spaces read "^".
    note = f"[output cut to its first {TOOL_OUTPUT_CHARS} characters of {size}"
    assert note in text.replace("^", " ")


async def test_a_custom_tools_10_mb_never_reaches_the_model() -> None:
    model = ScriptedModel([reply("", call("dump")), ANSWER])
    # No observation cap: the tool output cap alone is what is tested here.
    result = await Agent(model, tools=[dump], store="memory", max_steps=6,
                         options=AgentOptions(observation_max_tokens=0)).run("dump it")
    assert result.status == "completed"
    [seen] = _tool_messages(model, 1)
    _assert_cut(seen)


MCP_SIZE = 3 * 1024 * 1024  # what an MCP server sends takes it 2 s a megabyte
MCP_SERVER = textwrap.dedent(f"""
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("big")

    @app.tool()
    def dump() -> str:
        '''Returns a lot.'''
        return "y" * {MCP_SIZE}

    if __name__ == "__main__":
        app.run()
""")


async def test_an_mcp_tools_megabytes_never_reach_the_model(tmp_path: Path) -> None:
    script = tmp_path / "big_server.py"
    script.write_text(MCP_SERVER)
    async with MCPServer(MCPServerConfig(name="big", command=[sys.executable, str(script)])) as s:
        model = ScriptedModel([reply("", call("big_dump")), ANSWER])
        # An MCP tool waits for approval unless its server is trusted: here it is given.
        agent = Agent(model, tools=s.tools, store="memory", max_steps=6, guard=approving(),
                      options=AgentOptions(observation_max_tokens=0))
        result = await agent.run("dump it")
    assert result.status == "completed"
    [seen] = _tool_messages(model, 1)
    _assert_cut(seen, MCP_SIZE)


async def test_parallel_calls_past_the_cap_are_refused_and_the_model_sends_them_again() -> None:
    ran: list[int] = []

    @tool
    def work(i: int) -> str:
        """One unit of work."""
        ran.append(i)
        return f"did {i}"

    n = 40
    first = reply("", *(call("work", i=i) for i in range(n)))
    again = range(MAX_PARALLEL_CALLS, 2 * MAX_PARALLEL_CALLS)
    rest = reply("", *(call("work", i=i) for i in again))
    model = ScriptedModel([first, rest, ANSWER])
    result = await Agent(model, tools=[work], store="memory", max_steps=6).run("do 40")
    assert result.status == "completed"
    assert ran[:MAX_PARALLEL_CALLS] == list(range(MAX_PARALLEL_CALLS))  # the first 16 ran
    seen = _tool_messages(model, 1)
    assert len(seen) == n  # every call has its observation
    refused = seen[MAX_PARALLEL_CALLS:]
    assert all(f"at most {MAX_PARALLEL_CALLS} tool calls run per reply" in t for t in refused)
    assert all("make this call again in your next reply" in t for t in refused)
    assert sorted(ran) == list(range(2 * MAX_PARALLEL_CALLS))


class Recursive:
    """A model that hands every task to two sub-agents of its own kind, then sums up."""

    name = "scripted:recursive"

    def __init__(self) -> None:
        self.spawned = 0
        self.refused: list[str] = []

    async def complete(self, messages: Any, tools: Any, settings: Any) -> ModelResponse:
        if any(m.role == "tool" for m in messages):
            self.refused += [m.content for m in messages if "nested deeper" in m.content]
            return reply("Both parts are done; their results are summarised above.")
        self.spawned += 1
        return reply("", call("spawn_agent", tasks=["part one of it", "part two of it"]))

    async def stream(self, messages: Any, tools: Any, settings: Any) -> AsyncIterator[Any]:
        yield await self.complete(messages, tools, settings)


async def test_a_sub_agent_that_spawns_itself_stops_at_the_depth_cap_without_deadlock() -> None:
    model = Recursive()
    subs = SubAgents([AgentSpec(name="worker", model=model, tools=["spawn_agent"])],
                     max_concurrency=2)
    agent = Agent(model, tools=[subs.tool()], store="memory", guard=False, max_steps=4)
    result = await asyncio.wait_for(agent.run("do the thing"), 20)
    assert result.status == "completed", result.error
    # The root and its children at depths 1 and 2 spawn (1 + 2 + 4); the 8 at depth 3 try
    # and are told to do it themselves.
    assert MAX_SUBAGENT_DEPTH == 3
    assert model.spawned == 1 + 2 + 4 + 8
    assert len(model.refused) == 8
    assert all("sub-agents may not be nested deeper than 3: do this task yourself" in r
               for r in model.refused)


async def test_a_spawn_call_with_too_many_tasks_is_refused_with_the_cap() -> None:
    model = ScriptedModel([reply("", call("spawn_agent", tasks=[f"t{i}" for i in range(40)])),
                           ANSWER])
    subs = SubAgents([AgentSpec(name="worker", model=ScriptedModel([]))])
    agent = Agent(model, tools=[subs.tool()], store="memory", guard=False, max_steps=4)
    result = await agent.run("do 40 things")
    [seen] = _tool_messages(model, 1)
    assert f"at most {MAX_SUBAGENT_TASKS} tasks per spawn_agent call" in seen
    assert result.status == "completed"
