"""The assessment plugin: decide how to approach a task before step 1.

``pre_assess`` assesses (heuristic first; one side model call when ``use_model`` and the
heuristic is not sure), stores the plan artifact and emits ``assessment``; ``post_assess``
acts on it:

- ``ask_first``: the run ends at once with a clarifying question as its answer (``ask=True``)
  or the model is told to confirm its assumptions (``ask=False``);
- ``plan_with_rollback``: the model is told to plan and keep a way back before changing things;
- ``parallelize`` / ``delegate``: with :class:`~thinkloop.tools.subagents.SubAgents`, the
  subtasks fan out to child agents before step 1 and their results join the system prompt.

Lean runs (trivial tasks, see the step budget) get the heuristic only and no fan-out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import orjson

from thinkloop.core.events import Assessed, AssessmentEscalated, AssessmentFanOut
from thinkloop.core.model import Model
from thinkloop.core.tool import ToolContext
from thinkloop.core.types import Message
from thinkloop.hooks import AssessContext, Hook
from thinkloop.judgement.signals import DECISIONS, Assessment, heuristic
from thinkloop.memory.layers import owner_of
from thinkloop.side_calls import json_object, side_call
from thinkloop.store.base import MemoryBackend
from thinkloop.tools.subagents import SubAgents, render_results

ASSESS_PROMPT = (
    "Decide how an agent should approach the task below before it acts. Reply with only a "
    "JSON object: {\"decision\": one of direct, ask_first, plan_with_rollback, parallelize, "
    "delegate, \"confidence\": 0..1, \"question\": a clarifying question if ask_first, "
    "\"subtasks\": independent parts if parallelize}. ask_first when the request is vague or "
    "destructive; plan_with_rollback for multi-step or code changes; parallelize for "
    "independent parts; delegate for exploration."
)
GUIDANCE = {
    "plan_with_rollback": (
        "APPROACH (assessed before starting): this task changes things in several steps. "
        "First state a short plan; before each change, keep a way back (a copy, a backup, "
        "the previous value); verify each step before the next."),
    "ask_first": (
        "APPROACH (assessed before starting): the request may be unclear or destructive. "
        "State your assumptions, prefer reversible actions, and ask before anything that "
        "cannot be undone."),
    "parallelize": (
        "APPROACH (assessed before starting): the task has independent parts: {parts}. Work "
        "on them separately (spawn_agent runs them in parallel when available)."),
    "delegate": (
        "APPROACH (assessed before starting): explore before acting (suggested sub-agents: "
        "{agents})."),
}


@dataclass(frozen=True)
class AssessSettings:
    use_model: bool = False  # one side call when the heuristic's confidence is below model_below
    model_below: float = 0.75
    model: Model | None = None  # default: the run's model
    ask: bool = True  # ask_first ends the run with the question; False: only guidance
    fan_out: bool = True  # parallelize / delegate run sub-agents when given SubAgents
    store_plans: bool = True


def _from_model(data: dict[str, object], fallback: Assessment) -> Assessment | None:
    decision = data.get("decision")
    if decision not in DECISIONS:
        return None
    raw_conf = data.get("confidence")
    conf = float(raw_conf) if isinstance(raw_conf, int | float) else 0.6
    question = data.get("question")
    parts = data.get("subtasks")
    return replace(
        fallback, decision=decision, confidence=max(0.0, min(conf, 1.0)), source="model",
        question=str(question) if decision == "ask_first" and question else (
            fallback.question if decision == "ask_first" else ""),
        subtasks=tuple(str(p) for p in parts) if isinstance(parts, list) else fallback.subtasks,
        escalated=False, reasons=(*fallback.reasons, "model decision"))


class Assessor:
    def __init__(self, settings: AssessSettings | None = None, *, store: object = None,
                 subagents: SubAgents | None = None) -> None:
        self.settings = settings or AssessSettings()
        self.store = store
        self.subagents = subagents
        self.latest: dict[str, Assessment] = {}  # run id -> assessment, while the run lives

    def hooks(self) -> list[Hook]:
        return [Hook("pre_assess", self.assess, name="judgement.assess"),
                Hook("post_assess", self.apply, name="judgement.assess.apply"),
                Hook("pre_output", self._drop, name="judgement.assess.cleanup")]

    def _drop(self, ctx: AssessContext) -> None:
        self.latest.pop(ctx.run_id, None)

    async def judge(self, task: str, ctx: AssessContext | None = None,
                    model: Model | None = None) -> Assessment:
        """The assessment of ``task``: heuristic, then the model when configured and unsure."""
        found = heuristic(task)
        s = self.settings
        model = s.model or model
        if not s.use_model or model is None or found.confidence >= s.model_below:
            return found
        messages = [Message.system(ASSESS_PROMPT), Message.user(task)]
        response = await side_call(model, messages, purpose="assess", ctx=ctx)
        data = json_object(response.message.content)
        return (_from_model(data, found) if data else None) or found

    async def assess(self, ctx: AssessContext) -> None:
        model = None if ctx.state.lean else ctx.cfg.model  # lean: the heuristic only
        found = await self.judge(ctx.task, ctx, model)
        self.latest[ctx.run_id] = found
        ctx.emit(Assessed, **found.to_dict())
        if found.escalated:
            ctx.emit(AssessmentEscalated, confidence=round(found.confidence, 3))
        if self.settings.store_plans:
            await self._store(ctx, found)

    async def _store(self, ctx: AssessContext, found: Assessment) -> None:
        if not isinstance(self.store, MemoryBackend):
            return
        owner = owner_of(ctx.cfg.user_id, ctx.cfg.session_id) or f"run:{ctx.run_id}"
        artifact = {"run_id": ctx.run_id, "task": ctx.task, "created_at": time.time(),
                    **found.to_dict()}
        await self.store.add_memory(owner, "plan", ctx.run_id, orjson.dumps(artifact).decode())

    async def apply(self, ctx: AssessContext) -> None:
        found = self.latest.get(ctx.run_id)
        if found is None:
            return
        if found.decision == "ask_first" and self.settings.ask:
            # The question is the run's answer (loop/run.py finishes a "completed" stop so).
            ctx.stop(found.question, "completed")
            return
        if found.decision in {"parallelize", "delegate"} and self.subagents is not None \
                and self.settings.fan_out and not ctx.state.lean:
            ctx.system_prompt += "\n\n" + await self._fan_out(ctx, found)
            return
        text = GUIDANCE.get(found.decision)
        if text:
            ctx.system_prompt += "\n\n" + text.format(
                parts="; ".join(found.subtasks) or "see the task",
                agents=", ".join(found.suggested_subagents))

    async def _fan_out(self, ctx: AssessContext, found: Assessment) -> str:
        assert self.subagents is not None
        known = self.subagents.by_name
        kinds = [a for a in found.suggested_subagents if a in known] or [next(iter(known))]
        if found.decision == "parallelize" and found.subtasks:
            jobs = [(kinds[0], t) for t in found.subtasks]
        else:
            jobs = [(kinds[0], ctx.task)]
        parent = ToolContext(ctx.run_id, 0, "assessment", ctx.cfg.session_id, ctx.cfg.user_id,
                             ctx.cfg.deps, emit=ctx.state.emit, charge_usage=ctx.state.charge)
        ctx.emit(AssessmentFanOut, decision=found.decision, agents=[a for a, _ in jobs],
                 tasks=[t for _, t in jobs])
        results = await self.subagents.fan_out(jobs, parent, spawn=ctx.cfg.spawn)
        return ("SUB-AGENT RESULTS (the task was split before starting; build your answer on "
                f"them, check what they left open):\n{render_results(results)}")
