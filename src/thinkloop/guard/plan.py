"""Pre-task plan (OrcBot SimulationEngine): one model call before step 1 (``post_assess``).

The short plan is appended to the system prompt so the model stays on track. Off by default.
"""

from __future__ import annotations

from dataclasses import dataclass

from thinkloop.core.events import PlanCreated, PlanSkipped
from thinkloop.core.types import Message
from thinkloop.hooks import AssessContext, Hook

PLAN_PROMPT = (
    "Before any work starts, write a short plan for the task below: 2-5 numbered steps naming "
    "the tools you expect to use, the expected outcome, and likely errors. Plain text only."
)


@dataclass(frozen=True)
class PlanSettings:
    enabled: bool = False
    prompt: str = PLAN_PROMPT
    max_chars: int = 2000


class PreTaskPlan:
    def __init__(self, settings: PlanSettings | None = None) -> None:
        self.settings = settings or PlanSettings(enabled=True)

    def hooks(self) -> list[Hook]:
        return [Hook("post_assess", self.plan, name="guard.plan")]

    async def plan(self, ctx: AssessContext) -> None:
        if ctx.state.lean:  # a trivial task (step budget): no plan, OrcBot's lean mode
            ctx.emit(PlanSkipped, reason="lean")
            return
        tools = ", ".join(ctx.cfg.tools) or "none"
        messages = [Message.system(f"{self.settings.prompt}\nAvailable tools: {tools}"),
                    Message.user(ctx.task)]
        response = await ctx.ask_model(messages, purpose="plan")
        text = response.message.content.strip()[: self.settings.max_chars]
        if not text:
            return
        ctx.system_prompt = f"{ctx.system_prompt}\n\nPLAN (made before starting):\n{text}"
        ctx.emit(PlanCreated, plan=text)
