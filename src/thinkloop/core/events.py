"""Every event a run emits: one frozen dataclass each, a closed union, one JSON form.

An event is an envelope (``run_id``, ``step``, ``ts``) plus its own fields, which are its
``payload`` on the wire and in the audit log: ``{"type", "run_id", "step", "ts", "payload"}``.
The ``type`` names are the public ones (SSE/WS clients, stored logs, the README) and never
change. A field declared ``= None`` is optional: it is left out of the payload when unset, so
each event carries the same keys it always did.

Events are built where they happen with ``state.emit(Kind, **fields)`` (or ``ctx.emit``):
the class is called only when someone listens, so a run nobody observes builds none.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sized
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, get_args

if TYPE_CHECKING:
    from collections.abc import Callable

    from thinkloop.core.types import ModelResponse, ToolCall, ToolResult, ToolSpec, Usage

Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Envelope:
    type: ClassVar[str]
    run_id: str
    step: int
    ts: float = field(default_factory=time.time, kw_only=True)
    # Its payload as JSON once encoded (payload_json): the audit log and the wire (a worker's
    # Redis stream, SSE) write the same bytes, and encoding them twice was a worker's own
    # per-event cost. Not the event's value: neither compared, shown nor copied by replace.
    _json: bytes | None = field(default=None, init=False, repr=False, compare=False,
                                kw_only=True)

    @property
    def payload(self) -> Json:
        """The event's own fields (its wire and audit-log payload)."""
        out: Json = {}
        for name, optional in _KEYS[type(self)]:
            value = getattr(self, name)
            if value is not None or not optional:
                out[name] = value
        return out


# --- the run's lifetime (loop/run.py) -------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RunStarted(_Envelope):
    type: ClassVar[str] = "run.started"
    task: str
    model: str


