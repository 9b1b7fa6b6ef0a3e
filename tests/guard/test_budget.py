from __future__ import annotations

from dataclasses import replace

import pytest

from thinkloop.guard import GuardSettings, StepBudgetSettings, classify
from thinkloop.models.scripted import call, reply
from thinkloop.tools.base import tool

from .helpers import run_agent


@pytest.mark.parametrize(("task", "expected"), [
    ("What's 2+2?", "trivial"),
    ("ping", "trivial"),
    ("Search for news about Rust", "simple"),
    ("Find the weather in Paris and send it to me on Telegram", "simple"),
    ("Research the history of the printing press and summarise it", "standard"),
    ("First search for flights, then compare prices, then book the cheapest", "complex"),
    ("Build a full app with a login page", "complex"),
    ("word " * 90, "complex"),
])
def test_heuristic_classifier(task: str, expected: str) -> None:
    assert classify(task) == expected


@tool
def step(i: int) -> str:
    """One step."""
    return f"step {i}"


def budget_only(**kw: object) -> GuardSettings:
    return replace(GuardSettings.off(), steps=StepBudgetSettings(**kw))  # type: ignore[arg-type]


def steps(n: int) -> list[object]:
    return [reply("", call("step", i=i)) for i in range(n)] + ["final"]


async def test_trivial_task_gets_three_steps_and_lean_mode() -> None:
    run = await run_agent(steps(10), "ping", tools=[step],
                          guard=budget_only(extend_on_progress=False))
    assert run.result.status == "max_steps" and len(run.result.steps) == 4  # 3 + forced answer
    assert run.guard_events == [("budget.assigned", {
        "complexity": "trivial", "max_steps": 3, "lean": True, "mode": "lean",
        "source": "heuristic"})]


async def test_simple_task_gets_eight() -> None:
    run = await run_agent(steps(20), "Search for news about Rust", tools=[step],
                          guard=budget_only(extend_on_progress=False))
    assert len(run.result.steps) == 9
    assert run.of("budget.assigned")[0].payload["lean"] is False


async def test_a_run_making_progress_gets_the_next_budget_once() -> None:
    run = await run_agent(steps(20), "Search for news about Rust", tools=[step],
                          guard=budget_only())
    assert len(run.result.steps) == 16 and run.result.status == "max_steps"
    assert [e.payload for e in run.of("budget.extended")] == [
        {"max_steps": 15, "reason": "progress"}]


async def test_a_run_repeating_itself_is_not_extended() -> None:
    same = [reply("", call("step", i=i % 2)) for i in range(10)] + ["final"]
    run = await run_agent(same, "Search for news about Rust", tools=[step],
                          guard=budget_only())
    assert len(run.result.steps) == 9 and run.of("budget.extended") == []


async def test_explicit_max_steps_wins() -> None:
    run = await run_agent(steps(10), "ping", tools=[step], guard=budget_only(), max_steps=5)
    assert len(run.result.steps) == 6 and run.of("budget.assigned") == []


async def test_model_classification_is_one_extra_call() -> None:
    run = await run_agent(["complex.", *steps(0)], "ping", tools=[step],
                          guard=budget_only(use_model=True))
    assert run.of("budget.assigned")[0].payload["complexity"] == "complex"
    assert run.of("budget.assigned")[0].payload["source"] == "model"
    assert run.model.calls[0].tools == () and run.result.usage.requests == 2
    run = await run_agent(["no idea", *steps(0)], "ping", tools=[step],
                          guard=budget_only(use_model=True))
    assert run.of("budget.assigned")[0].payload["source"] == "heuristic"


async def test_time_capsule_for_admins_only() -> None:
    guard = budget_only(time_capsule=True, admins=frozenset({"root"}), extend_on_progress=False)
    run = await run_agent(steps(60), "ping", tools=[step], guard=guard, user_id="root")
    assert len(run.result.steps) == 51
    assert run.of("budget.assigned")[0].payload["mode"] == "time_capsule"
    run = await run_agent(steps(60), "ping", tools=[step], guard=guard, user_id="bob")
    assert len(run.result.steps) == 4
    assert run.of("policy.denied")[0].payload == {
        "guard": "time_capsule", "user_id": "bob",
        "reason": "time-capsule mode is for admin users only"}
