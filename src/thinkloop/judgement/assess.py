"""The assessment plugin: decide how to approach a task before step 1.

``pre_assess`` assesses (with a capable model: one side call with a strict schema, the
heuristic's signals as hints; the heuristic alone without one or when the call fails),
stores the plan artifact and emits ``assessment``; ``post_assess`` acts on it:

- ``ask_first``: the run ends at once with a clarifying question as its answer (``ask=True``)
  or the model is told to confirm its assumptions (``ask=False``);
- ``plan_with_rollback``: the model is told to plan and keep a way back before changing things;
- ``parallelize`` / ``delegate``: with :class:`~thinkloop.tools.subagents.SubAgents`, the
  subtasks fan out to child agents before step 1 and their results join the system prompt.

Lean runs (trivial tasks, see the step budget) get the heuristic only and no fan-out.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace

import orjson

from thinkloop.core.errors import ThinkloopError
from thinkloop.core.events import Assessed, AssessmentEscalated, AssessmentFanOut
from thinkloop.core.model import Model, ModelSettings, ReplyConstraint
from thinkloop.core.tool import ToolContext
from thinkloop.core.types import Message
from thinkloop.hooks import AssessContext, Hook
from thinkloop.judgement.signals import DECISIONS, Assessment, heuristic, question_for
from thinkloop.memory.layers import owner_of
from thinkloop.side_calls import json_object, side_call
from thinkloop.store.base import MemoryBackend
from thinkloop.tools.subagents import SubAgents, render_results

ASSESS_PROMPT = (
    "You decide how an assistant agent with tools (files, shell, e-mail, payments, git, cloud "
    "deploys, sub-agents) should approach the user's request before it acts. Reply with only "
    "a JSON object: {\"decision\": ..., \"risk\": none|low|high|irreversible, "
    "\"strong_model\": true|false, \"reasons\": [short strings], \"questions\": [what to "
    "ask the user], \"steps\": [plan steps or independent parts]}.\n"
    "decision is one of:\n"
    "- direct: clear and low-risk, or only a question ABOUT something (explain, how do I, "
    "what does X do: \"explain DROP TABLE\" is direct), or an irreversible action whose exact "
    "target and consequence are both stated;\n"
    "- ask_first: ambiguous about what or which, OR an irreversible action on something the "
    "user owns without the exact target and consequence: cancel, delete, remove, drop, get "
    "rid of, clean up, close an account, revoke, transfer, pay, wire, sell, buy, book, "
    "publish, post, send to others, deploy to production, migrate production data, "
    "force-push, squash history, rotate credentials, roll back, overwrite, in any wording "
    "(\"I no longer need my Netflix\" means cancel);\n"
    "- plan_with_rollback: a multi-step change to a system, code or data with a clear "
    "target, needing a plan and a way back;\n"
    "- parallelize: clearly independent parts that can run at the same time;\n"
    "- delegate: open-ended investigation or research to explore first.\n"
    "strong_model: true when doing it well needs multi-step reasoning, risky production "
    "changes, non-trivial code, careful analysis or legal/medical nuance."
)
ASSESS_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": list(DECISIONS)},
        "risk": {"type": "string", "enum": ["none", "low", "high", "irreversible"]},
        "strong_model": {"type": "boolean"},
        "reasons": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "questions": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "steps": {"type": "array", "items": {"type": "string"}, "maxItems": 6},
    },
    "required": ["decision", "risk", "strong_model", "reasons", "questions", "steps"],
    "additionalProperties": False,
}
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
    # The model judges when it is capable: None = any model but the tiny local one
    # (``local``); True = always (also the local one); False = the heuristic alone.
    use_model: bool | None = None
    model_below: float = 1.01  # ask the model only below this heuristic confidence
    model: Model | None = None  # default: the run's model
    max_tokens: int = 300  # the side call's token budget
    extra: dict[str, object] = field(default_factory=dict)  # merged into its request body
    cache_size: int = 256  # assessments kept per task text
    # False: the instructions go in the user message, for chat templates with no system
    # role (Gemma's, in llama.cpp's server, drops a system message silently).
    system_role: bool = True
    ask: bool = True  # ask_first ends the run with the question; False: only guidance
    fan_out: bool = True  # parallelize / delegate run sub-agents when given SubAgents
    store_plans: bool = True


def capable(model: Model) -> bool:
    """Whether ``model`` can judge: any but the tiny bundled local one."""
    return model.name.split(":", 1)[0] != "local"


def hints(found: Assessment) -> str:
    """The heuristic's reading, given to the model as hints (not as the answer)."""
    raised = ", ".join(f"{k}={v:.1f}" for k, v in found.signals.items() if v)
    return (f"Hints from a keyword heuristic (it is often wrong; judge yourself): signals "
            f"{raised or 'none'}; its guess: {found.decision}.")


