"""GuardSettings: every guard's configuration in one frozen value, seed defaults on."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from thinkloop.guard.approval import ApprovalSettings
from thinkloop.guard.budget import StepBudgetSettings
from thinkloop.guard.drift import DriftSettings
from thinkloop.guard.input import InputGuardSettings
from thinkloop.guard.isolation import IsolationSettings
from thinkloop.guard.loops import LoopSettings
from thinkloop.guard.messages import MessageSettings
from thinkloop.guard.nudges import NudgeSettings
from thinkloop.guard.plan import PlanSettings
from thinkloop.guard.policy import ToolPolicy
from thinkloop.guard.provenance import ProvenanceSettings
from thinkloop.guard.review import ReviewSettings
from thinkloop.guard.usage import UsageLimits


@dataclass(frozen=True)
class GuardSettings:
    """Defaults follow the seeds: input guard in ``warn`` mode with 32K truncation (GoClaw),
    dedup + loop detection, termination review, step budget (OrcBot), urgency nudge, the
    approval gate and goal-drift events (CortexPrism); with a channel tool, the transparency
    nudge and at most 10 messages per run (OrcBot). Usage limits, policy rules, the NO_SEND
    review of channel tasks and the pre-task plan are off until configured."""

    input: InputGuardSettings = field(default_factory=InputGuardSettings)
    policy: ToolPolicy = field(default_factory=ToolPolicy)
    approval: ApprovalSettings = field(default_factory=ApprovalSettings)
    loops: LoopSettings = field(default_factory=LoopSettings)
    limits: UsageLimits = field(default_factory=UsageLimits)
    steps: StepBudgetSettings = field(default_factory=StepBudgetSettings)
    review: ReviewSettings = field(default_factory=ReviewSettings)
    nudges: NudgeSettings = field(default_factory=NudgeSettings)
    plan: PlanSettings = field(default_factory=PlanSettings)
    drift: DriftSettings = field(default_factory=DriftSettings)
    messages: MessageSettings = field(default_factory=MessageSettings)
    provenance: ProvenanceSettings = field(default_factory=ProvenanceSettings)
    isolation: IsolationSettings = field(default_factory=IsolationSettings)

    @staticmethod
    def off() -> GuardSettings:
        """Every guard off (the approval gate still refuses ``needs_approval`` tools)."""
        s = GuardSettings()
        return replace(
            s, input=replace(s.input, mode="off", wrap_external=False, scan_external=False),
            loops=LoopSettings(dedup=False, detect_loops=False),
            steps=replace(s.steps, enabled=False), review=replace(s.review, enabled=False),
            nudges=replace(s.nudges, urgency=False, channel_tools=(), escalate_from=0,
                           hints=False),
            drift=DriftSettings(enabled=False), messages=replace(s.messages, max_per_run=0),
            provenance=ProvenanceSettings(enabled=False))