def usage_payload(usage: Usage) -> Json:
    """The ``usage`` of the terminal events."""
    return {"requests": usage.requests, "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens}


@dataclass(frozen=True, slots=True)
class RunCompleted(_Envelope):
    type: ClassVar[str] = "run.completed"
    status: str | None
    output: str
    error: str | None
    silent: bool
    usage: Json


@dataclass(frozen=True, slots=True)
class RunFailed(_Envelope):
    type: ClassVar[str] = "run.failed"
    error: str | None
    usage: Json


@dataclass(frozen=True, slots=True)
class RunCancelled(_Envelope):
    type: ClassVar[str] = "run.cancelled"
    usage: Json


@dataclass(frozen=True, slots=True)
class StepCompleted(_Envelope):
    type: ClassVar[str] = "step.completed"
    tool_calls: int


# --- model calls (loop/phases.py; side calls through hooks/ and judgement/sidecall.py) -----

@dataclass(frozen=True, slots=True)
class LlmRequest(_Envelope):
    type: ClassVar[str] = "llm.request"
    messages: int
    tools: list[str]
    purpose: str | None = None  # set on side calls (plans, classifiers), absent on steps

    @classmethod
    def of(cls, run_id: str, step: int, messages: Sized, tools: Iterable[ToolSpec] = (),
           purpose: str | None = None) -> LlmRequest:
        return cls(run_id, step, len(messages), [t.name for t in tools], purpose)


@dataclass(frozen=True, slots=True)
class Chunk(_Envelope):
    type: ClassVar[str] = "chunk"
    content: str
    kind: str


@dataclass(frozen=True, slots=True)
class LlmResponse(_Envelope):
    type: ClassVar[str] = "llm.response"
    text: str
    thought: str | None
    tool_calls: list[Json]
    usage: Json
    finish_reason: str | None
    model: str | None
    purpose: str | None = None

    @classmethod
    def of(cls, run_id: str, step: int, response: ModelResponse,
           purpose: str | None = None) -> LlmResponse:
        """The one place a reply becomes an event (steps and side calls alike)."""
        msg, u = response.message, response.usage
        return cls(run_id, step, msg.content, msg.thought,
                   [{"id": c.id, "name": c.name, "arguments": c.arguments}
                    for c in msg.tool_calls],
                   {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens},
                   response.finish_reason, response.model, purpose)


# --- tools ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ToolCalled(_Envelope):
    type: ClassVar[str] = "tool.call"
    id: str
    name: str
    arguments: Json

    @classmethod
    def of(cls, run_id: str, step: int, call: ToolCall) -> ToolCalled:
        return cls(run_id, step, call.id, call.name, call.arguments)


@dataclass(frozen=True, slots=True)
class ToolReturned(_Envelope):
    type: ClassVar[str] = "tool.result"
    id: str
    name: str
    is_error: bool
    content: str
    duration_s: float

    @classmethod
    def of(cls, run_id: str, step: int, result: ToolResult) -> ToolReturned:
        call = result.call
        return cls(run_id, step, call.id, call.name, result.is_error, result.content,
                   round(result.duration_s, 6))


@dataclass(frozen=True, slots=True)
class Handoff(_Envelope):
    """A sub-agent run starting (``to_child``) or ending (``to_parent``): tools/subagents.py;
    or the conversation moving to another agent (``transfer``, from ``from_agent`` to
    ``agent`` for ``reason``): tools/handoff.py."""

    type: ClassVar[str] = "handoff"
    direction: str
    agent: str
    child_run_id: str
    task: str | None = None
    status: str | None = None
    duration_s: float | None = None
    model: str | None = None  # the child's (to_child)
    usage: dict[str, Any] | None = None  # what the child used (to_parent)
    from_agent: str | None = None
    reason: str | None = None


# --- hooks and guards (hooks/, guard/) ----------------------------------------------------

@dataclass(frozen=True, slots=True)
class HookErrored(_Envelope):
    type: ClassVar[str] = "hook.failed"
    stage: str
    hook: str
    error: str


@dataclass(frozen=True, slots=True)
class GuardBlocked(_Envelope):
    """A guard stopped a call or the run: ``guard`` says which (budget, loop, input, ...)."""

    type: ClassVar[str] = "guard.blocked"
    guard: str
    reason: str
    tool: str | None = None
    id: str | None = None
    limit: str | None = None
    used: float | None = None
    cap: float | None = None
    findings: list[Json] | None = None
    final: bool | None = None


@dataclass(frozen=True, slots=True)
class GuardDetected(_Envelope):
    type: ClassVar[str] = "guard.detected"
    guard: str
    source: str
    mode: str
    findings: list[Json]


@dataclass(frozen=True, slots=True)
class GuardTruncated(_Envelope):
    type: ClassVar[str] = "guard.truncated"
    original_chars: int
    kept_chars: int


@dataclass(frozen=True, slots=True)
class GuardProvenance(_Envelope):
    type: ClassVar[str] = "guard.provenance"
    tool: str
    id: str
    reason: str
    sources: list[str]


@dataclass(frozen=True, slots=True)
class PolicyDenied(_Envelope):
    type: ClassVar[str] = "policy.denied"
    reason: str
    guard: str | None = None
    tool: str | None = None
    id: str | None = None
    user_id: str | None = None


@dataclass(frozen=True, slots=True)
class ApprovalRequested(_Envelope):
    type: ClassVar[str] = "approval.requested"
    tool: str
    id: str
    arguments: Json
    reason: str


@dataclass(frozen=True, slots=True)
class ApprovalDecided(_Envelope):
    type: ClassVar[str] = "approval.decided"
    tool: str
    id: str
    approved: bool
    reason: str
    source: str


@dataclass(frozen=True, slots=True)
class ApprovalDeferred(_Envelope):
    type: ClassVar[str] = "approval.deferred"
    tool: str
    id: str
    reason: str


@dataclass(frozen=True, slots=True)
class ReviewBlocked(_Envelope):
    type: ClassVar[str] = "review.blocked"
    codes: list[str]
    reason: str
    attempt: int


@dataclass(frozen=True, slots=True)
class Nudge(_Envelope):
    type: ClassVar[str] = "nudge"
    kind: str
    remaining: int | None = None
    silent_steps: int | None = None
    # follow_up (guard/rounds.py): how firm, after how many rounds of tool calls
    level: int | None = None
    rounds: int | None = None
    # quartermaster: the tool that usually follows ``after``, and how often it did
    after: str | None = None
    next: str | None = None
    confidence: float | None = None


@dataclass(frozen=True, slots=True)
class DriftDetected(_Envelope):
    type: ClassVar[str] = "goal.drift"
    score: float
    keyword: float
    divergence: float
    previous: str


@dataclass(frozen=True, slots=True)
class PlanCreated(_Envelope):
    type: ClassVar[str] = "plan.created"
    plan: str


@dataclass(frozen=True, slots=True)
class PlanSkipped(_Envelope):
    type: ClassVar[str] = "plan.skipped"
    reason: str


@dataclass(frozen=True, slots=True)
class IsolationPlanned(_Envelope):
    type: ClassVar[str] = "isolation.planned"
    tools: list[str]


@dataclass(frozen=True, slots=True)
class IsolationRefused(_Envelope):
    type: ClassVar[str] = "isolation.refused"
    tool: str
    id: str
    plan: list[str]


@dataclass(frozen=True, slots=True)
class IsolationQuarantined(_Envelope):
    type: ClassVar[str] = "isolation.quarantined"
    tool: str
    id: str
    valid: bool


@dataclass(frozen=True, slots=True)
class BudgetAssigned(_Envelope):
    type: ClassVar[str] = "budget.assigned"
    complexity: str | None
    max_steps: int
    lean: bool
    mode: str
    source: str


@dataclass(frozen=True, slots=True)
class BudgetExtended(_Envelope):
    type: ClassVar[str] = "budget.extended"
    max_steps: int
    reason: str


@dataclass(frozen=True, slots=True)
class MemoryRecallSkipped(_Envelope):
    type: ClassVar[str] = "memory.recall_skipped"
    reason: str


# --- judgement/ -----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Assessed(_Envelope):
    type: ClassVar[str] = "assessment"
    decision: str
    confidence: float
    signals: dict[str, float]
    suggested_subagents: list[str]
    question: str
    subtasks: list[str]
    source: str
    escalated: bool
    reasons: list[str]
    risk: str = ""  # the model's: none, low, high, irreversible ("" from the heuristic)
    strong_model: bool | None = None  # the model's: the task needs a strong model
    steps: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class AssessmentEscalated(_Envelope):
    type: ClassVar[str] = "assessment.escalated"
    confidence: float


@dataclass(frozen=True, slots=True)
class AssessmentFanOut(_Envelope):
    type: ClassVar[str] = "assessment.fan_out"
    decision: str
    agents: list[str]
    tasks: list[str]


@dataclass(frozen=True, slots=True)
class ModelSelected(_Envelope):
    type: ClassVar[str] = "model.selected"
    model: str
    capability: int
    needed: int
    mode: str
    confidence: float
    reason: str
    reasoning_effort: str | None


@dataclass(frozen=True, slots=True)
class ModelFallback(_Envelope):
    """Models of a fallback list failed and a later one answered (models/wrappers.py)."""

    type: ClassVar[str] = "model.fallback"
    model: str  # the model that answered
    failed: list[Json]  # [{"model": ..., "error": ...}] in the order they were tried

    @classmethod
    def of(cls, run_id: str, step: int, response: ModelResponse) -> ModelFallback:
        return cls(run_id, step, response.model,
                   [{"model": m, "error": e} for m, e in response.fallbacks])


@dataclass(frozen=True, slots=True)
class ModelInputCut(_Envelope):
    """The model left part of its request out to fit its context window (the local models
    cut the middle of the longest turns, with a note where; ``ModelResponse.cut_chars``)."""

    type: ClassVar[str] = "model.input_cut"
    model: str
    window: int  # tokens
    chars: int  # characters left out

    @classmethod
    def of(cls, run_id: str, step: int, response: ModelResponse) -> ModelInputCut:
        return cls(run_id, step, response.model, response.window, response.cut_chars)


@dataclass(frozen=True, slots=True)
class SensitivityClassified(_Envelope):
    type: ClassVar[str] = "sensitivity.classified"
    tool: str
    id: str
    level: str
    why: list[str]


@dataclass(frozen=True, slots=True)
class SecretsRedacted(_Envelope):
    type: ClassVar[str] = "secrets.redacted"
    where: str
    count: int | None = None
    tool: str | None = None


@dataclass(frozen=True, slots=True)
class SupervisorEscalated(_Envelope):
    type: ClassVar[str] = "supervisor.escalated"
    tool: str
    id: str
    reason: str


@dataclass(frozen=True, slots=True)
class EntitiesRecalled(_Envelope):
    type: ClassVar[str] = "entities.recalled"
    entities: list[str]
    edges: int


# --- the gateway (server/inputs.py): made outside the loop, joined to the run's stream -------

@dataclass(frozen=True, slots=True)
class InputRequested(_Envelope):
    type: ClassVar[str] = "input.requested"
    id: str
    kind: str
    question: str


@dataclass(frozen=True, slots=True)
class MessageSent(_Envelope):
    type: ClassVar[str] = "message"
    text: str
    recipient: str | None


Event = (
    RunStarted | RunCompleted | RunFailed | RunCancelled | StepCompleted
    | LlmRequest | Chunk | LlmResponse | ToolCalled | ToolReturned | Handoff
    | HookErrored | GuardBlocked | GuardDetected | GuardTruncated | GuardProvenance
    | PolicyDenied | ApprovalRequested | ApprovalDecided | ApprovalDeferred | ReviewBlocked
    | Nudge | DriftDetected | PlanCreated | PlanSkipped | IsolationPlanned | IsolationRefused
    | IsolationQuarantined | BudgetAssigned | BudgetExtended | MemoryRecallSkipped
    | Assessed | AssessmentEscalated | AssessmentFanOut | ModelSelected | ModelFallback
    | ModelInputCut | SensitivityClassified
    | SecretsRedacted | SupervisorEscalated | EntitiesRecalled | InputRequested | MessageSent
)

EVENT_CLASSES: tuple[type[Event], ...] = get_args(Event)
BY_TYPE: dict[str, type[Event]] = {cls.type: cls for cls in EVENT_CLASSES}
# Each class's payload fields and whether each is optional, computed once: the payload
# property is on the path of every observed event.
_KEYS: dict[type[_Envelope], tuple[tuple[str, bool], ...]] = {
    cls: tuple((f.name, f.default is None) for f in fields(cls)
               if f.init and f.name not in ("run_id", "step", "ts"))
    for cls in EVENT_CLASSES
}


def to_dict(event: Event) -> Json:
    """The one JSON form: ``{"type", "run_id", "step", "ts", "payload"}`` (wire and store)."""
    return {"type": event.type, "run_id": event.run_id, "step": event.step, "ts": event.ts,
            "payload": event.payload}


def payload_json(event: Event, encode: Callable[[Json], bytes]) -> bytes:
    """``encode(event.payload)``, encoded once per event however many write it (the store's
    audit-log row and the wire's frame hold the same bytes)."""
    data = event._json
    if data is None:
        data = encode(event.payload)
        object.__setattr__(event, "_json", data)  # frozen: a cache, not the event's value
    return data


def from_dict(data: Json) -> Event:
    """An event back from :func:`to_dict`'s form. Payload keys the class does not know (a
    log written by another version) are dropped; an unknown ``type`` is an error."""
    cls = BY_TYPE.get(data["type"])
    if cls is None:
        raise ValueError(f"unknown event type {data['type']!r}")
    known = {name for name, _ in _KEYS[cls]}
    own = {k: v for k, v in (data.get("payload") or {}).items() if k in known}
    return cls(str(data["run_id"]), int(data["step"]), ts=float(data["ts"]), **own)
