"""Runs as records through the public API: an agent with a store records every run it
starts (row, audit log, session totals), and obeys an abort asked for through the store."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from thinkloop import Agent, ScriptedModel, tool
from thinkloop.errors import ModelHTTPError
from thinkloop.models.scripted import call, reply
from thinkloop.store import MemoryStore, PostgresStore, SQLiteStore, open_store
from thinkloop.types import Message, ModelResponse, ToolSpec, Usage

Backend = SQLiteStore | PostgresStore


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def slow(label: str) -> str:
    """Take a long time."""
    await asyncio.sleep(3600)
    return label


def arithmetic() -> list[object]:
    """A competent model: new arguments each step, one malformed call, then the answer."""
    return [
        reply("", call("add", a=2, b=3), thought="start", usage=Usage(1, 100, 10, 0.01)),
        reply("", call("add", a="five", b=1), usage=Usage(1, 120, 8, 0.01)),  # malformed
        reply("", call("add", a=5, b=1), usage=Usage(1, 140, 9, 0.01)),
        reply("2+3=5 and 5+1=6", usage=Usage(1, 160, 12, 0.02)),
    ]


async def test_every_run_is_recorded_with_its_audit_log(run_store: object) -> None:
    store = run_store
    agent = Agent(ScriptedModel(arithmetic(), name="openai:gpt-x"), tools=[add],
                  store=store, name="calc", guard=False)  # type: ignore[arg-type]
    result = await agent.run("add 2 and 3, then add 1", session="s1", user_id="ada")
    assert result.status == "completed"
    rec = await store.get_run(result.run_id)  # type: ignore[attr-defined]
    assert rec is not None
    assert (rec.agent, rec.model, rec.provider, rec.status, rec.session_id, rec.user_id,
            rec.task) == ("calc", "openai:gpt-x", "openai", "completed", "s1", "ada",
                          "add 2 and 3, then add 1")
    assert (rec.steps, rec.input_tokens, rec.output_tokens) == (4, 520, 39)
    assert abs(rec.cost_usd - 0.05) < 1e-9 and rec.error is None
    assert rec.ended_at is not None and rec.ended_at >= rec.started_at
    events = await store.run_events(result.run_id)  # type: ignore[attr-defined]
    types = [e.type for e in events]
    assert types[0] == "run.started" and types[-1] == "run.completed"
    assert types.count("llm.response") == 4 and types.count("step.completed") == 4
    assert "chunk" not in types
    calls = [e.payload for e in events if e.type == "tool.call"]
    assert [c["arguments"] for c in calls] == [{"a": 2, "b": 3}, {"a": "five", "b": 1},
                                               {"a": 5, "b": 1}]
    results = [(e.payload["content"], e.payload["is_error"])
               for e in events if e.type == "tool.result"]
    assert results[0] == ("5", False) and results[1][1] is True and results[2] == ("6", False)
    assert all(e.run_id == result.run_id for e in events)


async def test_failed_and_cancelled_runs_are_recorded_too(store: Backend) -> None:
    down = ScriptedModel([ModelHTTPError(400, "bad request")], name="openai:m")
    failed = await Agent(down, store=store, guard=False).run("x", session="s")
    rec = await store.get_run(failed.run_id)
    assert rec is not None and rec.status == "failed" and "HTTP 400" in (rec.error or "")

    agent = Agent(ScriptedModel([reply("", call("slow", label="a"))]), tools=[slow],
                  store=store, guard=False)
    handle = agent.start("wait", session="s")
    async for event in handle:
        if event.type == "tool.call":
            assert (await store.get_run(handle.run_id)).status == "running"  # type: ignore[union-attr]
            agent.registry.abort(handle.run_id)
    result = await handle.result()
    assert result.status == "cancelled"
    rec = await store.get_run(handle.run_id)
    assert rec is not None and rec.status == "cancelled" and rec.ended_at is not None
    assert [r.status for r in await store.list_runs(session="s")] == ["cancelled", "failed"]


async def test_the_session_keeps_its_model_and_token_totals(store: Backend) -> None:
    model = ScriptedModel(["one", "two"], name="openai:gpt-x")
    agent = Agent(model, store=store, guard=False)
    await agent.run("first", session="s")
    await agent.run("second", session="s")
    info = await store.session_info("s")
    assert info is not None
    assert (info.model, info.input_tokens, info.output_tokens) == ("openai:gpt-x", 20, 10)


async def test_store_memory_records_nothing_and_the_default_store_records_each_run() -> None:
    agent = Agent(ScriptedModel(["hi"]), store="memory", guard=False)
    assert agent.runbook is None
    await agent.run("x")
    assert isinstance(agent.store, MemoryStore) and agent.store.runs == {}
    # The default durable store keeps runs as a given one does, so kill -9 loses nothing
    # (tests/store/test_default_store_durable.py).
    async with Agent(ScriptedModel(["hi"]), guard=False) as durable:
        assert durable.runbook is not None
        result = await durable.run("x", session="s")
        [rec] = await durable.store.list_runs()  # type: ignore[attr-defined]
        assert (rec.id, rec.status) == (result.run_id, "completed")


def _waits(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
    return reply("", call("slow", label="x"))


async def test_an_abort_asked_through_the_store_stops_the_run(store_url: str) -> None:
    owner_store, other_store = open_store(store_url), open_store(store_url)
    try:
        agent = Agent(ScriptedModel([_waits]), tools=[slow], store=owner_store, guard=False)
        handle = agent.start("wait", session="s")
        for _ in range(200):
            rec = await other_store.get_run(handle.run_id)
            if rec is not None:
                break
            await asyncio.sleep(0.02)
        # Another process (here: another store object) asks; the owner polls and cancels.
        assert await other_store.request_abort(handle.run_id) is True
        result = await asyncio.wait_for(handle.result(), 5)
        assert result.status == "cancelled"
        rec = await other_store.get_run(handle.run_id)
        assert rec is not None and rec.status == "cancelled"
        assert rec.error == "aborted on request from another process"
        assert await other_store.request_abort(handle.run_id) is False  # it has ended
        assert await owner_store.load("s") == []  # the session is intact
    finally:
        await owner_store.aclose()
        await other_store.aclose()


async def test_a_recorded_runs_state_is_freed_when_it_ends_not_left_to_the_collector(
        run_store: object) -> None:
    """A recorded run (row, audit log, trace, checkpoints, a tool call) leaves no reference
    cycle behind: its state, history and records go as soon as nothing holds them. Left in
    a cycle, every run's objects outlived it until a full collection (issue 38)."""
    import gc

    from thinkloop.core.run import RunState
    from thinkloop.runlog import RunRecorder

    agent = Agent(ScriptedModel(arithmetic() + arithmetic(), name="openai:gpt-x"), tools=[add],
                  store=run_store, guard=False)  # type: ignore[arg-type]
    assert (await agent.run("add 2 and 3, then add 1", session="s0")).status == "completed"
    gc.collect()
    gc.disable()
    try:
        result = await agent.run("add 2 and 3, then add 1", session="s1")
        assert result.status == "completed"
        await asyncio.sleep(0)  # the run's task's done callbacks
        del result
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        left = [type(o).__name__ for o in gc.garbage
                if isinstance(o, RunState | RunRecorder)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert left == []


async def test_a_steps_reply_is_serialised_once_for_its_checkpoint_rows(
    tmp_path: object, monkeypatch: object
) -> None:
    """The reply a step's ``calls`` row holds is in its next ``step`` row twice more (a new
    message, the step's reply): its dict is made once and reused (issue 38), and every row
    is what serialising each message anew writes."""
    import orjson
    import pytest

    from thinkloop import checkpoints

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    serialised: list[str] = []
    to_dict = checkpoints.message_to_dict

    def counted(m: Message) -> dict[str, object]:
        serialised.append(m.role)
        return to_dict(m)

    monkeypatch.setattr(checkpoints, "message_to_dict", counted)
    store = SQLiteStore(f"{tmp_path}/runs.db")
    agent = Agent(ScriptedModel(arithmetic(), name="openai:gpt-x"), tools=[add],
                  store=store, guard=False)
    result = await agent.run("add 2 and 3, then add 1")
    assert result.status == "completed"
    assert serialised.count("assistant") == 3  # the three replies with calls, once each
    rows = await store.checkpoints(result.run_id)
    for kind, blob in rows:
        data = orjson.loads(blob)
        if kind == "step":
            for m, s in zip([m for m in data["messages"] if m["role"] == "assistant"],
                            data["steps"], strict=True):
                assert m == s["reply"]
    steps = result.steps
    step_rows = [orjson.loads(b) for k, b in rows if k == "step"]
    replies = [s["reply"] for row in step_rows for s in row["steps"]]
    assert replies == [to_dict(Message.assistant(s.text, s.tool_calls, s.thought))
                       for s in steps[:len(replies)]]
    await agent.aclose()
