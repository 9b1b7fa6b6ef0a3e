from __future__ import annotations

import asyncio
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest

from thinkloop.agent import Agent
from thinkloop.errors import ConfigError
from thinkloop.events import Event, Handoff
from thinkloop.models.base import ModelSettings
from thinkloop.models.scripted import ScriptedModel, reply
from thinkloop.models.scripted import call as model_call
from thinkloop.subagents import AgentSpec, SubAgents
from thinkloop.tools.base import ToolContext, tool
from thinkloop.tools.plugins import load_plugin_tools
from thinkloop.types import Message, ModelResponse, ToolSpec, Usage


class EchoModel:
    """Answers each child with its task; slower for tasks containing 'slow'. Counts overlap."""

    name = "echo"

    def __init__(self) -> None:
        self.active = 0
        self.peak = 0

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> ModelResponse:
        task = messages[-1].content
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            await asyncio.sleep(0.2 if "slow" in task else 0.02)
        finally:
            self.active -= 1
        return reply(f"done: {task}", usage=Usage(1, 100, 7))

    async def stream(self, messages, tools, settings):  # type: ignore[no-untyped-def]
        yield await self.complete(messages, tools, settings)


async def test_fan_out_keeps_order_limits_concurrency_and_charges_usage() -> None:
    model = EchoModel()
    events: list[Event] = []
    subs = SubAgents([AgentSpec("worker")], model=model, max_concurrency=2,
                     on_event=events.append)
    parent = ToolContext("parent-run", 3, "c9", user_id="alice")
    tasks = ["slow one", "two", "three", "four", "five"]
    results = await subs.fan_out(tasks, parent)
    assert [r.text for r in results] == [f"done: {t}" for t in tasks]
    assert all(r.status == "completed" for r in results)
    assert model.peak == 2
    assert subs.usage_for("parent-run") == Usage(5, 500, 35)
    handoffs = [e for e in events if e.type == "handoff"]
    assert len(handoffs) == 10
    assert {e.run_id for e in handoffs} == {"parent-run"} and {e.step for e in handoffs} == {3}
    to_child = [e.payload["task"] for e in handoffs if e.payload["direction"] == "to_child"]
    assert sorted(to_child) == sorted(tasks)
    back = {e.payload["child_run_id"]: e.payload["status"] for e in handoffs
            if e.payload["direction"] == "to_parent"}
    assert back == {r.run_id: "completed" for r in results}


async def test_spawn_agent_tool_end_to_end_with_child_tools() -> None:
    seen: list[str | None] = []

    @tool
    def shout(ctx: ToolContext, text: str) -> str:
        """Upper-case text."""
        seen.append(ctx.user_id)
        return text.upper()

    child_model = ScriptedModel([
        lambda m, t: reply("", model_call("shout", text=m[-1].content)),
        lambda m, t: f"child says {m[-1].content}",
    ])
    subs = SubAgents([AgentSpec("shouter", "shouts text", tools=[shout], model=child_model)])
    spawn = subs.tool()
    assert "Sub-agents: shouter: shouts text." in spawn.description
    assert "ctx" not in spawn.parameters["properties"]
    parent_model = ScriptedModel([reply("", model_call("spawn_agent", tasks=["hello"])), "ok"])
    events: list[str] = []
    parent = Agent(parent_model, tools=[spawn], on_event=lambda e: events.append(e.type),
                   guard=False)
    result = await parent.run("go", user_id="bob")
    assert events.count("handoff") == 2
    assert result.text == "ok"
    assert result.steps[0].results[0].content == "[1] shouter (completed)\nchild says HELLO"
    assert seen == ["bob"]
    # The child's two model calls are charged to the parent's ledger.
    assert subs.usage_for(result.run_id) == Usage(2, 20, 10)
    # ... and counted in the parent's own usage: 2 parent calls + 2 child calls.
    assert result.usage == Usage(4, 40, 20)
    # The child saw a minimal prompt and only its own tool.
    assert [s.name for s in child_model.calls[0].tools] == ["shout"]
    assert child_model.calls[0].messages[0].content.startswith("You are a focused sub-agent")


async def test_unknown_sub_agent_is_an_error_observation() -> None:
    subs = SubAgents([AgentSpec("worker")], model=EchoModel())
    parent_model = ScriptedModel(
        [reply("", model_call("spawn_agent", tasks=["x"], agent="nobody")), "fine"])
    result = await Agent(parent_model, tools=[subs.tool()], guard=False).run("go")
    r = result.steps[0].results[0]
    assert r.is_error and "unknown sub-agent 'nobody'; available: worker" in r.content
    with pytest.raises(ConfigError):
        SubAgents([AgentSpec("w")], max_concurrency=0)


def test_entry_point_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "tl_plugin_demo.py"
    pkg.write_text(textwrap.dedent("""
        from thinkloop.tools import tool

        @tool
        def cube(x: int) -> int:
            '''Cube a number.'''
            return x ** 3

        def square(x: int) -> int:
            '''Square a number.'''
            return x * x

        def factory():
            return [cube, square]
    """))
    dist = tmp_path / "tl_plugin_demo-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tl-plugin-demo\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[thinkloop.tools]\nall = tl_plugin_demo:factory\nbroken = tl_plugin_demo:missing\n"
        "one = tl_plugin_demo:square\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tl_plugin_demo", raising=False)
    tools, failures = load_plugin_tools()
    assert [t.name for t in tools] == ["cube", "square", "square"]
    assert tools[0].parameters["properties"]["x"]["type"] == "integer"
    assert [f.entry_point for f in failures] == ["broken"]
    assert "AttributeError" in failures[0].error
    with pytest.raises(ConfigError, match="plugin 'broken'"):
        load_plugin_tools(strict=True)


async def test_loop_hooks_on_the_context_receive_handoffs_and_usage() -> None:
    """When the loop puts ``emit``/``charge_usage`` on ToolContext, children report there."""
    emitted: list[tuple[object, dict[str, object]]] = []
    charged: list[Usage] = []
    parent = SimpleNamespace(run_id="p", step=1, user_id=None,
                             emit=lambda kind, **p: emitted.append((kind, p)),
                             charge_usage=charged.append)
    subs = SubAgents([AgentSpec("worker")], model=EchoModel())
    [res] = await subs.fan_out(["hi"], parent)  # type: ignore[arg-type]
    assert charged == [Usage(1, 100, 7)]
    assert [(t, p["direction"]) for t, p in emitted] == [(Handoff, "to_child"),
                                                         (Handoff, "to_parent")]
    assert emitted[1][1]["child_run_id"] == res.run_id
