"""The run registry: active runs by id and session, abort by run / session / all."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

import pytest

from thinkloop import Agent, ScriptedModel, tool
from thinkloop.agent import AgentOptions
from thinkloop.errors import RunAccessError
from thinkloop.guard import ApprovalSettings, CallbackApprover, Decision, GuardSettings
from thinkloop.loop.handle import RunHandle
from thinkloop.loop.result import RunResult
from thinkloop.models.scripted import call, reply
from thinkloop.runs import RunRegistry
from thinkloop.store import MemoryStore
from thinkloop.types import Message, ModelResponse, ToolSpec

started: list[str] = []


@tool
async def wait_here(label: str) -> str:
    """Wait for a long time."""
    started.append(label)
    await asyncio.sleep(3600)
    return label


@tool(needs_approval=True)
def guarded(label: str) -> str:
    """Do something that needs the person's approval."""
    started.append(label)
    return label


def asks_first(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
    return reply("", call("guarded", label="x"))


def waits(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
    return reply("", call("wait_here", label=messages[-1].content))


async def _until_tools_run(n: int) -> None:
    for _ in range(500):
        if len(started) >= n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"only {len(started)} of {n} runs reached their tool")


@pytest.fixture(autouse=True)
def _clear() -> None:
    started.clear()


async def test_runs_are_registered_by_id_and_session_and_leave_when_done() -> None:
    registry = RunRegistry()
    agent = Agent(ScriptedModel(["hello"] * 3), guard=False,
                  options=AgentOptions(registry=registry))
    handle = agent.start("hi", session="s1", user_id="ada")
    assert len(registry) == 1 and registry.get(handle.run_id) is handle
    assert (handle.session_id, handle.user_id, handle.status) == ("s1", "ada", "running")
    assert registry.active("s1") == [handle] and registry.active("s2") == []
    result = await handle
    assert result.status == "completed" and handle.status == "completed"
    assert len(registry) == 0 and registry.get(handle.run_id) is None
    # An agent has a registry of its own by default.
    own = Agent(ScriptedModel(["x"]), guard=False)
    h = own.start("go")
    assert own.registry.active() == [h]
    await h
    assert len(own.registry) == 0


async def test_abort_by_run_refuses_another_sessions_run_and_keeps_sessions_intact() -> None:
    store, registry = MemoryStore(), RunRegistry()
    await store.append("s1", [Message.user("earlier"), Message.assistant("ok")])
    agent = Agent(ScriptedModel([waits] * 4), tools=[wait_here], store=store, guard=False,
                  options=AgentOptions(registry=registry))
    a = agent.start("a", session="s1")
    b = agent.start("b", session="s2")
    await _until_tools_run(2)
    with pytest.raises(RunAccessError, match="another session"):
        registry.abort(a.run_id, session="s2")
    assert a.status == "running"  # refused: still going
    assert registry.abort("no-such-run") is False
    assert registry.abort(a.run_id, session="s1") is True
    ra = await asyncio.wait_for(a.result(), 5)
    assert ra.status == "cancelled"
    assert registry.active() == [b]
    assert registry.abort(b.run_id) is True  # no session given: the caller speaks for all
    assert (await asyncio.wait_for(b.result(), 5)).status == "cancelled"
    # Cancelled runs save nothing: the sessions are as they were.
    assert [m.content for m in await store.load("s1")] == ["earlier", "ok"]
    assert await store.load("s2") == []
    # ... and stay usable.
    nxt = Agent(ScriptedModel(["fine"]), store=store, guard=False)
    assert (await nxt.run("again", session="s1")).status == "completed"
    assert [m.content for m in await store.load("s1")] == ["earlier", "ok", "again", "fine"]


async def test_abort_session_and_abort_all() -> None:
    registry = RunRegistry()
    model = ScriptedModel([waits] * 6)
    # Two agents share one registry: it sees the runs of both. Each keeps its sessions in
    # its own process store, so both runs on session A are in flight at once (on one durable
    # store the second would wait for the session's lock).
    one = Agent(model, tools=[wait_here], guard=False, store="memory",
                options=AgentOptions(registry=registry))
    two = Agent(model, tools=[wait_here], guard=False, store="memory",
                options=AgentOptions(registry=registry))
    handles = [one.start("a1", session="A"), two.start("a2", session="A"),
               one.start("b1", session="B"), two.start("free")]
    await _until_tools_run(4)
    assert len(registry) == 4 and len(registry.active("A")) == 2
    assert registry.abort_session("A") == 2
    results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles[:2])), 5)
    assert [r.status for r in results] == ["cancelled", "cancelled"]
    assert {h.run_id for h in registry.active()} == {handles[2].run_id, handles[3].run_id}
    assert registry.abort_session("A") == 0
    assert registry.abort_all() == 2
    results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles[2:])), 5)
    assert [r.status for r in results] == ["cancelled", "cancelled"]
    assert len(registry) == 0


