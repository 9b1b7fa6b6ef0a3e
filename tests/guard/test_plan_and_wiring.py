from __future__ import annotations

from dataclasses import replace

from thinkloop import Agent
from thinkloop.guard import GuardSettings, PlanSettings, ToolPolicy, default_hooks
from thinkloop.models.scripted import ScriptedModel

from .helpers import run_agent


async def test_pre_task_plan_goes_into_the_system_prompt() -> None:
    guard = replace(GuardSettings.off(), plan=PlanSettings(enabled=True))
    run = await run_agent(["1. search\n2. answer", "Paris."], "Capital of France?", guard=guard)
    plan_call, main_call = run.model.calls
    assert plan_call.tools == () and plan_call.messages[1].content == "Capital of France?"
    system = main_call.messages[0].content
    assert system.endswith("\n\nPLAN (made before starting):\n1. search\n2. answer")
    assert run.of("plan.created")[0].payload == {"plan": "1. search\n2. answer"}
    assert run.result.usage.requests == 2
    # The side call went out as the run's own llm events, marked with its purpose.
    side = [e.payload for e in run.of("llm.request", "llm.response") if "purpose" in e.payload]
    assert [p["purpose"] for p in side] == ["plan", "plan"]
    assert side[1]["text"] == "1. search\n2. answer"


def test_default_hooks_follow_the_seeds() -> None:
    names = [h.name for h in default_hooks(GuardSettings())]
    assert names == [
        "guard.input", "guard.external", "guard.steps", "guard.steps.extend",
        "guard.steps.cleanup", "guard.drift", "guard.rounds", "guard.rounds.learn",
        "guard.nudges",
        "guard.loops",
        "guard.loops.cleanup", "guard.messages", "guard.messages.cleanup",
        "guard.provenance", "guard.provenance.observe", "guard.provenance.cleanup",
        "guard.policy",
        "guard.review", "guard.review.cleanup"]
    off = [h.name for h in default_hooks(GuardSettings.off())]
    assert off == ["guard.input", "guard.policy"]
    # Only what is configured: a policy that can refuse tools by name hides them before
    # each model call, one with rate limits counts calls per run.
    limited = GuardSettings.off()
    limited = replace(limited, policy=ToolPolicy(deny=("rm*",), rate_limits={"fetch": 2}))
    assert [h.name for h in default_hooks(limited)] == [
        "guard.input", "guard.policy.tools", "guard.policy", "guard.policy.cleanup"]


def test_agent_installs_guards_before_user_hooks() -> None:
    def mine(ctx: object) -> None:
        return None

    # store="memory": no run records, so no checkpoint or tracing hooks after the user's.
    a = Agent(ScriptedModel([]), guard=GuardSettings(), hooks={"pre_tool": [mine]},
              plugins=False, store="memory")
    assert [h.name or "user" for h in a.hooks.by_stage["pre_tool"]] == [
        "guard.loops", "guard.messages", "guard.provenance", "guard.policy", "user"]
    default = Agent(ScriptedModel([]), hooks={"pre_tool": [mine]}, plugins=False,
                    store="memory")
    assert [h.name or "user" for h in default.hooks.by_stage["pre_tool"]] == [
        "guard.loops", "guard.messages", "guard.provenance", "guard.policy", "user"], \
        "guards are on by default"
    plain = Agent(ScriptedModel([]), hooks={"pre_tool": [mine]}, plugins=False, guard=False,
                  store="memory")
    assert len(plain.hooks.by_stage["pre_tool"]) == 1 and plain.limits.max_steps == 12


async def test_per_run_memory_is_released() -> None:
    from thinkloop.guard import LoopGuard

    guard = LoopGuard()
    from thinkloop.models.scripted import call, reply
    from thinkloop.tools.base import tool

    @tool
    def t() -> str:
        """T."""
        return "x"

    a = Agent(ScriptedModel([reply("", call("t")), "x"]), tools=[t], hooks=guard.hooks(),
              plugins=False)
    await a.run("go")
    assert len(guard.runs) == 0
