"""The Guard protocol: the default guards are a list of Guards, and a guard of your own is
one small class whose hooks an agent runs like the built-in ones."""

from __future__ import annotations

from thinkloop import Agent
from thinkloop.guard import (
    GuardSettings,
    InputGuard,
    LoopGuard,
    ToolGate,
    default_guards,
    default_hooks,
)
from thinkloop.guard.base import Guard
from thinkloop.hooks import Hook, ToolHookContext
from thinkloop.models.scripted import ScriptedModel, call, reply
from thinkloop.tools.base import tool
from thinkloop.types import ToolResult


def test_the_default_guards_are_guards_in_the_order_their_hooks_run() -> None:
    guards = default_guards(GuardSettings())
    assert all(isinstance(g, Guard) for g in guards)
    assert [type(g).__name__ for g in guards] == [
        "InputGuard", "StepBudget", "GoalDrift", "RoundFollowUps", "Nudges", "LoopGuard",
        "MessageLimit",
        "ProvenanceGate", "ToolGate", "TerminationReview"]
    assert [h.name for g in guards for h in g.hooks()] == [
        h.name for h in default_hooks(GuardSettings())]


def test_with_every_guard_off_the_input_guard_and_the_tool_gate_stay() -> None:
    assert [type(g) for g in default_guards(GuardSettings.off())] == [InputGuard, ToolGate]


def test_settings_pick_guards_and_fixed_steps_reaches_the_budget() -> None:
    s = GuardSettings()
    on = default_guards(s, fixed_steps=True)
    budget = next(g for g in on if type(g).__name__ == "StepBudget")
    assert budget.fixed_steps is True  # type: ignore[attr-defined]
    assert LoopGuard in {type(g) for g in on}
    approvals = [g for g in on if type(g).__name__ in ("ProvenanceGate", "ToolGate")]
    assert len({id(g.approval) for g in approvals}) == 1  # type: ignore[attr-defined]


class NoDeletes:
    """A guard of one's own: refuses any call to a tool whose name starts with 'delete'."""

    def __init__(self) -> None:
        self.refused: list[str] = []

    def hooks(self) -> list[Hook]:
        return [Hook("pre_tool", self.check, name="mine.no_deletes")]

    def check(self, ctx: ToolHookContext) -> None:
        if ctx.call is not None and ctx.call.name.startswith("delete"):
            self.refused.append(ctx.call.name)
            ctx.result = ToolResult(ctx.call, "deleting is not allowed here", is_error=True)


async def test_a_guard_of_ones_own_runs_with_the_default_guards() -> None:
    deleted: list[str] = []

    @tool
    def delete_note(title: str) -> str:
        """Delete a note."""
        deleted.append(title)
        return "deleted"

    guard = NoDeletes()
    assert isinstance(guard, Guard)
    model = ScriptedModel([reply("", call("delete_note", title="groceries")), "I could not."])
    async with Agent(model, tools=[delete_note], hooks=guard.hooks(), store="memory") as agent:
        result = await agent.run("Delete my groceries note.")
    assert deleted == []
    assert guard.refused == ["delete_note"]
    assert result.steps[0].results[0].content == "deleting is not allowed here"
    assert [h.name for h in agent.hooks.by_stage["pre_tool"]][-1] == "mine.no_deletes"
