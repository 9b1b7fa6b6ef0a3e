"""The stored trace's own code per step, in isolation: CPU µs a step, median of 7 samples.

A step here is what a recorded run's trace does for one model call and one tool call: the
``RunTrace`` reads the step's events (request, response, tool call and result, step done),
the traced model makes its ``chat`` row, the tool hooks make the tool's span current and
restore the context, and the finished spans are taken as rows (what a step's write takes).
No store, no HTTP, no other run: what ``records_cost.py --split`` calls the trace's cost at
200 runs in flight also holds the span rows' inserts, the collector's share of the trace's
objects and cache misses; this is the part that is the trace's own code (issue 38).

Usage: PYTHONPATH=src python benchmarks/trace_code.py [--steps 20000] [--label NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Sequence
from types import SimpleNamespace as NS
from typing import Any

from thinkloop.core.events import (
    LlmRequest,
    LlmResponse,
    RunCompleted,
    RunStarted,
    StepCompleted,
    ToolCalled,
    ToolReturned,
)
from thinkloop.core.model import ModelSettings
from thinkloop.core.types import Message, ModelResponse, Usage
from thinkloop.tracing import Tracing


class Answering:
    """A model that answers at once (no I/O: only the trace's code is timed)."""

    name = "openai:gpt-x"

    def __init__(self) -> None:
        self.response = ModelResponse(Message.assistant("hi"), Usage(1, 100, 10, 0.01),
                                      "tool_calls", "gpt-x")

    async def complete(self, messages: Sequence[Message], tools: Sequence[Any],
                       settings: ModelSettings) -> ModelResponse:
        return self.response


async def sample(tracing: Tracing, steps: int, rep: int) -> float:
    model = tracing.wrap(Answering())  # type: ignore[arg-type]  # the calls it takes
    cfg = NS(model=NS(name=model.name), session_id=None, user_id=None)
    state = NS(run_id=f"run{rep}", task="go", step=0, usage=Usage(), steps=[], status=None,
               error=None, error_text=None)
    run = tracing.follow(cfg, state, "bench", True)  # type: ignore[arg-type]
    run.on_event(RunStarted(state.run_id, 0, "go", model.name))
    messages, settings = [Message.user("go")], ModelSettings()
    start = time.process_time()
    for i in range(steps):
        run.on_event(LlmRequest(state.run_id, i, 2, ["echo"]))
        await model.complete(messages, [], settings)
        run.on_event(LlmResponse(state.run_id, i, "", None, [], {}, "tool_calls", "gpt-x"))
        call_id = f"call{i}"
        run.on_event(ToolCalled(state.run_id, i, call_id, "echo", {"text": "hello"}))
        hook = NS(run_id=state.run_id, call=NS(id=call_id))
        tracing._enter_tool(hook)  # type: ignore[arg-type]
        tracing._leave_tool(hook)  # type: ignore[arg-type]
        run.on_event(ToolReturned(state.run_id, i, call_id, "echo", False, "hello", 0.0))
        run.on_event(StepCompleted(state.run_id, i, 1))
        run.take_spans()
    spent = (time.process_time() - start) / steps * 1e6
    state.status = "completed"
    run.on_event(RunCompleted(state.run_id, steps, "completed", "", None, False, {}))
    run.take_spans(close=True)
    return spent


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--label", default="this tree")
    args = parser.parse_args()
    tracing = Tracing(direct=True)
    samples = [await sample(tracing, args.steps, rep) for rep in range(7)]
    print(f"{args.label}: the trace's code {statistics.median(samples):.2f} µs a step "
          f"(median of 7: {' '.join(f'{s:.1f}' for s in samples)})")


if __name__ == "__main__":
    asyncio.run(main())
