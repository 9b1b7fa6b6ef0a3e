from __future__ import annotations

from dataclasses import replace

from thinkloop.guard import GuardSettings, LoopSettings
from thinkloop.guard.loops import loop_pattern
from thinkloop.models.scripted import call, reply
from thinkloop.tools.base import tool

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


async def test_same_result_coming_back_is_a_loop() -> None:
    RAN.clear()
    script = [reply("", call("status", job=str(i))) for i in range(4)]
    run = await run_agent([*script, "still pending"], tools=[status], guard=only_loops(),
                          max_steps=10)
    assert RAN == [("status", "0"), ("status", "1"), ("status", "2")]
    assert run.result.steps[3].results[0].content.startswith(
        "Loop detected: status returned the same result in each of the last 3 steps.")
    assert run.result.status == "completed"


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