async def test_a_run_aborted_before_its_first_step_still_ends_cancelled() -> None:
    registry = RunRegistry()
    agent = Agent(ScriptedModel(["never"]), guard=False, options=AgentOptions(registry=registry))
    handle = agent.start("go", session="s")
    assert registry.abort(handle.run_id) is True  # before the task ran at all
    result = await asyncio.wait_for(handle.result(), 5)
    assert result.status == "cancelled"
    assert len(registry) == 0


# --- an abort always ends in a result -------------------------------------------------------

async def _aborted(registry: RunRegistry, handle: RunHandle) -> RunResult:
    assert registry.abort(handle.run_id) is True
    return await asyncio.wait_for(handle.result(), 5)


async def test_aborting_a_run_queued_behind_its_session_returns_a_cancelled_result() -> None:
    registry, store = RunRegistry(), MemoryStore()
    agent = Agent(ScriptedModel([waits, "later"]), tools=[wait_here], store=store, guard=False,
                  options=AgentOptions(registry=registry))
    first = agent.start("first", session="s")
    await _until_tools_run(1)
    queued = agent.start("queued", session="s")  # waits for the session's lock
    for _ in range(5):
        await asyncio.sleep(0)
    assert queued.status == "running" and not queued.done
    events: list[str] = []

    async def watch() -> None:
        events.extend([e.type async for e in queued])

    watcher = asyncio.create_task(watch())
    result = await _aborted(registry, queued)
    await asyncio.wait_for(watcher, 5)
    assert (result.status, result.run_id, result.steps) == ("cancelled", queued.run_id, ())
    assert events == ["run.cancelled"]  # its stream ends with a terminal event too
    assert (await _aborted(registry, first)).status == "cancelled"
    assert await store.load("s") == []  # nothing of either turn was saved


async def test_aborting_a_run_waiting_for_approval_returns_a_cancelled_result() -> None:
    registry, asked = RunRegistry(), asyncio.Event()

    async def never(_: object) -> Decision:
        asked.set()
        await asyncio.sleep(3600)
        return Decision(True)

    guard = replace(GuardSettings.off(), approval=ApprovalSettings(CallbackApprover(never)))
    agent = Agent(ScriptedModel([asks_first]), tools=[guarded], guard=guard,
                  options=AgentOptions(registry=registry))
    handle = agent.start("go")
    await asyncio.wait_for(asked.wait(), 5)
    result = await _aborted(registry, handle)
    assert result.status == "cancelled" and started == []  # the tool never ran


async def test_aborting_a_resumed_paused_run_queued_behind_its_session() -> None:
    registry, store = RunRegistry(), MemoryStore()
    pausing = replace(GuardSettings.off(), approval=ApprovalSettings(on_timeout="pause"))
    paused = await Agent(ScriptedModel([asks_first]), tools=[guarded], store=store,
                         guard=pausing).run("pay", session="s")
    assert paused.status == "paused"
    agent = Agent(ScriptedModel(["done"]), tools=[guarded], store=store, guard=pausing,
                  options=AgentOptions(registry=registry))
    async with agent.sessions._locks.hold("s"):  # another run holds the session
        resumed = await agent.start_resume("s", True)
        for _ in range(5):
            await asyncio.sleep(0)
        result = await _aborted(registry, resumed)
    assert (result.status, result.run_id) == ("cancelled", paused.run_id)
    assert started == []
    # Still paused: the abort decided nothing.
    assert [p.tool for p in await agent.pending_approvals("s")] == ["guarded"]
