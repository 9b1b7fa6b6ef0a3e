"""Sub-agents as the seeds run them (GoClaw, CortexPrism): a child runs with the minimal
prompt, its parent's run tracks it (run record, ``thinkloop runs show``), it ends cancelled
when its parent is aborted, and its tools know which agent and which parent run they serve."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import orjson

from thinkloop import Agent, ToolContext, tool
from thinkloop.store.sqlite import SQLiteStore
from thinkloop.subagents import AgentSpec, SubAgents
from thinkloop.testing.openai_server import OpenAIServer

from .conftest import calls, say

CLI = [sys.executable, "-c", "from thinkloop.cli.app import main; main()"]


class Probe:
    """A child's tool that notes what its context says, then works until stopped."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None, str]] = []
        self.entered = asyncio.Event()
        self.stopped = False

    def tool(self) -> object:
        @tool
        async def survey(ctx: ToolContext, region: str) -> str:
            """Survey a region (slow)."""
            self.seen.append((ctx.agent_id, ctx.parent_run_id, ctx.run_id))
            self.entered.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                self.stopped = True
                raise
            return "done"

        return survey


async def test_a_child_runs_minimal_is_tracked_and_is_aborted_with_its_parent(
        llm: OpenAIServer, tmp_path: Path) -> None:
    probe = Probe()
    surveyor = AgentSpec("surveyor", "surveys regions", tools=[probe.tool()])
    llm.enqueue(calls(("spawn_agent", {"tasks": ["Survey the north"], "agent": "surveyor"})),
                calls(("survey", {"region": "north"})))
    async with Agent(tools=[SubAgents([surveyor]).tool()]) as agent:  # defaults: stored
        handle = agent.start("Survey the country", session="s")
        await asyncio.wait_for(probe.entered.wait(), 60)
        [(agent_id, parent_run_id, child_run_id)] = probe.seen
        assert (agent_id, parent_run_id) == ("surveyor", handle.run_id)
        # The parent's tracker lists the child in progress.
        children = handle.state.children
        assert children is not None
        assert [(c.run_id, c.agent, c.status) for c in children.active()] == [
            (child_run_id, "surveyor", "running")]
        row = await _child_row(agent, handle.run_id)
        assert (row.id, row.status, row.agent, row.task) == (
            child_run_id, "running", "surveyor", "Survey the north")
        assert agent.registry.abort(handle.run_id)
        result = await handle.result()
        await agent.sessions.drain()
        assert result.status == "cancelled"
        assert probe.stopped  # the child's tool was stopped, not left running
        assert children.active() == []
        assert [c.status for c in children.runs.values()] == ["cancelled"]
        row = await _child_row(agent, handle.run_id)
        assert row.status == "cancelled" and row.ended_at is not None
        assert row.session_id is None  # its usage is its parent's: the session counts it once
    # The child read the minimal prompt: its own instructions, none of the full sections.
    child_system = str(llm.requests[1]["messages"][0]["content"])
    assert "mode=minimal" in child_system and "focused sub-agent" in child_system
    assert "mode=full" in str(llm.requests[0]["messages"][0]["content"])

    # thinkloop runs show lists the child under its parent, from the default store.
    doc = orjson.loads(_cli("runs", "show", handle.run_id, "--json"))
    assert doc["run"]["status"] == "cancelled"
    assert [(c["id"], c["status"], c["parent_id"]) for c in doc["children"]] == [
        (child_run_id, "cancelled", handle.run_id)]
    text = _cli("runs", "show", handle.run_id)
    assert f"sub-agent {child_run_id}  cancelled  surveyor" in text


def _cli(*args: str) -> str:
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


async def _child_row(agent: Agent, parent: str):  # type: ignore[no-untyped-def]
    store = agent.store
    assert isinstance(store, SQLiteStore)
    for _ in range(100):  # written in the background as the child starts
        rows = await store.list_runs(parent=parent)
        if rows:
            return rows[0]
        await asyncio.sleep(0.05)
    raise AssertionError("no record of the child run")


async def test_a_child_that_finishes_is_recorded_with_its_usage(
        llm: OpenAIServer, tmp_path: Path) -> None:
    worker = AgentSpec("worker", "answers")
    llm.enqueue(calls(("spawn_agent", {"tasks": ["What is 2+2?"]})), say("4"), say("It is 4."))
    async with Agent(tools=[SubAgents([worker]).tool()]) as agent:
        result = await agent.run("Ask a worker what 2+2 is", session="s")
        assert result.text == "It is 4."
        [row] = await agent.store.list_runs(parent=result.run_id)  # type: ignore[attr-defined]
    assert (row.status, row.agent, row.task) == ("completed", "worker", "What is 2+2?")
    assert row.input_tokens > 0 and row.ended_at is not None
