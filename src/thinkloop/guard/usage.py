"""Usage limits per run: model calls, input/output tokens, tool calls, cost.

Checked before each model call and each tool call, so a run overshoots by at most the call
that crossed the line. Reaching a limit ends the run with status ``budget_exceeded`` and the
best answer so far (the last assistant text), never a runaway bill.
"""

from __future__ import annotations

from dataclasses import dataclass

from thinkloop.core.events import GuardBlocked
from thinkloop.guard.run_memory import RunMemory
from thinkloop.hooks import Hook, HookContext, ReasonContext, ToolHookContext


@dataclass(frozen=True)
class UsageLimits:
    max_model_calls: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_tool_calls: int | None = None
    max_cost_usd: float | None = None

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.max_model_calls, self.max_input_tokens,
                                           self.max_output_tokens, self.max_tool_calls,
                                           self.max_cost_usd))


def best_answer(ctx: HookContext) -> str:
    for m in reversed(ctx.state.new_messages):
        if m.role == "assistant" and m.content.strip():
            return m.content
    return ""


class UsageGuard:
    def __init__(self, limits: UsageLimits) -> None:
        self.limits = limits
        self.tool_calls: RunMemory[list[int]] = RunMemory(lambda: [0])

    def hooks(self) -> list[Hook]:
        return [Hook("pre_reason", self.before_model, name="guard.usage"),
                Hook("pre_tool", self.before_tool, name="guard.usage.tools"),
                self.tool_calls.drop_hook("guard.usage")]

    def _stop(self, ctx: HookContext, limit: str, used: float, cap: float) -> None:
        reason = f"usage limit reached: {limit} {used:g} of {cap:g}"
        ctx.emit(GuardBlocked, guard="budget", limit=limit, used=used, cap=cap,
                 reason=reason)
        ctx.stop(reason, "budget_exceeded", answer=best_answer(ctx))

    def before_model(self, ctx: ReasonContext) -> None:
        u, lim = ctx.state.usage, self.limits
        checks = (("model_calls", u.requests, lim.max_model_calls),
                  ("input_tokens", u.input_tokens, lim.max_input_tokens),
                  ("output_tokens", u.output_tokens, lim.max_output_tokens),
                  ("cost_usd", u.cost_usd, lim.max_cost_usd))
        for name, used, cap in checks:
            if cap is not None and used >= cap:
                self._stop(ctx, name, used, cap)
                return

    def before_tool(self, ctx: ToolHookContext) -> None:
        cap = self.limits.max_tool_calls
        if cap is None or ctx.stop_reason is not None:
            return
        count = self.tool_calls.get(ctx)
        if count[0] >= cap:
            self._stop(ctx, "tool_calls", count[0], cap)
            return
        count[0] += 1
