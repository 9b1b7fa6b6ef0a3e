"""Where a model call's client CPU goes at 200 concurrent runs, part by part.

``overhead.py`` times whole loops and ``profile_step.py`` counts their calls. This script times
the parts on their own, 200 at a time, in CPU microseconds per model call (this process; the
loopback server of ``overhead.py`` has its own):

* HTTP alone: 11 calls per task with the first request's history, made three ways. The bare
  aiohttp post with orjson is the floor. ``transport.post`` is thinkloop's HTTP layer with a
  ready body. ``model.complete`` adds encoding the messages, retries, decoding and pricing.
* the loop alone: a 10-step run (+1 final call) of the default and the lean agent, in process,
  on a model that answers at once (one ``sleep(0)`` per call, no HTTP).
* the whole: the same runs of ``overhead.py`` against the server.
* the loop alone as runs get longer (10, 50 and 150 steps): what a step costs as the history
  it reads before every call grows.

The whole cost minus "loop alone + model.complete" is what neither part shows alone: the
bigger live heap of 200 runs, deeper coroutine stacks to resume, and a history that grows.

Usage: python benchmarks/step_parts.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).parent))
import overhead  # the loops and the server live there

from thinkloop import Agent
from thinkloop.models.base import ModelSettings
from thinkloop.types import Message, ModelResponse, TextDelta, ToolCall, ToolSpec, Usage

RUNS = 200
CALLS = overhead.STEPS + 1
ECHO = ToolSpec("echo", "Echo the text back.",
                {"type": "object", "properties": {"text": {"type": "string"}},
                 "required": ["text"]})
FIRST = [Message.system("You are a helpful assistant."), Message.user("go")]


class AtOnce:
    """Calls ``echo`` with new text for ``steps`` steps, then answers, waiting on nothing."""

    name = "at-once"

    def __init__(self, steps: int = overhead.STEPS) -> None:
        self.steps = steps

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec],
                       settings: ModelSettings) -> ModelResponse:
        await asyncio.sleep(0)  # a real model call suspends the run at least once
        # The step comes from the last result ("step N"), not from counting results: a long
        # run's middle steps are compacted out of the history the model sees.
        last = next((m for m in reversed(messages) if m.role == "tool"), None)
        n = int(last.content.split()[1]) + 1 if last is not None else 0
        if n >= self.steps:
            # Substantive: the termination review would reject a bare "done".
            return ModelResponse(Message.assistant("All the echoes came back as sent."),
                                 Usage(1, 10, 2))
        call = ToolCall(f"call_{n}", "echo", {"text": f"step {n}"})
        return ModelResponse(Message.assistant("", (call,)), Usage(1, 10, 2))

    async def stream(self, messages: Sequence[Message], tools: Sequence[ToolSpec],
                     settings: ModelSettings) -> AsyncIterator[TextDelta | ModelResponse]:
        yield await self.complete(messages, tools, settings)


async def per_call(fn: Callable[[], Awaitable[None]], calls: int, repeat: int,
                   runs: int = RUNS) -> float:
    """Median CPU microseconds per model call of ``runs`` tasks of ``fn`` at once."""
    await overhead.timed(fn, runs, runs)  # warm: pools, caches
    samples = [(await overhead.timed(fn, runs, runs))[1] for _ in range(repeat)]
    return statistics.median(samples) / (runs * calls) * 1e6


GROWTH_STEPS = (10, 50, 150)
GROWTH_RUNS = 20


async def growth(repeat: int) -> dict[tuple[str, int], float]:
    """The loop alone, CPU us per model call, as runs get longer (20 runs at once)."""
    out: dict[tuple[str, int], float] = {}
    for steps in GROWTH_STEPS:
        for name, options in (("default", {}), ("lean", {"guard": False})):
            agent = Agent(AtOnce(steps), tools=[overhead.echo], max_steps=steps + 2,
                          **options)  # type: ignore[arg-type]

            async def run(agent: Agent = agent, steps: int = steps) -> None:
                result = await agent.run("go")
                assert result.status == "completed" and len(result.steps) == steps + 1, result

            out[name, steps] = await per_call(run, steps + 1, repeat, runs=GROWTH_RUNS)
    return out


async def measure(base_url: str, repeat: int) -> dict[str, float]:
    out: dict[str, float] = {}
    async with overhead.Loops(base_url) as loops:
        body = orjson.dumps({"model": overhead.MODEL, "messages": overhead.first_messages(),
                             "tools": overhead.TOOLS})
        settings = ModelSettings()

        async def bare_post() -> None:
            for _ in range(CALLS):
                async with loops.session.post(loops.url, data=body,
                                              headers={"content-type": "application/json"}) as r:
                    orjson.loads(await r.read())

        async def transport_post() -> None:
            for _ in range(CALLS):
                raw = await loops.model.transport.post(loops.url, body, loops.model.headers,
                                                       settings.timeout_s)
                orjson.loads(raw)

        async def complete() -> None:
            for _ in range(CALLS):
                await loops.model.complete(FIRST, [ECHO], settings)

        out["bare aiohttp post"] = await per_call(bare_post, CALLS, repeat)
        out["transport.post"] = await per_call(transport_post, CALLS, repeat)
        out["model.complete"] = await per_call(complete, CALLS, repeat)
        for name, agent in (
                ("default", Agent(AtOnce(), tools=[overhead.echo],
                                  max_steps=overhead.STEPS + 2)),
                ("lean", Agent(AtOnce(), tools=[overhead.echo], max_steps=overhead.STEPS + 2,
                               guard=False))):

            async def run(agent: Agent = agent) -> None:
                result = await agent.run("go")
                assert result.status == "completed", result

            out[f"loop alone, {name}"] = await per_call(run, CALLS, repeat)
        out["whole, bare aiohttp"] = await per_call(loops.bare_aiohttp, CALLS, repeat)
        out["whole, default"] = await per_call(loops.thinkloop, CALLS, repeat)
        out["whole, lean"] = await per_call(loops.thinkloop_lean, CALLS, repeat)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--port", type=overhead.port_arg, default="0")
    args = parser.parse_args()
    with overhead.serving(args.port):
        res = asyncio.run(measure(f"http://127.0.0.1:{args.port}/v1", args.repeat))
    print(f"client CPU per model call, {RUNS} at once, median of {args.repeat}, "
          f"load average {os.getloadavg()[0]:.2f}\n")
    print(f"{'part':<26} {'CPU us':>7} {'x bare post':>12}")
    floor = res["bare aiohttp post"]
    for name, us in res.items():
        print(f"{name:<26} {us:>7.1f} {us / floor:>12.2f}")
    print()
    for name in ("default", "lean"):
        parts = res[f"loop alone, {name}"] + res["model.complete"]
        print(f"{name}: loop alone + model.complete = {parts:.1f} us; the whole costs "
              f"{res[f'whole, {name}'] - parts:+.1f} us more")
    grown = asyncio.run(growth(args.repeat))
    print(f"\nthe loop alone as runs get longer: CPU us per model call, {GROWTH_RUNS} runs at "
          f"once (history: 2 messages a step)\n")
    print(f"{'steps':>6} {'default':>8} {'lean':>6}")
    for steps in GROWTH_STEPS:
        print(f"{steps:>6} {grown['default', steps]:>8.1f} {grown['lean', steps]:>6.1f}")


if __name__ == "__main__":
    main()
