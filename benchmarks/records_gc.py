"""What the durable run records cost the garbage collector: collections by generation and
the collector's CPU per model call, for the lean agent on SQLite and on the in-process
store, at 200 concurrent 10-step runs.

The collector's settings are left as they are; ``gc.callbacks`` counts each collection and
times it (this process's CPU between its start and its stop). CPython 3.11 runs a young
collection whenever the allocations of tracked objects, less their deallocations, pass 700
since the last one, and a full one once more than ten middle collections have passed and
enough objects were promoted since the last: the objects the records allocate per call decide
how often either runs.

Usage: python benchmarks/records_gc.py [--repeat 3] [--runs 200]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import overhead  # the loops and the server live there

from thinkloop import Agent
from thinkloop.store import open_store


class Collections:
    """Collections by generation and the collector's CPU seconds, while counting."""

    def __init__(self) -> None:
        self.counts = [0, 0, 0]
        self.cpu = 0.0
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.process_time()
        else:
            self.counts[info["generation"]] += 1
            self.cpu += time.process_time() - self._began


async def measure(port: int, args: argparse.Namespace) -> dict[str, list[tuple[float, ...]]]:
    calls = args.runs * (overhead.STEPS + 1)
    out: dict[str, list[tuple[float, ...]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        async with overhead.Loops(f"http://127.0.0.1:{port}/v1") as loops:
            sqlite = open_store(f"{tmp}/runs.db")
            agents = {
                "lean, memory store": Agent(loops.model, tools=[overhead.echo],
                                            max_steps=overhead.STEPS + 2, guard=False,
                                            store="memory"),
                "lean, SQLite store": Agent(loops.model, tools=[overhead.echo],
                                            max_steps=overhead.STEPS + 2, guard=False,
                                            store=sqlite)}

            def runner(agent: Agent) -> Any:
                async def run() -> None:
                    result = await agent.run("go")
                    assert result.status == "completed", result
                return run

            for agent in agents.values():
                await overhead.timed(runner(agent), 20, 20)
            for _ in range(args.repeat):
                for name, agent in agents.items():
                    counting = Collections()
                    gc.callbacks.append(counting)
                    try:
                        cpu = (await overhead.timed(runner(agent), args.runs, args.runs))[1]
                    finally:
                        gc.callbacks.remove(counting)
                    out.setdefault(name, []).append(
                        (cpu / calls * 1e6, counting.cpu / calls * 1e6, *counting.counts))
            await sqlite.aclose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--port", type=overhead.port_arg, default="0")
    args = parser.parse_args()
    with overhead.serving(args.port):
        out = asyncio.run(measure(args.port, args))
    print(f"\n{args.runs} concurrent {overhead.STEPS}-step runs, median of {args.repeat} "
          f"(interleaved), load average {os.getloadavg()[0]:.2f}\n")
    print(f"{'loop':<22}{'CPU µs/call':>13}{'GC µs/call':>12}"
          f"{'young':>8}{'middle':>8}{'full':>6}")
    for name, samples in out.items():
        cols = [statistics.median(s[i] for s in samples) for i in range(5)]
        print(f"{name:<22}{cols[0]:>13.0f}{cols[1]:>12.0f}"
              f"{cols[2]:>8.0f}{cols[3]:>8.0f}{cols[4]:>6.0f}")


if __name__ == "__main__":
    main()
