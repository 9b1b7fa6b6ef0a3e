"""Duplicate and loop detection (OrcBot's DecisionPipeline guardrails), in ``pre_tool``.

A loop is the model doing the same thing again without getting anywhere; a series of calls to
one tool with new arguments (add 2 to 0, 1, 2...; read six files one by one) is progress.

- The same call (tool and arguments) again, with nothing changed in between, is answered from
  the first successful result with a note instead of running again, and the model's next turn
  gets no tools, so it answers from what it has (the run ends ``completed``). Tools marked
  ``idempotent=False`` always run, and a call to one of them invalidates earlier results (a
  file read after a write runs again); an errored call may be retried.
- A call that would make the last ``repeat_limit`` steps the same call, or a call whose last
  ``repeat_limit`` results (for the same arguments, in any steps) came back identical, or that
  completes an A-B-A-B cycle of identical calls, is not run: the model gets a loop
  observation. Loops are told by calls, not results: new arguments are progress even when
  every result reads the same ("message sent", "pending" for each job). Caught looping again
  right after, the run ends with status ``loop_detected``.
- ``rule="same_tool"`` is the seed's strict rule: the same tool in each of the last
  ``repeat_limit`` steps is a loop, whatever its arguments.

A step's signature is the set of calls it made, so parallel calls in one step count once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import orjson

from thinkloop.core.events import GuardBlocked
from thinkloop.core.types import ToolCall, ToolResult
from thinkloop.guard.run_memory import RunMemory
from thinkloop.hooks import Hook, RunState, ToolHookContext

DUPLICATE_NOTE = ("\n\n[Note: you already made this exact call ({name} with the same "
                  "arguments) in step {step}; this is that result. Do not repeat it.]")
SAME_STEP_NOTE = ("[Note: duplicate of call {first} in this same step, which has the result; "
                  "this copy was not run.]")
LOOP_NOTE = ("Loop detected: {pattern}. This call was not run. Change approach: use a "
             "different tool or different arguments, or give your final answer now.")
ANSWER_NOW = ("You repeated a call whose result you already have ({name}, see above). No "
              "tools are available for this reply: give your final answer now from the "
              "results you have.")


@dataclass(frozen=True)
class LoopSettings:
    dedup: bool = True
    detect_loops: bool = True
    repeat_limit: int = 3
    # "progress": only repeated calls, repeated results or A-B-A-B cycles are loops;
    # "same_tool": the seed's rule, the same tool in each of the last repeat_limit steps.
    rule: Literal["progress", "same_tool"] = "progress"
    # A repeated identical call takes the tools away for the next reply, so the model answers.
    answer_on_repeat: bool = True


@dataclass
class _Run:
    strikes: int = 0
    # The calls of the step in progress (key -> id): only the current step is ever asked,
    # so earlier steps' are not kept (a dict per step, made before every call, they were).
    step: int = -1
    step_calls: dict[str, str] = field(default_factory=dict)
    # What the checks read about the run's finished steps, kept up to date step by step in
    # one pass over each new step (not recomputed over the whole run before every call, nor
    # walked once per check): the run's steps read so far,
    read: int = 0
    # each call key's first successful result that is still current, with its step,
    results: dict[str, tuple[int, ToolResult]] = field(default_factory=dict)
    # the signature of every step that made calls (call keys, or tool names),
    signatures: list[frozenset[str]] = field(default_factory=list)
    # and each call key's last result and how many times in a row it came back the same.
    streaks: dict[str, tuple[str, int]] = field(default_factory=dict)
    changes_state: frozenset[str] | None = None  # the run's tools that are not idempotent
    # Each call's key, worked out once: a call's key was serialised up to five times (the
    # check, the loop test, the step's signature, the results and the streaks). By id, with
    # the call held so that its id stays its own for the run.
    keys: dict[int, tuple[ToolCall, str]] = field(default_factory=dict)

    def key(self, call: ToolCall) -> str:
        kept = self.keys.get(id(call))
        if kept is not None and kept[0] is call:
            return kept[1]
        key = call_key(call)
        self.keys[id(call)] = (call, key)
        return key

    def catch_up(self, state: RunState, with_args: bool) -> None:
        """Read the steps finished since the last call. A result stays current until a call
        to a tool in ``changes_state`` (the same set every time) runs after it;
        ``with_args``: a step's signature is its call keys (the same each time), else its
        tool names."""
        steps = state.steps
        if self.read == len(steps):
            return
        changes_state = self.changes_state or frozenset()
        for step in steps[self.read:]:
            calls = step.tool_calls
            if calls:
                self.signatures.append(
                    frozenset(self.key(c) if with_args else c.name for c in calls))
                if changes_state and any(c.name in changes_state for c in calls):
                    self.results.clear()
            for r in step.results:
                k = self.key(r.call)
                if not r.is_error:
                    self.results.setdefault(k, (step.index, r))
                last, count = self.streaks.get(k, ("", 0))
                self.streaks[k] = (r.content, count + 1 if count and last == r.content else 1)
        self.read = len(steps)

    def same_results(self, key: str) -> int:
        """How many times in a row the call ``key`` got the same result (0: never made)."""
        return self.streaks.get(key, ("", 0))[1]


def call_key(call: ToolCall) -> str:
    args = orjson.dumps(call.arguments, option=orjson.OPT_SORT_KEYS, default=str).decode()
    return f"{call.name}:{args}"


def loop_pattern(history: list[frozenset[str]], this: str, repeat_limit: int) -> str | None:
    """Describe the loop ``this`` (a tool name or a call key) would make after these step
    signatures, or None."""
    # A signature equal to {this} is one of one call, this one: tested so, without making
    # that set before every call, and the label only worked out for a loop found.
    recent = history[-repeat_limit:]
    if len(recent) == repeat_limit and all(len(sig) == 1 and this in sig for sig in recent):
        label = this.split(":", 1)[0]
        same = "" if label == this else " with the same arguments"
        return f"{label} was called{same} in each of the last {repeat_limit} steps"
    if len(history) >= 3:
        a, b, c = history[-3:]
        if len(b) == 1 and this in b and a == c and a != b and len(a) == 1:
            other = next(iter(a)).split(":", 1)[0]
            return f"the steps cycle between {other} and {this.split(':', 1)[0]}"
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
        if run.changes_state is None:  # the run's tools are fixed: worked out once
            run.changes_state = _changes_state(ctx)
        state = ctx.state
        run.catch_up(state, self.settings.rule != "same_tool")
        if run.step != state.step:
            run.step, run.step_calls = state.step, {}
        seen = run.step_calls
        key = run.key(call)
        first_in_step = not seen
        repeatable = ctx.tool is not None and not ctx.tool.idempotent
        if self.settings.detect_loops and first_in_step and self._loop(ctx, run, call, key):
            return
        if self.settings.dedup and not repeatable:
            if key in seen:
                self._answer(ctx, call, SAME_STEP_NOTE.format(first=seen[key]), "duplicate")
                return
            earlier = run.results.get(key)
            if earlier is not None:
                step, result = earlier
                text = result.content + DUPLICATE_NOTE.format(name=call.name, step=step)
                self._answer(ctx, call, text, "duplicate")
                if self.settings.answer_on_repeat:
                    ctx.withhold_tools(ANSWER_NOW.format(name=call.name))
        seen.setdefault(key, call.id)

    def _loop(self, ctx: ToolHookContext, run: _Run, call: ToolCall, key: str) -> bool:
        limit = self.settings.repeat_limit
        if self.settings.rule == "same_tool":
            pattern = loop_pattern(run.signatures, call.name, limit)
        else:
            pattern = loop_pattern(run.signatures, key, limit)
            if pattern is None and limit >= 2 and run.same_results(key) >= limit:
                pattern = (f"{call.name} returned the same result for the same arguments the "
                           f"last {limit} times it was called")
        if pattern is None:
            run.strikes = 0
            return False
        run.strikes += 1
        if run.strikes > 1:
            reason = f"loop detected twice: {pattern}"
            ctx.emit(GuardBlocked, guard="loop", tool=call.name, id=call.id, reason=reason,
                     final=True)
            ctx.stop(reason, "loop_detected")
            return True
        self._answer(ctx, call, LOOP_NOTE.format(pattern=pattern), "loop")
        return True

    def _answer(self, ctx: ToolHookContext, call: ToolCall, text: str, guard: str) -> None:
        # Not an error: nothing failed, the model is told what it already has.
        ctx.emit(GuardBlocked, guard=guard, tool=call.name, id=call.id, reason=text.strip())
        ctx.result = ToolResult(call, text)


def _changes_state(ctx: ToolHookContext) -> frozenset[str]:
    return frozenset(name for name, t in ctx.cfg.tools.items() if not t.idempotent)
