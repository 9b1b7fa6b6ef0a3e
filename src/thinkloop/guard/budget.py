"""Step budget (OrcBot): classify the task, then give it 3/8/15/25 steps.

A fast heuristic decides first; optionally one model call decides instead (``use_model``).
The budget applies only when the agent was not given ``max_steps`` explicitly. Trivial tasks
run in lean mode (``state.lean``: memory recall may be skipped). Time-capsule mode raises the
limit to 50 steps, for admin users only.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

from thinkloop.core.events import BudgetAssigned, BudgetExtended, PolicyDenied
from thinkloop.core.types import Message, Step
from thinkloop.guard.run_memory import RunMemory
from thinkloop.hooks import AssessContext, Hook, HookContext, ReasonContext

log = logging.getLogger("thinkloop.guard")

Complexity = Literal["trivial", "simple", "standard", "complex"]
COMPLEXITIES: tuple[Complexity, ...] = get_args(Complexity)
STEP_BUDGETS: Mapping[Complexity, int] = {"trivial": 3, "simple": 8, "standard": 15,
                                          "complex": 25}
CLASSIFY_PROMPT = (
    "Classify how much work this task needs. Reply with exactly one word: trivial (answer "
    "at once, like 'what is 2+2'), simple (one or two tool uses, like 'search for news'), "
    "standard (research and summarise), or complex (build or change something in many steps)."
)

_COMPLEX = re.compile(
    r"\b(?:build|implement|develop|refactor|migrate|architect|design\s+(?:a|an|the)\s+\w+|"
    r"set\s+up|deploy|end[- ]to[- ]end|full(?:-stack)?\s+app|application|pipeline|"
    r"from\s+scratch|test\s+suite)\b", re.IGNORECASE)
_STANDARD = re.compile(
    r"\b(?:research|summari[sz]e|compare|analy[sz]e|investigate|report|review|evaluate|"
    r"write\s+(?:a|an)\s+\w+|draft|explain\s+in\s+detail|find\s+out|debug|fix)\b",
    re.IGNORECASE)
_TOOLISH = re.compile(
    r"\b(?:search|find|look\s+up|fetch|open|read|list|send|check|download|get|run|create|"
    r"write|save|convert|translate|calculate|compute)\b", re.IGNORECASE)
_STEPS = re.compile(r"\b(?:then|after\s+that|and\s+also|next|finally|first)\b|^\s*\d+[.)]\s",
                    re.IGNORECASE | re.MULTILINE)


def classify(task: str) -> Complexity:
    """The fast heuristic: size, multi-step markers and the kind of verbs used."""
    words = len(task.split())
    steps = len(_STEPS.findall(task))
    if words > 80 or steps >= 3 or _COMPLEX.search(task):
        return "complex"
    if words > 35 or steps == 2 or _STANDARD.search(task):
        return "standard"
    if words <= 8 and steps == 0 and not _TOOLISH.search(task):
        return "trivial"
    return "simple"


@dataclass(frozen=True)
class StepBudgetSettings:
    enabled: bool = True
    budgets: Mapping[Complexity, int] = field(default_factory=lambda: dict(STEP_BUDGETS))
    use_model: bool = False  # one extra model call to classify instead of the heuristic
    lean_for_trivial: bool = True
    time_capsule: bool = False  # request time-capsule mode (admins only)
    time_capsule_steps: int = 50
    admins: frozenset[str] = frozenset()  # user ids allowed time-capsule mode
    # A run that reaches its budget while still making progress gets the next budget up, once.
    extend_on_progress: bool = True


def capsule_active(settings: StepBudgetSettings, ctx: HookContext) -> bool:
    return settings.time_capsule and ctx.cfg.user_id in settings.admins


def _progress(steps: list[Step]) -> bool:
    last, earlier = steps[-1], steps[:-1]
    if not last.tool_calls:
        return False
    seen = {(c.name, repr(c.arguments)) for s in earlier for c in s.tool_calls}
    return all((c.name, repr(c.arguments)) not in seen for c in last.tool_calls)


def _parse(text: str) -> Complexity | None:
    words = re.findall(r"[a-z]+", text.lower())
    return next((w for w in words if w in COMPLEXITIES), None)


class StepBudget:
    def __init__(self, settings: StepBudgetSettings | None = None, *,
                 fixed_steps: bool = False) -> None:
        self.settings = settings or StepBudgetSettings()
        self.fixed_steps = fixed_steps  # the agent was given max_steps explicitly
        self.extended: RunMemory[list[bool]] = RunMemory(lambda: [False])

    def hooks(self) -> list[Hook]:
        hooks = [Hook("pre_assess", self.assign, name="guard.steps")]
        if self.settings.extend_on_progress and not self.fixed_steps:
            hooks += [Hook("pre_reason", self.extend, name="guard.steps.extend"),
                      self.extended.drop_hook("guard.steps")]
        return hooks

    def extend(self, ctx: ReasonContext) -> None:
        """A run about to use its last budgeted step while still making progress (its last
        step made only calls it had not made before) gets the next budget up, once: the
        budget sizes a task, it should not cut off one that is getting somewhere."""
        s = ctx.state
        if s.max_steps is None or s.step + 1 < s.max_steps or not s.steps or not ctx.tools:
            return
        bigger = sorted(b for b in self.settings.budgets.values() if b > s.max_steps)
        done = self.extended.get(ctx)
        if done[0] or not bigger or not _progress(s.steps):
            return
        done[0] = True
        ctx.set_step_budget(bigger[0])
        ctx.emit(BudgetExtended, max_steps=bigger[0], reason="progress")

    async def _classify(self, ctx: AssessContext) -> tuple[Complexity, str]:
        if self.settings.use_model:
            messages = [Message.system(CLASSIFY_PROMPT), Message.user(ctx.task)]
            response = await ctx.ask_model(messages, purpose="classify_steps")
            found = _parse(response.message.content)
            if found is not None:
                return found, "model"
            log.info("step budget: unreadable classification %r", response.message.content)
        return classify(ctx.task), "heuristic"

    async def assign(self, ctx: AssessContext) -> None:
        s = self.settings
        if s.time_capsule and not capsule_active(s, ctx):
            ctx.emit(PolicyDenied, guard="time_capsule", user_id=ctx.cfg.user_id,
                     reason="time-capsule mode is for admin users only")
        if capsule_active(s, ctx):
            steps = max(s.time_capsule_steps, ctx.cfg.limits.max_steps)
            ctx.set_step_budget(steps)
            ctx.emit(BudgetAssigned, complexity=None, max_steps=steps,
                     lean=False, mode="time_capsule", source="admin")
            return
        if self.fixed_steps:
            return
        complexity, source = await self._classify(ctx)
        lean = s.lean_for_trivial and complexity == "trivial"
        ctx.set_step_budget(s.budgets[complexity], lean=lean)
        ctx.emit(BudgetAssigned, complexity=complexity, max_steps=s.budgets[complexity],
                 lean=lean, mode="lean" if lean else "normal", source=source)
