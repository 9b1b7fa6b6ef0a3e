"""Continuing a paused run: answer the calls it waits on, then the one loop goes on.

A run pauses when the approval gate defers a call (``loop/phases.py`` ``act``); the session
store keeps its turn and the pending calls. ``agent.resume`` restores that state and
``execute`` runs :func:`continue_paused` in place of ``assess``, then ``drive`` as usual, so
the step count, the limits and the guards carry on from where the run stopped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from thinkloop.core.events import ApprovalDecided, ToolCalled, ToolReturned
from thinkloop.core.run import RunConfig, RunState
from thinkloop.core.types import (
    Message,
    ModelResponse,
    Step,
    ToolCall,
    ToolResult,
    Usage,
)
from thinkloop.loop.phases import act, run_tool

DENIED = "denied: {reason}"


async def continue_paused(cfg: RunConfig, state: RunState) -> None:
    """Apply the decision: run the approved calls (through pre/post_tool, where the approval
    gate lets them pass), or answer each with a denial the model reads as an observation."""
    resume = state.resume
    assert resume is not None
    holder = next(m for m in reversed(state.messages) if m.role == "assistant")
    results: list[ToolResult] = []
    for p in resume.pending:
        call = ToolCall(p.call_id, p.tool, dict(p.arguments))
        state.emit(ApprovalDecided, tool=p.tool, id=p.call_id, approved=resume.approved,
                   reason=resume.reason, source="resume")
        state.emit(ToolCalled.of, call)
        if resume.approved:
            result = await run_tool(cfg, state, call)
        else:
            text = DENIED.format(reason=resume.reason or "no reason given")
            result = ToolResult(call, text, is_error=True)
        state.emit(ToolReturned.of, result)
        results.append(result)
    state.append(*cfg.protocol.observations(holder, results))
    if state.steps:  # the paused step is complete now
        last = state.steps[-1]
        state.steps[-1] = replace(last, results=(*last.results, *results))


def rebuild_steps(turn: Sequence[Message]) -> list[Step]:
    """The paused turn's steps, one per assistant message (usage is not stored: zero)."""
    steps: list[Step] = []
    for i, m in enumerate(turn):
        if m.role != "assistant":
            continue
        ids = {c.id: c for c in m.tool_calls}
        results = []
        for later in turn[i + 1:]:
            if later.role != "tool":
                break
            if later.tool_call_id in ids:
                results.append(ToolResult(ids[later.tool_call_id], later.content))
        steps.append(Step(len(steps) + 1, m.thought, m.content, m.tool_calls,
                          tuple(results), Usage()))
    return steps


async def continue_recovered(cfg: RunConfig, state: RunState) -> None:
    """Finish the interrupted step: a call with a recorded result is never run again."""
    r = state.recovered
    assert r is not None
    if r.assistant is not None:
        await act(cfg, state, r.assistant, r.assistant.tool_calls,
                  ModelResponse(r.assistant, r.usage), answered=r.results or {})
