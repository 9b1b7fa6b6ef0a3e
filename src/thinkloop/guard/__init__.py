"""Guardrails, policy and loop control (see :mod:`thinkloop.hooks`).

Each guard is a :class:`Guard`: one concern whose ``hooks()`` join the loop.
``default_guards(GuardSettings())`` returns the guards the seeds turn on by default,
``default_hooks`` their hooks in order; ``Agent(..., guard=GuardSettings(...))`` installs them
ahead of the agent's own hooks.
"""

from __future__ import annotations

from collections.abc import Callable

from thinkloop.guard.approval import (
    ApprovalGate,
    ApprovalRequest,
    ApprovalSettings,
    Approver,
    AutoApprove,
    AutoDeny,
    CallbackApprover,
    ConsoleApprover,
    Decision,
    DeferAll,
    approver_for,
)
from thinkloop.guard.base import Guard
from thinkloop.guard.budget import StepBudget, StepBudgetSettings, classify
from thinkloop.guard.drift import DriftSettings, GoalDrift
from thinkloop.guard.gate import ToolGate
from thinkloop.guard.input import InputGuard, InputGuardSettings, wrap_untrusted
from thinkloop.guard.isolation import IsolationSettings, PlanIsolation
from thinkloop.guard.loops import LoopGuard, LoopSettings
from thinkloop.guard.messages import MessageLimit, MessageSettings
from thinkloop.guard.nudges import Nudges, NudgeSettings
from thinkloop.guard.patterns import DEFAULT_PATTERNS, InjectionPattern
from thinkloop.guard.plan import PlanSettings, PreTaskPlan
from thinkloop.guard.policy import (
    ArgRule,
    RolePolicy,
    ToolPolicy,
    Verdict,
    confine_paths,
    deny_dangerous_commands,
)
from thinkloop.guard.provenance import ProvenanceGate, ProvenanceSettings, TargetRule
from thinkloop.guard.review import ReviewSettings, TerminationReview
from thinkloop.guard.rounds import RoundFollowUps
from thinkloop.guard.scan import Finding, scan_input
from thinkloop.guard.semantic import SemanticDetector
from thinkloop.guard.settings import GuardSettings
from thinkloop.guard.usage import UsageGuard, UsageLimits
from thinkloop.hooks import Hook
from thinkloop.store.sqlmanaged import ToolFollows


def default_guards(
    settings: GuardSettings | None = None, *, fixed_steps: bool = False,
    store: object = None,
) -> list[Guard]:
    """The guards ``settings`` turn on, in the order their hooks must run.

    ``fixed_steps``: the agent was given ``max_steps`` explicitly, so the step budget does not
    classify the task (time-capsule mode still applies to admins). ``store``: the agent's;
    when durable, the quartermaster keeps what it learns there.
    """
    follows = store if isinstance(store, ToolFollows) else None
    s = settings or GuardSettings()
    # One approval gate for both: a person who approves a gated call is not asked twice.
    approvals = ApprovalGate(s.approval)
    wanted: list[tuple[bool, Callable[[], Guard]]] = [
        # The input guard first: a blocked message costs nothing else (not even a classifier
        # call). Always on: truncation applies even when scanning is off.
        (True, lambda: InputGuard(s.input)),
        (s.steps.enabled or s.steps.time_capsule,
         lambda: StepBudget(s.steps, fixed_steps=fixed_steps)),
        (s.drift.enabled, lambda: GoalDrift(s.drift)),
        (s.plan.enabled, lambda: PreTaskPlan(s.plan)),
        (s.limits.any, lambda: UsageGuard(s.limits)),
        # The follow-up first: urgency and transparency, when they speak, are the last words.
        (s.nudges.escalate_from > 0 or s.nudges.hints, lambda: RoundFollowUps(s.nudges, follows)),
        (s.nudges.urgency or s.nudges.channel_tools != (), lambda: Nudges(s.nudges, s.steps)),
        # Before the gate: a duplicate or a loop is answered without asking a human.
        (s.loops.dedup or s.loops.detect_loops, lambda: LoopGuard(s.loops)),
        # A message past the limit asks nobody.
        (s.messages.max_per_run > 0, lambda: MessageLimit(s.messages, s.steps)),
        (s.isolation.enabled, lambda: PlanIsolation(s.isolation)),
        (s.provenance.enabled, lambda: ProvenanceGate(s.provenance, approvals)),
        (True, lambda: ToolGate(s.policy, approvals)),  # needs_approval tools: always gated
        (s.review.enabled, lambda: TerminationReview(s.review)),
    ]
    return [make() for on, make in wanted if on]


def default_hooks(
    settings: GuardSettings | None = None, *, fixed_steps: bool = False,
    store: object = None,
) -> list[Hook]:
    """The hooks of :func:`default_guards`, guard by guard."""
    return [h for g in default_guards(settings, fixed_steps=fixed_steps, store=store)
            for h in g.hooks()]


__all__ = [
    "DEFAULT_PATTERNS",
    "ApprovalGate",
    "ApprovalRequest",
    "ApprovalSettings",
    "Approver",
    "ArgRule",
    "AutoApprove",
    "AutoDeny",
    "CallbackApprover",
    "ConsoleApprover",
    "Decision",
    "DeferAll",
    "DriftSettings",
    "Finding",
    "GoalDrift",
    "Guard",
    "GuardSettings",
    "InjectionPattern",
    "InputGuard",
    "InputGuardSettings",
    "IsolationSettings",
    "LoopGuard",
    "LoopSettings",
    "MessageLimit",
    "MessageSettings",
    "NudgeSettings",
    "Nudges",
    "PlanIsolation",
    "PlanSettings",
    "PreTaskPlan",
    "ProvenanceGate",
    "ProvenanceSettings",
    "ReviewSettings",
    "RolePolicy",
    "SemanticDetector",
    "StepBudget",
    "StepBudgetSettings",
    "TargetRule",
    "TerminationReview",
    "ToolGate",
    "ToolPolicy",
    "UsageGuard",
    "UsageLimits",
    "Verdict",
    "approver_for",
    "classify",
    "confine_paths",
    "default_guards",
    "default_hooks",
    "deny_dangerous_commands",
    "scan_input",
    "wrap_untrusted",
]