_FIELD = re.compile(r'"(decision|risk)"\s*:\s*"(\w+)"|"strong_model"\s*:\s*(true|false)')


def reply_fields(text: str) -> dict[str, object] | None:
    """The reply's JSON object; from a reply cut by the token budget, the fields it has."""
    data = json_object(text)
    if data is not None:
        return data
    out: dict[str, object] = {}
    for key, value, strong in _FIELD.findall(text):
        if key:
            out[key] = value
        else:
            out["strong_model"] = strong == "true"
    return out or None


def _strings(value: object) -> tuple[str, ...]:
    return tuple(str(v) for v in value if str(v).strip()) if isinstance(value, list) else ()


def _from_model(data: dict[str, object], fallback: Assessment) -> Assessment | None:
    decision = data.get("decision")
    if decision not in DECISIONS:
        return None
    questions, steps = _strings(data.get("questions")), _strings(data.get("steps"))
    raw_conf = data.get("confidence")
    conf = float(raw_conf) if isinstance(raw_conf, int | float) else 0.8
    question = (" ".join(questions) or str(data.get("question") or "")
                or (fallback.question if fallback.decision == "ask_first" else "")
                or question_for(str(data.get("task", "")), fallback.signals))
    strong = data.get("strong_model")
    risk = data.get("risk")
    return replace(
        fallback, decision=decision, confidence=max(0.0, min(conf, 1.0)), source="model",
        question=question if decision == "ask_first" else "",
        subtasks=steps if decision == "parallelize" and steps else (
            fallback.subtasks if decision == "parallelize" else ()),
        escalated=False, risk=str(risk) if isinstance(risk, str) else "",
        strong_model=strong if isinstance(strong, bool) else None, steps=steps,
        reasons=(*_strings(data.get("reasons")), f"model decision (heuristic said "
                                                 f"{fallback.decision})"))


class Assessor:
    def __init__(self, settings: AssessSettings | None = None, *, store: object = None,
                 subagents: SubAgents | None = None) -> None:
        self.settings = settings or AssessSettings()
        self.store = store
        self.subagents = subagents
        self.latest: dict[str, Assessment] = {}  # run id -> assessment, while the run lives
        self._cache: dict[tuple[str, str], Assessment] = {}  # (model, task) -> the model's

    def hooks(self) -> list[Hook]:
        return [Hook("pre_assess", self.assess, name="judgement.assess"),
                Hook("post_assess", self.apply, name="judgement.assess.apply"),
                Hook("pre_output", self._drop, name="judgement.assess.cleanup")]

    def _drop(self, ctx: AssessContext) -> None:
        self.latest.pop(ctx.run_id, None)

    def uses_model(self, model: Model | None) -> bool:
        use = self.settings.use_model
        return model is not None and (use is True or (use is None and capable(model)))

    async def judge(self, task: str, ctx: AssessContext | None = None,
                    model: Model | None = None) -> Assessment:
        """The assessment of ``task``: the model's, with the heuristic's signals as hints,
        when a capable model is there; the heuristic's alone otherwise or when the side
        call fails or answers nothing readable. Cached per model and task text."""
        found = heuristic(task)
        s = self.settings
        model = s.model or model
        if model is None or not self.uses_model(model) or found.confidence >= s.model_below:
            return found
        key = (model.name, task)
        if key in self._cache:
            return self._cache[key]
        ask = f"{hints(found)}\n\nRequest: {task}"
        messages = ([Message.system(ASSESS_PROMPT), Message.user(ask)] if s.system_role
                    else [Message.user(f"{ASSESS_PROMPT}\n\n{ask}")])
        settings = ModelSettings(
            temperature=0.0, max_tokens=s.max_tokens, extra=dict(s.extra),
            constraint=ReplyConstraint("json_schema", orjson.dumps(ASSESS_SCHEMA).decode(),
                                       "assessment"))
        try:
            response = await side_call(model, messages, purpose="assess", ctx=ctx,
                                       settings=settings)
        except ThinkloopError as exc:  # the heuristic stands in; the run goes on
            return replace(found, reasons=(*found.reasons, f"model assessment failed: {exc}"))
        data = reply_fields(response.message.content)
        judged = _from_model({**data, "task": task}, found) if data else None
        if judged is None:
            return replace(found, reasons=(*found.reasons, "model reply unreadable"))
        if len(self._cache) >= s.cache_size:
            self._cache.pop(next(iter(self._cache)))
        self._cache[key] = judged
        return judged

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
