"""Guardrails, policy and loop control, each a hook (see :mod:`thinkloop.hooks`).

``default_hooks(GuardSettings())`` returns the guards the seeds turn on by default;
``Agent(..., guard=GuardSettings(...))`` installs them ahead of the agent's own hooks.
"""

from __future__ import annotations

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
from thinkloop.guard.scan import Finding, scan_input
from thinkloop.guard.semantic import SemanticDetector
from thinkloop.guard.settings import GuardSettings
from thinkloop.guard.usage import UsageGuard, UsageLimits
from thinkloop.hooks import Hook


def default_hooks(
    settings: GuardSettings | None = None, *, fixed_steps: bool = False
) -> list[Hook]:
    """The guard hooks for ``settings``, in the order they must run.

    ``fixed_steps``: the agent was given ``max_steps`` explicitly, so the step budget does not
    classify the task (time-capsule mode still applies to admins).
    """
    s = settings or GuardSettings()
    hooks: list[Hook] = []
    # The input guard first: a blocked message costs nothing else (not even a classifier call).
    hooks += InputGuard(s.input).hooks()  # truncation applies even when scanning is off
    if s.steps.enabled or s.steps.time_capsule:
        hooks += StepBudget(s.steps, fixed_steps=fixed_steps).hooks()
    if s.drift.enabled:
        hooks += GoalDrift(s.drift).hooks()
    if s.plan.enabled:
        hooks += PreTaskPlan(s.plan).hooks()
    if s.limits.any:
        hooks += UsageGuard(s.limits).hooks()
    if s.nudges.urgency or s.nudges.channel_tools != ():
        hooks += Nudges(s.nudges, s.steps).hooks()
    if s.loops.dedup or s.loops.detect_loops:
        # Before the gate: a duplicate or a loop is answered without asking a human.
        hooks += LoopGuard(s.loops).hooks()
    if s.messages.max_per_run > 0:
        hooks += MessageLimit(s.messages, s.steps).hooks()  # a message past it asks nobody
    # One approval gate for both: a person who approves a gated call is not asked twice.
    approvals = ApprovalGate(s.approval)
    if s.isolation.enabled:
        hooks += PlanIsolation(s.isolation).hooks()
    if s.provenance.enabled:
        hooks += ProvenanceGate(s.provenance, approvals).hooks()
    hooks += ToolGate(s.policy, approvals).hooks()
    if s.review.enabled:
        hooks += TerminationReview(s.review).hooks()
    return hooks


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
    "default_hooks",
    "deny_dangerous_commands",
    "scan_input",
    "wrap_untrusted",
]
