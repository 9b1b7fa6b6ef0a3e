from __future__ import annotations

from dataclasses import replace

from thinkloop.channels import CallbackChannel, Outgoing
from thinkloop.guard import (
    ApprovalSettings,
    AutoApprove,
    GuardSettings,
    LoopSettings,
    MessageSettings,
)
from thinkloop.guard.loops import loop_pattern
from thinkloop.models.scripted import call, reply
from thinkloop.tools.base import tool
from thinkloop.tools.builtin.messaging import messaging_tools

from .helpers import run_agent

RAN: list[tuple[str, object]] = []


@tool
def lookup(q: str) -> str:
    """Look something up."""
    RAN.append(("lookup", q))
    return f"answer about {q}"


@tool
def other(q: str) -> str:
    """Another tool."""
    RAN.append(("other", q))
    return f"other {q}"


@tool(idempotent=False)
def roll() -> str:
    """Not safe to answer from a cache."""
    RAN.append(("roll", None))
    return f"rolled {len(RAN)}"


@tool
def flaky(q: str) -> str:
    """Fails the first time."""
    RAN.append(("flaky", q))
    if len(RAN) == 1:
        raise RuntimeError("transient")
    return "ok now"


def only_loops(**kw: object) -> GuardSettings:
    return replace(GuardSettings.off(), loops=LoopSettings(**kw))  # type: ignore[arg-type]


def strict() -> GuardSettings:
    """The seed's rule: the same tool three steps in a row is a loop."""
    return only_loops(rule="same_tool")


@tool(idempotent=False)
def toggle(q: str) -> str:
    """Changes something, so a repeat is not answered from a cache."""
    RAN.append(("toggle", q))
    return f"toggled {q}"


@tool
def status(job: str) -> str:
    """Always says the same."""
    RAN.append(("status", job))
    return "pending"


def test_loop_patterns() -> None:
    x1, x2 = frozenset({'lookup:{"q":"1"}'}), frozenset({'lookup:{"q":"2"}'})
    assert loop_pattern([x1, x1, x1], 'lookup:{"q":"1"}', 3) == (
        "lookup was called with the same arguments in each of the last 3 steps")
    assert loop_pattern([x1, x2, x1], 'lookup:{"q":"2"}', 3) == (
        "the steps cycle between lookup and lookup")
    assert loop_pattern([x1, x2, x1], 'lookup:{"q":"3"}', 3) is None
    a, b = frozenset({"a"}), frozenset({"b"})
    assert loop_pattern([a, a, a], "a", 3) == "a was called in each of the last 3 steps"
    assert loop_pattern([a, a], "a", 3) is None
    assert loop_pattern([b, a, a], "a", 3) is None
    assert loop_pattern([a, b, a], "b", 3) == "the steps cycle between a and b"
    assert loop_pattern([a, b, b], "a", 3) is None
    assert loop_pattern([frozenset({"a", "b"}), b, frozenset({"a", "b"})], "b", 3) is None


async def test_identical_call_answered_from_first_result() -> None:
    RAN.clear()
    first, second = call("lookup", q="x"), call("lookup", q="x")
    run = await run_agent([reply("", first), reply("", second), "answer about x"],
                          tools=[lookup], guard=only_loops())
    assert RAN == [("lookup", "x")]
    res = run.result.steps[1].results[0]
    assert res.content == ("answer about x\n\n[Note: you already made this exact call (lookup "
                           "with the same arguments) in step 1; this is that result. Do not "
                           "repeat it.]")
    assert not res.is_error
    assert [(t, p["guard"], p["id"]) for t, p in run.guard_events] == [
        ("guard.blocked", "duplicate", second.id)]
    # The repeat took the tools away: the third reply had none and was told to answer.
    assert [len(c.tools) for c in run.model.calls] == [1, 1, 0]
    assert run.model.calls[2].messages[-1].content.startswith("You repeated a call whose result")
    assert run.result.status == "completed" and run.result.text == "answer about x"


