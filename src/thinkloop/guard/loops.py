"""Duplicate and loop detection (OrcBot's DecisionPipeline guardrails), in ``pre_tool``.

- The same tool with the same arguments again in a run is answered from the first successful
  result, with a note, instead of running again (tools marked ``idempotent=False`` always run;
  an errored call may be retried).
- A call that would repeat the tool of the previous ``repeat_limit`` steps (OrcBot: the last
  three were all this tool), or that completes an A-B-A-B cycle of steps, is not run: the
  model gets a loop observation instead. Caught looping again right after, the run ends with
  status ``loop_detected``.

A step's "tool" is the set of tool names it called, so parallel calls in one step count once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from thinkloop.guard.runs import RunMemory
from thinkloop.hooks import Hook, ToolHookContext
from thinkloop.loop.state import RunState
from thinkloop.types import ToolCall, ToolResult

DUPLICATE_NOTE = ("\n\n[Note: you already made this exact call ({name} with the same "
                  "arguments) in step {step}; this is that result. Do not repeat it.]")
SAME_STEP_NOTE = ("[Note: duplicate of call {first} in this same step, which has the result; "
                  "this copy was not run.]")
LOOP_NOTE = ("Loop detected: {pattern}. This call was not run. Change approach: use a "
             "different tool or different arguments, or give your final answer now.")


@dataclass(frozen=True)
class LoopSettings:
    dedup: bool = True
    detect_loops: bool = True
    repeat_limit: int = 3


@dataclass
class _Run:
    strikes: int = 0
    step_calls: dict[int, dict[str, str]] = field(default_factory=dict)  # step -> key -> id


def call_key(call: ToolCall) -> str:
    args = orjson.dumps(call.arguments, option=orjson.OPT_SORT_KEYS, default=str).decode()
    return f"{call.name}:{args}"


def _earlier_result(state: RunState, key: str) -> tuple[int, ToolResult] | None:
    for step in state.steps:
        for r in step.results:
            if not r.is_error and call_key(r.call) == key:
                return step.index, r
    return None


def loop_pattern(history: list[frozenset[str]], name: str, repeat_limit: int) -> str | None:
    """Describe the loop ``name`` would make after these step signatures, or None."""
    this = frozenset({name})
    recent = history[-repeat_limit:]
    if len(recent) == repeat_limit and all(sig == this for sig in recent):
        return f"{name} was called in each of the last {repeat_limit} steps"
    if len(history) >= 3:
        a, b, c = history[-3:]
        if a == c and b == this and a != b and len(a) == 1:
            return f"the steps cycle between {next(iter(a))} and {name}"
    return None


class LoopGuard:
    def __init__(self, settings: LoopSettings | None = None) -> None:
        self.settings = settings or LoopSettings()
        self.runs: RunMemory[_Run] = RunMemory(_Run)

    def hooks(self) -> list[Hook]:
        return [Hook("pre_tool", self.check_call, name="guard.loops"),
                self.runs.drop_hook("guard.loops")]

    def check_call(self, ctx: ToolHookContext) -> None:
        call = ctx.call
        if call is None or ctx.result is not None:
            return
        run = self.runs.get(ctx)
        seen = run.step_calls.setdefault(ctx.step, {})
        key = call_key(call)
        first_in_step = not seen
        repeatable = ctx.tool is not None and not ctx.tool.idempotent
        if self.settings.detect_loops and first_in_step and self._loop(ctx, run, call):
            return
        if self.settings.dedup and not repeatable:
            if key in seen:
                self._answer(ctx, call, SAME_STEP_NOTE.format(first=seen[key]), "duplicate")
                return
            earlier = _earlier_result(ctx.state, key)
            if earlier is not None:
                step, result = earlier
                text = result.content + DUPLICATE_NOTE.format(name=call.name, step=step)
                self._answer(ctx, call, text, "duplicate")
        seen.setdefault(key, call.id)

    def _loop(self, ctx: ToolHookContext, run: _Run, call: ToolCall) -> bool:
        history = [frozenset(c.name for c in s.tool_calls) for s in ctx.state.steps
                   if s.tool_calls]
        pattern = loop_pattern(history, call.name, self.settings.repeat_limit)
        if pattern is None:
            run.strikes = 0
            return False
        run.strikes += 1
        if run.strikes > 1:
            reason = f"loop detected twice: {pattern}"
            ctx.emit("guard.blocked", guard="loop", tool=call.name, id=call.id, reason=reason,
                     final=True)
            ctx.stop(reason, "loop_detected")
            return True
        self._answer(ctx, call, LOOP_NOTE.format(pattern=pattern), "loop")
        return True

    def _answer(self, ctx: ToolHookContext, call: ToolCall, text: str, guard: str) -> None:
        # Not an error: nothing failed, the model is told what it already has.
        payload: dict[str, Any] = {"guard": guard, "tool": call.name, "id": call.id}
        ctx.emit("guard.blocked", **payload, reason=text.strip())
        ctx.result = ToolResult(call, text)
