"""OrcBot's message discipline with the real send_message tool over a callback channel."""

from __future__ import annotations

from dataclasses import replace

from thinkloop.core.channel import CallbackChannel, Outgoing
from thinkloop.guard import (
    ApprovalSettings,
    AutoApprove,
    GuardSettings,
    MessageSettings,
    ReviewSettings,
    StepBudgetSettings,
)
from thinkloop.guard.messages import channel_tools
from thinkloop.models.scripted import call, reply
from thinkloop.tools.base import Tool, tool
from thinkloop.tools.builtin.messaging import messaging_tools

from .helpers import run_agent


@tool
def work(i: int) -> str:
    """Do a unit of work."""
    return f"w{i}"


@tool
def parse(i: int) -> str:
    """Parse a batch."""
    return f"p{i}"


@tool
def save(i: int) -> str:
    """Save a batch."""
    return f"s{i}"


# send_message needs a person's approval; here everything is approved.
APPROVED = replace(GuardSettings(), approval=ApprovalSettings(AutoApprove()))


def flood(n: int) -> object:
    """One step sending n messages at once."""
    return reply("", *(call("send_message", text=f"m{i}") for i in range(n)))


def channel() -> tuple[list[str], list[Tool]]:
    sent: list[str] = []

    async def on_send(message: Outgoing) -> None:
        sent.append(message.text)

    return sent, messaging_tools([CallbackChannel(on_send, name="chat")])


def test_channel_tools_are_detected_by_name() -> None:
    assert channel_tools(None, ["work", "send_message", "send_email", "resend"]) == (
        "send_message", "send_email")
    assert channel_tools((), ["send_message"]) == ()
    assert channel_tools(("notify",), ["notify", "send_message"]) == ("notify",)


async def test_at_most_ten_messages_per_run_by_default() -> None:
    sent, tools = channel()
    script = [flood(12), "All twelve updates attempted; two were over the limit."]
    run = await run_agent(script, "Send me twelve short status updates.", tools=tools,
                          guard=APPROVED)
    assert sorted(sent) == sorted(f"m{i}" for i in range(10))
    denied = [e.payload for e in run.of("policy.denied")]
    assert [d["guard"] for d in denied] == ["max_messages", "max_messages"]
    last = run.result.steps[0].results[11]
    assert last.is_error and last.content.startswith("Message limit reached: at most 10")


async def test_time_capsule_allows_twenty_for_admins() -> None:
    sent, tools = channel()
    script = [flood(11), flood(11), "done"]  # at most 16 calls run per reply
    guard = replace(APPROVED, steps=StepBudgetSettings(time_capsule=True,
                                                       admins=frozenset({"root"})))
    run = await run_agent(script, "Long job with updates", tools=tools, guard=guard,
                          user_id="root")
    assert len(sent) == 20
    assert len(run.of("policy.denied")) == 2
    sent2, tools2 = channel()
    await run_agent([flood(12), "done"], "Long job with updates", tools=tools2, guard=guard,
                    user_id="mallory")
    assert len(sent2) == 10  # not an admin: the ordinary limit


async def test_configured_limit_and_other_tools_unaffected() -> None:
    sent, tools = channel()
    guard = replace(APPROVED, messages=MessageSettings(max_per_run=1))
    script = [reply("", call("send_message", text="a")), reply("", call("work", i=1)),
              reply("", call("send_message", text="b")), "w1 done, sent a"]
    run = await run_agent(script, "work and report", tools=[*tools, work], guard=guard,
                          max_steps=10)
    assert sent == ["a"]
    assert [r.content for s in run.result.steps for r in s.results][:2] == [
        "message sent via chat", "w1"]


async def test_transparency_nudge_turns_on_with_a_channel_tool() -> None:
    _, tools = channel()
    names = ["work", "parse", "save"] * 2
    script = [reply("", call(n, i=i)) for i, n in enumerate(names)] + ["six steps finished"]
    run = await run_agent(script, "Process the six batches",
                          tools=[work, parse, save, *tools], max_steps=20)
    nudges = [e.payload for e in run.of("nudge") if e.payload["kind"] == "transparency"]
    assert nudges and nudges[0]["silent_steps"] == 5
    assert "TRANSPARENCY ALERT" in run.model.calls[5].messages[-1].content
    # Without a channel tool there is nobody to update: no nudge.
    run = await run_agent(script, "Process the six batches", tools=[work, parse, save],
                          max_steps=20)
    assert [e for e in run.of("nudge") if e.payload["kind"] == "transparency"] == []


async def test_no_send_blocks_a_channel_task_until_something_is_sent() -> None:
    sent, tools = channel()
    guard = replace(APPROVED, review=ReviewSettings(channel_task=True))
    script = ["The weather in Paris is 8C.",
              reply("", call("send_message", text="Paris: 8C, partly cloudy.")),
              "Sent the Paris weather."]
    run = await run_agent(script, "Find the weather in Paris and send it to me", tools=tools,
                          guard=guard, max_steps=10)
    assert sent == ["Paris: 8C, partly cloudy."]
    (blocked,) = [e.payload for e in run.of("review.blocked")]
    assert blocked["codes"] == ["NO_SEND"] and "send_message" in blocked["reason"]
    assert run.result.text == "Sent the Paris weather."
    # Not a channel task (the default): the answer itself is delivered, nothing blocks.
    run = await run_agent(["The weather in Paris is 8C."], "Weather in Paris?", tools=tools)
    assert run.of("review.blocked") == []
