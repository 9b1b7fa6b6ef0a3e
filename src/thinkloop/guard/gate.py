"""The tool gate: policy, then approval, before a call runs (``pre_tool``).

A refused call is answered with an error observation explaining why, so the model can change
course; the tool itself never runs. The same policy hides denied tools from the model
(``pre_reason``), as GoClaw filters tools through its PolicyEngine before each LLM call.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable

from thinkloop.core.events import PolicyDenied
from thinkloop.core.types import ToolCall, ToolResult
from thinkloop.guard.approval import ApprovalGate, ApprovalSettings
from thinkloop.guard.policy import ToolPolicy, Verdict
from thinkloop.guard.run_memory import RunMemory
from thinkloop.hooks import Hook, ReasonContext, ToolHookContext

DENIED = "Denied by policy: {reason}. The call was not run; do not retry it as is."
AWAITING = "[waiting for approval]"
NOT_APPROVED = "Not approved: {reason}. The call was not run; do not retry it as is."


class ToolGate:
    def __init__(self, policy: ToolPolicy | None = None,
                 approval: ApprovalSettings | ApprovalGate | None = None) -> None:
        self.policy = policy or ToolPolicy()
        self.approval = approval if isinstance(approval, ApprovalGate) else ApprovalGate(approval)
        self.counts: RunMemory[Counter[str]] = RunMemory(Counter)

    def hooks(self) -> list[Hook]:
        """Only what the policy configures: the tool list is filtered when the policy can
        refuse a tool by name, calls are counted per run when it has rate limits. The check
        itself always runs (``needs_approval`` tools are always gated)."""
        hide = [Hook("pre_reason", self.filter_tools, name="guard.policy.tools")] \
            if self.policy.limits_tools else []
        count = [self.counts.drop_hook("guard.policy")] if self.policy.rate_limits else []
        # Critical: if the gate itself breaks, the run fails rather than run the call.
        return [*hide, Hook("pre_tool", self.check_call, critical=True, name="guard.policy"),
                *count]

    def filter_tools(self, ctx: ReasonContext) -> None:
        if not self.policy.limits_tools:
            return  # nothing to hide: no glob matched per tool before every model call
        user = ctx.cfg.user_id
        ctx.tools = [t for t in ctx.tools if self.policy.permits(t.name, user) is None]

    def check_call(self, ctx: ToolHookContext) -> Awaitable[None] | None:
        """Before each tool call. A plain call unless someone must approve it: most calls
        make no coroutine."""
        call = ctx.call
        if call is None:
            return None
        prior = 0
        if self.policy.rate_limits:  # what the rate limits read: counted only for them
            counts = self.counts.get(ctx)
            prior = counts[call.name]
            counts[call.name] += 1
        if ctx.result is not None:  # an earlier guard already answered this call
            return None
        verdict = self.policy.evaluate(call, ctx.cfg.user_id, prior)
        if verdict.action == "deny":
            ctx.emit(PolicyDenied, tool=call.name, id=call.id, reason=verdict.reason)
            ctx.result = ToolResult(call, DENIED.format(reason=verdict.reason), is_error=True)
            return None
        needs = verdict if verdict.action == "approve" else None
        if needs is None and ctx.tool is not None and ctx.tool.needs_approval:
            needs = Verdict("approve", f"{call.name} requires approval")
        return self._approve(ctx, call, needs.reason) if needs is not None else None

    async def _approve(self, ctx: ToolHookContext, call: ToolCall, reason: str) -> None:
        decision = await self.approval.decide(ctx, call, reason)
        if decision.deferred:
            # Not run and not answered: the run pauses after this step (loop/phases.py act).
            ctx.result = ToolResult(call, AWAITING, is_error=True)
            return
        if not decision.approved:
            ctx.result = ToolResult(call, NOT_APPROVED.format(
                reason=decision.reason or "denied"), is_error=True)
