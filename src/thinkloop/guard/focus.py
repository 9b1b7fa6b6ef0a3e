"""The tool focus of small models as a ``pre_reason`` hook (the ranking: ``context/focus.py``).

A run's tools are ranked once, on its first step, and the same few are offered on every step,
so a small model's prompt prefix (and the local model's KV cache) stays the same.
"""

from __future__ import annotations

from thinkloop.context.focus import FOCUS_TOOLS, rank_tools
from thinkloop.hooks import Hook, ReasonContext
from thinkloop.models.recap import recap


def focus_hook(k: int = FOCUS_TOOLS) -> Hook:
    """A ``pre_reason`` hook offering, out of more than ``k`` tools, only those ranked for the
    run's task (plus those the run has called)."""
    picked: dict[str, list[str]] = {}

    def focus(ctx: ReasonContext) -> None:
        if len(ctx.tools) <= k:
            return  # a handful of tools was chosen on purpose: offer them all
        run_id = ctx.state.run_id
        if run_id not in picked:
            if len(picked) >= 256:  # ranking again is cheap; keep the memo bounded
                del picked[next(iter(picked))]
            picked[run_id] = [t.name for t in rank_tools(ctx.state.task, ctx.tools, k)]
        called = {c.name for s in ctx.state.steps for c in s.tool_calls}
        keep = set(picked[run_id]) | called
        ctx.tools = [t for t in ctx.tools if t.name in keep]

    return Hook("pre_reason", focus, name="context.focus")


def recap_hook() -> Hook:
    """A ``pre_reason`` hook folding a session's earlier turns into a recap of what the person
    said, in front of the task (``models/recap.py``: a small model does not follow a chat)."""

    def fold(ctx: ReasonContext) -> None:
        ctx.messages = recap(ctx.messages, ctx.state.task)

    return Hook("pre_reason", fold, name="context.recap")
