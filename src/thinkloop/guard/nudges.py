"""Nudges added to one model request (``pre_reason``); the run's history is never changed.

- Urgency (CortexPrism): when ``urgency_at`` (2) or fewer steps remain, tell the model to
  stop calling tools and produce the deliverable now. (On the very last step the loop
  withholds tools anyway.)
- Transparency (OrcBot): whenever the run has a channel tool (``send_message`` or a
  ``send_*`` tool, or the configured ``channel_tools``; ``()`` turns it off), after
  ``transparency_after`` (5) steps without a message to the user, ask for a short progress
  update. Off in time-capsule mode.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from thinkloop.core.events import Nudge
from thinkloop.core.types import Message
from thinkloop.guard.budget import StepBudgetSettings, capsule_active
from thinkloop.guard.messages import RunChannels
from thinkloop.hooks import Hook, ReasonContext

URGENCY = ("[Urgent] Only {n} step(s) left for this task. Stop calling tools unless one is "
           "essential, and produce the deliverable now (for a file task, write the file).")
TRANSPARENCY = (
    "⚡ TRANSPARENCY ALERT: You have been working for {n} steps without updating the user. "
    "The user cannot see your internal work; they only see messages you send them. Send a "
    "brief progress update NOW with {tools} (e.g. \"I've found X so far, still checking Y\")."
)


@functools.lru_cache(maxsize=256)
def notice(text: str) -> Message:
    """One message for each nudge text, shared by every request that carries it: what is
    worked out per message (its wire encoding, its token count, in ``Message.cache``) is
    worked out once, not before every model call from the third round on."""
    return Message.notice(text)


@dataclass(frozen=True)
class NudgeSettings:
    urgency: bool = True
    urgency_at: int = 2
    channel_tools: tuple[str, ...] | None = None  # None: detected (guard/messages.py)
    transparency_after: int = 5
    # After each round of tool calls (guard/rounds.py): the escalating follow-up from this
    # round on (0: off), and the quartermaster's next-tool hint when this sure, this often.
    escalate_from: int = 3
    hints: bool = True
    hint_confidence: float = 0.6
    hint_min_runs: int = 3


class Nudges:
    def __init__(self, settings: NudgeSettings | None = None,
                 steps: StepBudgetSettings | None = None) -> None:
        self.settings = settings or NudgeSettings()
        self.steps = steps or StepBudgetSettings(enabled=False)
        self.channels = RunChannels(self.settings.channel_tools)

    def hooks(self) -> list[Hook]:
        return [Hook("pre_reason", self.nudge, name="guard.nudges")]

    def _silent_steps(self, ctx: ReasonContext, channel: tuple[str, ...]) -> int:
        n = 0
        for step in reversed(ctx.state.steps):
            if any(c.name in channel for c in step.tool_calls):
                break
            n += 1
        return n

    def nudge(self, ctx: ReasonContext) -> None:
        s = self.settings
        if not ctx.tools:  # the loop's tool-less final call has its own notice
            return
        extra: list[Message] = []
        limit = ctx.state.max_steps or ctx.cfg.limits.max_steps
        remaining = limit - ctx.state.step
        if s.urgency and 0 < remaining <= s.urgency_at:
            extra.append(notice(URGENCY.format(n=remaining)))
            ctx.emit(Nudge, kind="urgency", remaining=remaining)
        channel = self.channels(ctx)
        if channel and not capsule_active(self.steps, ctx):
            silent = self._silent_steps(ctx, channel)
            if silent >= s.transparency_after:
                tools = " or ".join(channel)
                extra.append(notice(TRANSPARENCY.format(n=silent, tools=tools)))
                ctx.emit(Nudge, kind="transparency", silent_steps=silent)
        if extra:
            # A new list: the history in state.messages stays exactly as it was.
            ctx.messages = [*ctx.messages, *extra]