async def test_repeat_answered_even_if_the_model_calls_again() -> None:
    """A model that still writes a call when it has no tools answers with what it asked for."""
    RAN.clear()
    again = [reply("", call("lookup", q="x")) for _ in range(3)]
    run = await run_agent(again, tools=[lookup], guard=only_loops())
    assert RAN == [("lookup", "x")]
    assert run.result.status == "completed"
    assert run.result.text == "answer about x"
    assert len(run.model.calls) == 3
    # The session would keep the answer, not a dangling call.
    assert run.result.messages[-1].tool_calls == ()


async def test_repeat_after_a_state_change_runs_again() -> None:
    RAN.clear()
    script = [reply("", call("lookup", q="x")), reply("", call("toggle", q="x")),
              reply("", call("lookup", q="x")), "done"]
    run = await run_agent(script, tools=[lookup, toggle], guard=only_loops())
    assert RAN == [("lookup", "x"), ("toggle", "x"), ("lookup", "x")]
    assert run.of("guard.blocked") == [] and run.result.status == "completed"


async def test_new_arguments_every_step_is_progress() -> None:
    RAN.clear()
    script = [reply("", call("lookup", q=str(i))) for i in range(10)]
    run = await run_agent([*script, "all ten"], tools=[lookup], guard=only_loops(),
                          max_steps=12)
    assert [("lookup", str(i)) for i in range(10)] == RAN
    assert run.result.status == "completed" and run.of("guard.blocked") == []


async def test_same_result_for_new_arguments_is_progress() -> None:
    """Every job says "pending": each is a different call, so none is a loop."""
    RAN.clear()
    script = [reply("", call("status", job=str(i))) for i in range(6)]
    run = await run_agent([*script, "all pending"], tools=[status], guard=only_loops(),
                          max_steps=10)
    assert [("status", str(i)) for i in range(6)] == RAN
    assert run.of("guard.blocked") == [] and run.result.status == "completed"


@tool(idempotent=False)
def poll(job: str) -> str:
    """Polls a job (never answered from a cache); this one never finishes."""
    RAN.append(("poll", job))
    return "pending"


async def test_same_result_for_the_same_arguments_again_and_again_is_a_loop() -> None:
    """Polling one job between other calls: the third identical answer to the same call
    stops the fourth."""
    RAN.clear()
    script = []
    for i in range(4):
        script += [reply("", call("poll", job="7")), reply("", call("toggle", q=str(i)))]
    run = await run_agent([*script, "gave up"], tools=[poll, toggle], guard=only_loops(),
                          max_steps=12)
    assert [r for r in RAN if r[0] == "poll"] == [("poll", "7")] * 3
    assert run.result.steps[6].results[0].content.startswith(
        "Loop detected: poll returned the same result for the same arguments the last 3 "
        "times it was called.")


async def test_twelve_different_messages_in_a_row_are_all_delivered() -> None:
    """send_message's result is the same text every time; each message is new (issue 30:
    every fourth was taken for a loop and dropped)."""
    sent: list[str] = []

    async def on_send(message: Outgoing) -> None:
        sent.append(message.text)

    approved = replace(GuardSettings(), approval=ApprovalSettings(AutoApprove()),
                       messages=MessageSettings(max_per_run=20))
    script = [reply("", call("send_message", text=f"update {i}")) for i in range(12)]
    run = await run_agent([*script, "sent them all"],
                          tools=messaging_tools([CallbackChannel(on_send, name="chat")]),
                          guard=approved, max_steps=14)
    assert sent == [f"update {i}" for i in range(12)]
    assert run.of("guard.blocked") == [] and run.result.status == "completed"


