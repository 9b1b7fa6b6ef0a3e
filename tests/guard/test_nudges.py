from __future__ import annotations

from dataclasses import replace

from thinkloop.guard import GuardSettings, NudgeSettings, StepBudgetSettings
from thinkloop.models.scripted import call, reply
from thinkloop.tools.base import tool

from .helpers import run_agent


@tool
def work(i: int) -> str:
    """Work."""
    return f"w{i}"


@tool
def send_message(text: str) -> str:
    """Tell the user something."""
    return "sent"


def nudges(**kw: object) -> GuardSettings:
    # Only these nudges: the per-round follow-ups have tests of their own (test_tool_rounds).
    kw = {"escalate_from": 0, "hints": False, **kw}
    return replace(GuardSettings.off(), nudges=NudgeSettings(**kw))  # type: ignore[arg-type]


async def test_urgency_nudge_on_last_two_steps_without_touching_history() -> None:
    script = [reply("", call("work", i=i)) for i in range(4)] + ["final answer"]
    run = await run_agent(script, tools=[work], guard=nudges(), max_steps=4)
    last = [c.messages[-1].content for c in run.model.calls]
    assert [m.startswith("[Urgent]") for m in last] == [False, False, True, True, False]
    assert last[2].startswith("[Urgent] Only 2 step(s) left") and "Only 1 step(s)" in last[3]
    assert [p for t, p in run.guard_events] == [{"kind": "urgency", "remaining": 2},
                                                {"kind": "urgency", "remaining": 1}]
    # The nudge went to the request only: the stored history never holds it.
    assert all("[Urgent]" not in m.content for m in run.result.messages)
    assert len(run.model.calls[3].messages) == len(run.model.calls[2].messages) + 2


async def test_urgency_follows_the_step_budget() -> None:
    guard = replace(nudges(), steps=StepBudgetSettings())
    run = await run_agent([reply("", call("work", i=1)), "w1"], "ping", tools=[work], guard=guard)
    assert [t for t, _ in run.guard_events] == ["budget.assigned", "nudge"]


async def test_transparency_nudge_after_silent_steps_in_channel_mode() -> None:
    script = [reply("", call("work", i=i)) for i in range(3)]
    script += [reply("", call("send_message", text="progress")), reply("", call("work", i=9)),
               "done: w0 w1 w2 w9"]
    run = await run_agent(script, tools=[work, send_message], max_steps=20,
                          guard=nudges(urgency=False, channel_tools=("send_message",),
                                       transparency_after=2))
    kinds = [(p["kind"], p["silent_steps"], e.step) for e in run.of("nudge")
             for p in [e.payload]]
    assert kinds == [("transparency", 2, 2), ("transparency", 3, 3)]
    assert run.model.calls[2].messages[-1].content.startswith(
        "⚡ TRANSPARENCY ALERT: You have been working for 2 steps")


async def test_no_channel_tools_no_transparency_nudge() -> None:
    script = [reply("", call("work", i=i)) for i in range(6)] + ["w"]
    run = await run_agent(script, tools=[work], guard=nudges(urgency=False), max_steps=20)
    assert run.of("nudge") == []
