"""Per-call client CPU as a run's history grows (issue 38, goal 2: cost flat in history).

The same deterministic loopback server as ``overhead.py`` (a subprocess, so it has its own
core): a model named ``steps-N`` asks for one ``echo`` call per step for N steps, then answers.
Each run is N + 1 model calls over the real HTTP transport. For 10, 50, 100 and 200 steps the
default agent, the lean agent (``guard=False``) and the bare aiohttp loop (the floor: it
re-encodes the whole history per call as every client must) each do ``--runs`` sequential
runs; the figure is this process's CPU time per model call (``time.process_time``), the median
over ``--repeat`` repeats, and its ratio to the 10-step figure of the same loop in the same
repeat (goal: 200 steps within 1.2x of 10 steps, lean and default).

Usage: python benchmarks/history.py [--runs 3] [--repeat 3] [--steps 10 50 100 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable

import aiohttp
import orjson
from overhead import TOOLS, bare_step, echo, first_messages

from thinkloop import Agent
from thinkloop.models.openai_compat import OpenAICompatModel

GOAL = 1.2


async def cpu_per_call(fn: Callable[[], Awaitable[None]], runs: int, calls: int) -> float:
    cpu = time.process_time()
    for _ in range(runs):
        await fn()
    return (time.process_time() - cpu) / (runs * calls) * 1e6


def loops(base_url: str, steps: int, session: aiohttp.ClientSession
          ) -> dict[str, Callable[[], Awaitable[None]]]:
    model = OpenAICompatModel(f"steps-{steps}", base_url=base_url, api_key="x")
    default = Agent(model, tools=[echo], max_steps=steps + 2)
    lean = Agent(model, tools=[echo], max_steps=steps + 2, guard=False)

    def agent_run(agent: Agent) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            result = await agent.run("go")
            assert result.status == "completed" and len(result.steps) == steps + 1, result
        return run

    async def bare() -> None:
        messages = first_messages()
        while True:
            body = orjson.dumps({"model": f"steps-{steps}", "messages": messages,
                                 "tools": TOOLS})
            async with session.post(base_url + "/chat/completions", data=body,
                                    headers={"content-type": "application/json"}) as r:
                data = orjson.loads(await r.read())
            if bare_step(messages, data):
                return

    return {"default": agent_run(default), "lean": agent_run(lean), "bare aiohttp": bare}


async def measure(base_url: str, args: argparse.Namespace) -> dict[tuple[str, int], list[float]]:
    out: dict[tuple[str, int], list[float]] = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        fns = {steps: loops(base_url, steps, session) for steps in args.steps}
        for by_name in fns.values():
            for fn in by_name.values():
                await fn()  # warm up imports, caches and connections
        for _ in range(args.repeat):  # interleaved, so drift hits every cell alike
            for steps, by_name in fns.items():
                for name, fn in by_name.items():
                    us = await cpu_per_call(fn, args.runs, steps + 1)
                    out.setdefault((name, steps), []).append(us)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--steps", type=int, nargs="+", default=[10, 50, 100, 200])
    args = p.parse_args()
    server = subprocess.Popen(
        [sys.executable, "-m", "thinkloop.testing.openai_server", "--port", "0"],
        stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    base_url = server.stdout.readline().split()[-1]  # "listening on http://127.0.0.1:N/v1"
    load = os.getloadavg()[0]
    try:
        res = asyncio.run(measure(base_url, args))
    finally:
        server.terminate()
        server.wait()
    first = args.steps[0]
    print(f"load {load:.1f} -> {os.getloadavg()[0]:.1f} (1 min) on {os.cpu_count()} cores; "
          f"{args.runs} runs per cell, median of {args.repeat}")
    print(f"client CPU µs per model call (ratio to {first} steps, same repeat; goal "
          f"{args.steps[-1]} steps <= {GOAL}x)")
    names = ["default", "lean", "bare aiohttp"]
    print(f"{'steps':>6}" + "".join(f"{n:>22}" for n in names))
    for steps in args.steps:
        cells = []
        for name in names:
            vals, base = res[name, steps], res[name, first]
            ratio = statistics.median(v / b for v, b in zip(vals, base, strict=True))
            cells.append(f"{statistics.median(vals):8.0f} ({ratio:4.2f}x)".rjust(22))
        print(f"{steps:>6}" + "".join(cells))


if __name__ == "__main__":
    main()
