"""What a model call's ``chat`` span costs on the stored (direct) path: the tracked objects
each call holds while in flight (200 calls at once) and CPU µs per call (sequential), for a
traced model around an inner model that answers at once. The inner model alone is the
baseline. Compare trees by ``PYTHONPATH`` (e.g. main's ``src`` against a branch's).

Usage: python benchmarks/trace_chat.py [--calls 5000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from thinkloop.core.model import ModelSettings
from thinkloop.core.types import Message, ModelResponse, Usage
from thinkloop.tracing import TracedModel, Tracing

RESPONSE = ModelResponse(Message("assistant", "ok"), Usage(1, 10, 5, 0.001), "stop", "openai:x")


class Inner:
    name = "openai:x"

    def __init__(self) -> None:
        self.gate: asyncio.Event | None = None

    async def complete(self, messages: Sequence[Message], tools: Sequence[Any],
                       settings: ModelSettings) -> ModelResponse:
        if self.gate is not None:
            await self.gate.wait()
        return RESPONSE


async def in_flight(call: Any, inner: Inner, n: int = 200) -> float:
    """Tracked objects per call while ``n`` calls wait on the inner model."""
    inner.gate = asyncio.Event()
    gc.collect()
    gc.disable()
    before = len(gc.get_objects())
    tasks = [asyncio.ensure_future(call()) for _ in range(n)]
    for _ in range(5):
        await asyncio.sleep(0)
    during = len(gc.get_objects())
    inner.gate.set()
    await asyncio.gather(*tasks)
    gc.enable()
    inner.gate = None
    return (during - before) / n


async def main(calls: int, repeat: int) -> None:
    tracing = Tracing(direct=True)
    inner = Inner()
    model = TracedModel(inner, tracing)  # type: ignore[arg-type]
    root = tracing.tracer.start_span("invoke_agent bench")
    trace_id = root.get_span_context().trace_id
    tracing.store.open(trace_id)  # a stored run's trace: its spans are kept as rows
    otel_context.attach(trace.set_span_in_context(root))
    msgs, settings = [Message("user", "hi")], ModelSettings()

    def traced() -> Any:
        return model.complete(msgs, [], settings)

    def bare() -> Any:
        return inner.complete(msgs, [], settings)

    for _ in range(100):
        await traced()
    tracing.store.take(trace_id)
    print(f"tracked objects per call in flight: traced {await in_flight(traced, inner):.1f}, "
          f"inner model alone {await in_flight(bare, inner):.1f}")
    tracing.store.take(trace_id)
    for name, call in (("traced", traced), ("inner model alone", bare)):
        samples = []
        for _ in range(repeat):
            t = time.process_time()
            for i in range(calls):
                await call()
                if i % 100 == 99:
                    tracing.store.take(trace_id)  # as a step's write takes them
            samples.append((time.process_time() - t) / calls * 1e6)
        print(f"CPU µs per call, {name}: median {statistics.median(samples):.2f}, "
              f"min {min(samples):.2f} ({repeat} x {calls})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.repeat))
