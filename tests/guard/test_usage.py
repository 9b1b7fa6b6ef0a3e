from __future__ import annotations

from dataclasses import replace

from thinkloop.guard import GuardSettings, UsageLimits
from thinkloop.models.scripted import call, reply
from thinkloop.tools.base import tool
from thinkloop.types import Usage

from .helpers import run_agent

RAN: list[int] = []


@tool
def work(n: int) -> str:
    """Do some work."""
    RAN.append(n)
    return f"did {n}"


def limited(**kw: object) -> GuardSettings:
    return replace(GuardSettings.off(), limits=UsageLimits(**kw))  # type: ignore[arg-type]


def script(n: int) -> list[object]:
    return [reply(f"progress {i}", call("work", n=i)) for i in range(n)] + ["all done: 0..n"]


async def test_model_call_cap_ends_with_best_answer() -> None:
    RAN.clear()
    run = await run_agent(script(5), tools=[work], guard=limited(max_model_calls=2),
                          max_steps=10)
    assert run.result.status == "budget_exceeded"
    assert len(run.model.calls) == 2 and RAN == [0, 1]
    assert run.result.text == "progress 1" and run.result.output == "progress 1"
    assert run.result.error == "usage limit reached: model_calls 2 of 2"
    assert run.guard_events == [("guard.blocked", {
        "guard": "budget", "limit": "model_calls", "used": 2, "cap": 2,
        "reason": "usage limit reached: model_calls 2 of 2"})]
    # The interrupted history stays consistent: nothing is left unanswered.
    assert run.result.messages[-1].role == "tool"


async def test_tool_call_cap() -> None:
    RAN.clear()
    run = await run_agent(script(5), tools=[work], guard=limited(max_tool_calls=3), max_steps=10)
    assert run.result.status == "budget_exceeded" and RAN == [0, 1, 2]
    assert run.of("guard.blocked")[0].payload["limit"] == "tool_calls"


async def test_token_and_cost_caps() -> None:
    RAN.clear()
    costly = [reply("step", call("work", n=i), usage=Usage(1, 100, 50, 0.01)) for i in range(5)]
    run = await run_agent([*costly, "x"], tools=[work], guard=limited(max_input_tokens=250),
                          max_steps=10)
    assert run.result.status == "budget_exceeded" and len(run.model.calls) == 3
    run = await run_agent([*costly, "x"], tools=[work], guard=limited(max_output_tokens=100),
                          max_steps=10)
    assert len(run.model.calls) == 2
    run = await run_agent([*costly, "x"], tools=[work], guard=limited(max_cost_usd=0.025),
                          max_steps=10)
    assert len(run.model.calls) == 3
    assert run.of("guard.blocked")[0].payload["limit"] == "cost_usd"


async def test_under_the_caps_nothing_happens() -> None:
    run = await run_agent(script(1), tools=[work], guard=limited(max_model_calls=5,
                                                                 max_tool_calls=5))
    assert run.result.status == "completed" and run.guard_events == []
