"""The loop with a ScriptedModel: every exit path and every event, exactly."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest
from pydantic import BaseModel

from thinkloop import Agent, Event, ScriptedModel, tool
from thinkloop.agent import with_options
from thinkloop.guard import GuardSettings
from thinkloop.models.scripted import call, reply
from thinkloop.types import Message, Usage

CALLS: list[tuple[str, object]] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    CALLS.append(("add", (a, b)))
    return a + b


@tool
async def slow_echo(text: str, delay: float) -> str:
    """Echo after a delay."""
    await asyncio.sleep(delay)
    CALLS.append(("slow_echo", text))
    return text


@tool
def boom() -> str:
    """Always fails."""
    raise RuntimeError("disk on fire")


@tool(timeout_s=0.05)
async def hang() -> str:
    """Never finishes in time."""
    await asyncio.sleep(10)
    return "never"


@pytest.fixture(autouse=True)
def _reset() -> None:
    CALLS.clear()


# These tests pin down the bare loop; the guards (on by default) are tested in tests/guard.
BARE = GuardSettings.off()


def agent(script: list[object], **kw: object) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script)
    kw.setdefault("guard", BARE)
    return Agent(model, tools=[add, slow_echo, boom, hang],  # type: ignore[arg-type]
                 **with_options(kw)), model


async def test_final_answer_at_once() -> None:
    a, model = agent(["Paris."])
    result = await a.run("Capital of France?")
    assert (result.status, result.output, result.text) == ("completed", "Paris.", "Paris.")
    assert len(result.steps) == 1 and result.steps[0].tool_calls == ()
    assert result.usage == Usage(1, 10, 5)
    sent = model.calls[0]
    assert [m.role for m in sent.messages] == ["system", "user"]
    assert sent.messages[1].content == "Capital of France?"
    assert {t.name for t in sent.tools} == {"add", "slow_echo", "boom", "hang"}
    assert [m.role for m in result.messages] == ["user", "assistant"]


async def test_n_tool_steps_feed_observations_back() -> None:
    a, model = agent([
        reply("", call("add", a=1, b=2)),
        reply("", call("add", a=3, b=4)),
        "3 and 7",
    ])
    result = await a.run("add things")
    assert CALLS == [("add", (1, 2)), ("add", (3, 4))]
    assert result.status == "completed" and result.output == "3 and 7"
    assert [len(s.tool_calls) for s in result.steps] == [1, 1, 0]
    assert [r.content for s in result.steps for r in s.results] == ["3", "7"]
    third = model.calls[2].messages
    assert [m.role for m in third] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert third[3].content == "3" and third[5].content == "7"
    assert result.usage.requests == 3


async def test_parallel_calls_run_concurrently_and_keep_order() -> None:
    a, model = agent([
        reply("", call("slow_echo", text="first", delay=0.3),
              call("slow_echo", text="second", delay=0.05),
              call("slow_echo", text="third", delay=0.15)),
        "done",
    ])
    start = time.perf_counter()
    result = await a.run("echo three")
    elapsed = time.perf_counter() - start
    assert elapsed < 0.45, "calls must overlap, not run one after another"
    assert CALLS == [("slow_echo", "second"), ("slow_echo", "third"), ("slow_echo", "first")]
    tool_msgs = [m for m in model.calls[1].messages if m.role == "tool"]
    assert [m.content for m in tool_msgs] == ["first", "second", "third"]
    assert [r.call.arguments["text"] for r in result.steps[0].results] == [
        "first", "second", "third"]


async def test_unknown_tool_becomes_error_observation() -> None:
    a, model = agent([reply("", call("fly", to="moon")), "cannot fly"])
    result = await a.run("fly")
    obs = result.steps[0].results[0]
    assert obs.is_error and "unknown tool 'fly'" in obs.content and "add" in obs.content
    assert result.status == "completed"
    assert model.calls[1].messages[-1].content == obs.content


async def test_tool_exception_becomes_error_observation() -> None:
    a, _ = agent([reply("", call("boom")), "it failed"])
    result = await a.run("boom")
    obs = result.steps[0].results[0]
    assert obs.is_error
    assert obs.content == "Error: boom raised RuntimeError: disk on fire"
    assert result.status == "completed"


async def test_tool_timeout_becomes_error_observation() -> None:
    a, _ = agent([reply("", call("hang")), "gave up"])
    result = await a.run("hang")
    obs = result.steps[0].results[0]
    assert obs.is_error and obs.content == "Error: hang timed out after 0.05s"
    assert result.status == "completed"


async def test_invalid_arguments_then_corrected() -> None:
    a, _model = agent([
        reply("", call("add", a="one", b=2)),
        reply("", call("add", a=1, b=2)),
        "3",
    ])
    result = await a.run("add")
    first = result.steps[0].results[0]
    assert first.is_error and "invalid arguments for add" in first.content
    assert "a: Input should be a valid integer" in first.content
    assert CALLS == [("add", (1, 2))]
    assert result.output == "3"


async def test_undecodable_arguments_reported() -> None:
    bad = Message.assistant("", (call("add"),))
    bad_call = bad.tool_calls[0]
    from dataclasses import replace

    broken = Message.assistant("", (replace(bad_call, parse_error="arguments are not valid JSON"),))
    a, _ = agent([broken, "ok"])
    result = await a.run("add")
    assert result.steps[0].results[0].content == "Error: arguments are not valid JSON"


async def test_max_steps_ends_with_forced_answer() -> None:
    script: list[object] = [reply("", call("add", a=i, b=i)) for i in range(3)]
    script.append("best effort: 0, 2, 4")
    a, model = agent(script, max_steps=3)
    result = await a.run("loop forever")
    assert result.status == "max_steps"
    assert result.output == "best effort: 0, 2, 4"
    assert len(model.calls) == 4
    last = model.calls[3]
    assert last.tools == (), "tools are withheld on the final call"
    assert "used all 3 steps" in last.messages[-1].content


async def test_max_steps_when_model_still_asks_for_tools() -> None:
    a, _ = agent([reply("", call("add", a=1, b=1)),
                  reply("partial", call("add", a=2, b=2))], max_steps=1)
    result = await a.run("x")
    assert result.status == "max_steps" and result.output == "partial"
    assert CALLS == [("add", (1, 1))]


async def test_timeout_status() -> None:
    a, _ = agent([reply("", call("slow_echo", text="x", delay=5))], timeout_s=0.2)
    result = await a.run("slow")
    assert result.status == "timeout"
    assert result.error == "run timed out after 0.2s"
    # the interrupted call still has a result, so the history stays consistent
    assert [m.role for m in result.messages] == ["user", "assistant", "tool"]


async def test_cancel_immediately_mid_tool() -> None:
    a, _ = agent([reply("", call("slow_echo", text="x", delay=5)), "never"])
    handle = a.start("slow")
    async for event in handle:
        if event.type == "tool.call":
            handle.cancel()
    result = await handle.result()
    assert result.status == "cancelled"
    assert CALLS == []
    assert result.messages[-1].role == "tool"
    assert "cancelled" in result.messages[-1].content


async def test_cancel_after_step_finishes_the_step() -> None:
    a, model = agent([reply("", call("slow_echo", text="x", delay=0.1)), "never"])
    handle = a.start("slow")
    handle.cancel(mode="after_step")
    result = await handle.result()
    assert result.status == "cancelled"
    assert CALLS == [("slow_echo", "x")]
    assert len(model.calls) == 1
    assert [m.role for m in result.messages] == ["user", "assistant", "tool"]


async def test_outer_asyncio_cancel_propagates_and_records() -> None:
    a, _ = agent([reply("", call("slow_echo", text="x", delay=5))])
    task = asyncio.create_task(a.run("slow"))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_model_error_fails_the_run_cleanly() -> None:
    from thinkloop.errors import ModelConnectionError

    a, _ = agent([ModelConnectionError("cannot reach http://x")])
    result = await a.run("x")
    assert result.status == "failed"
    assert result.error == "ModelConnectionError: cannot reach http://x"


class City(BaseModel):
    name: str
    population: int


async def test_structured_output_validated_after_retry() -> None:
    fenced = '```json\n{"name": "Paris", "population": 2102650}\n```'
    a, model = agent(['{"name": "Paris"}', fenced], output_type=City)
    result = await a.run("Biggest French city?")
    assert result.output == City(name="Paris", population=2102650)
    assert "population: Field required" in model.calls[1].messages[-1].content
    assert "JSON schema" in model.calls[0].messages[0].content


async def test_structured_output_gives_up_after_retries() -> None:
    a, _ = agent(["nope", "still no", "no"], output_type=City, output_retries=2)
    result = await a.run("x")
    assert result.status == "failed" and "OutputValidationError" in (result.error or "")


async def test_events_in_order_with_payloads() -> None:
    events: list[Event] = []
    model = ScriptedModel([reply("thinking", call("add", a=2, b=3), thought="need math"), "5"])
    a = Agent(model, tools=[add], on_event=events.append, guard=BARE)
    result = await a.run("2+3")
    types = [e.type for e in events]
    assert types == [
        "run.started", "llm.request", "llm.response", "tool.call", "tool.result",
        "step.completed", "llm.request", "llm.response", "step.completed", "run.completed",
    ]
    assert {e.run_id for e in events} == {result.run_id}
    by = {e.type: e for e in events}
    assert by["run.started"].payload == {"task": "2+3", "model": "scripted"}
    assert by["tool.call"].payload == {"id": result.steps[0].tool_calls[0].id, "name": "add",
                                       "arguments": {"a": 2, "b": 3}}
    assert by["tool.result"].payload["content"] == "5"
    assert by["tool.result"].payload["is_error"] is False
    assert events[2].payload["thought"] == "need math"
    assert by["run.completed"].payload["status"] == "completed"
    assert by["run.completed"].payload["output"] == "5"
    assert [e.step for e in events[:6]] == [0, 0, 0, 0, 0, 0]
    assert events[6].step == 1
    assert all(a.ts <= b.ts for a, b in itertools.pairwise(events))


async def test_stream_yields_chunks_then_completion() -> None:
    a, _ = agent(["Hello there, world"])
    events = [e async for e in a.stream("hi")]
    chunks = "".join(e.payload["content"] for e in events if e.type == "chunk")
    assert chunks == "Hello there, world"
    assert events[-1].type == "run.completed"


async def test_sessions_continue_and_failed_runs_leave_no_trace() -> None:
    from thinkloop.errors import ModelConnectionError

    model = ScriptedModel(["hi Ann", ModelConnectionError("down"), "your name is Ann"])
    a = Agent(model, guard=BARE)
    await a.run("I am Ann", session="s1")
    failed = await a.run("lost turn", session="s1")
    assert failed.status == "failed"
    await a.run("what is my name?", session="s1")
    sent = [m.content for m in model.calls[2].messages]
    assert sent[1:] == ["I am Ann", "hi Ann", "what is my name?"]


def test_run_sync_in_plain_code() -> None:
    a, _ = agent(["sync ok"])
    assert a.run_sync("x").output == "sync ok"


def test_bad_model_string_is_one_clear_error() -> None:
    from thinkloop.errors import UnknownModelError

    with pytest.raises(UnknownModelError, match="unknown model provider 'nope'"):
        Agent("nope:model")


async def test_guards_are_on_by_default() -> None:
    events: list[Event] = []
    model = ScriptedModel([reply("", call("add", a=1, b=1)), reply("", call("add", a=1, b=1)),
                           "2"])
    result = await Agent(model, tools=[add], on_event=events.append).run("what is 1+1?")
    types = [e.type for e in events]
    assert "budget.assigned" in types  # the step budget sized the run
    # the repeated identical call was answered from the first result, not run again
    assert CALLS == [("add", (1, 1))]
    assert result.steps[1].results[0].content == (
        "2\n\n[Note: you already made this exact call (add with the same arguments) in step 1; "
        "this is that result. Do not repeat it.]")


async def test_a_reply_whose_model_cut_its_input_is_an_input_cut_event() -> None:
    from thinkloop.types import ModelResponse

    cut = ModelResponse(Message.assistant("short answer"), Usage(1, 10, 5), "stop", "local",
                        cut_chars=12_345, window=4096)
    for stream in (False, True):
        events: list[Event] = []
        a = Agent(ScriptedModel(["fine", cut]), on_event=events.append, guard=BARE)
        await a.run("first", session="s")
        assert "model.input_cut" not in [e.type for e in events]  # nothing cut: no event
        result = await a.start("second", session="s", stream_model=stream).result()
        found = [e for e in events if e.type == "model.input_cut"]
        assert [e.payload for e in found] == [{"model": "local", "window": 4096,
                                               "chars": 12_345}]
        assert found[0].run_id == result.run_id and result.text == "short answer"