async def test_identical_calls_to_a_changing_tool_are_a_loop() -> None:
    RAN.clear()
    script = [reply("", call("toggle", q="x")) for _ in range(6)]
    run = await run_agent([*script, "never"], tools=[toggle], guard=only_loops(), max_steps=10)
    assert RAN == [("toggle", "x")] * 3
    assert run.result.status == "loop_detected"
    assert run.result.error == ("loop detected twice: toggle was called with the same "
                                "arguments in each of the last 3 steps")


async def test_abab_cycle_of_identical_calls() -> None:
    RAN.clear()
    script = [reply("", call("toggle", q="1")), reply("", call("roll")),
              reply("", call("toggle", q="1")), reply("", call("roll")), "done"]
    run = await run_agent(script, tools=[toggle, roll], guard=only_loops(), max_steps=10)
    assert RAN == [("toggle", "1"), ("roll", None), ("toggle", "1")]
    assert run.result.steps[3].results[0].content.startswith(
        "Loop detected: the steps cycle between toggle and roll.")


async def test_same_step_duplicate_runs_once() -> None:
    RAN.clear()
    a, b = call("lookup", q="y"), call("lookup", q="y")
    run = await run_agent([reply("", a, b), "answer about y"], tools=[lookup],
                          guard=only_loops())
    assert RAN == [("lookup", "y")]
    assert run.result.steps[0].results[1].content == (
        f"[Note: duplicate of call {a.id} in this same step, which has the result; this copy "
        "was not run.]")


async def test_non_idempotent_tool_runs_every_time() -> None:
    RAN.clear()
    run = await run_agent([reply("", call("roll")), reply("", call("roll")), "rolled twice"],
                          tools=[roll], guard=only_loops())
    assert RAN == [("roll", None), ("roll", None)]
    assert run.of("guard.blocked") == []


async def test_errored_call_may_be_retried() -> None:
    RAN.clear()
    await run_agent([reply("", call("flaky", q="z")), reply("", call("flaky", q="z")), "ok now"],
                    tools=[flaky], guard=only_loops())
    assert RAN == [("flaky", "z"), ("flaky", "z")]


async def test_strict_same_tool_repeated_gets_loop_observation_then_recovers() -> None:
    RAN.clear()
    script = [reply("", call("lookup", q=str(i))) for i in range(4)]
    run = await run_agent([*script, reply("", call("other", q="x")), "answer about 0-2, other x"],
                          tools=[lookup, other], guard=strict(), max_steps=10)
    assert RAN == [("lookup", "0"), ("lookup", "1"), ("lookup", "2"), ("other", "x")]
    blocked = run.result.steps[3].results[0]
    assert blocked.content.startswith(
        "Loop detected: lookup was called in each of the last 3 steps. This call was not run.")
    assert run.result.status == "completed"
    assert [p["guard"] for _, p in run.guard_events] == ["loop"]


async def test_strict_still_looping_ends_run_loop_detected() -> None:
    RAN.clear()
    script = [reply("", call("lookup", q=str(i))) for i in range(6)]
    run = await run_agent([*script, "never"], tools=[lookup], guard=strict(), max_steps=10)
    assert run.result.status == "loop_detected"
    assert run.result.error == "loop detected twice: lookup was called in each of the last 3 steps"
    assert len(RAN) == 3 and len(run.model.calls) == 5
    assert [(p["guard"], p.get("final", False)) for _, p in run.guard_events] == [
        ("loop", False), ("loop", True)]


async def test_strict_abab_cycle_detected() -> None:
    RAN.clear()
    script = [reply("", call("lookup", q="1")), reply("", call("other", q="1")),
              reply("", call("lookup", q="2")), reply("", call("other", q="2")),
              "answer about 1 and 2"]
    run = await run_agent(script, tools=[lookup, other], guard=strict(), max_steps=10)
    assert RAN == [("lookup", "1"), ("other", "1"), ("lookup", "2")]
    assert run.result.steps[3].results[0].content.startswith(
        "Loop detected: the steps cycle between lookup and other.")
    assert run.result.status == "completed"
